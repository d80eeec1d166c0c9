"""A model directory whose tokenizer has more ids than the model's vocabulary is refused with
one clear error at every public entry point: `aiayn.load`, the CLI and `aiayn serve`."""

import pytest

import aiayn
from aiayn import formats
from aiayn.cli.main import main
from aiayn.core.errors import DataError
from aiayn.data import Tokenizer, TokenizerPair
from aiayn.model import DecoderOnlyLM, ModelConfig
from decoding.helpers import tiny_transformer

TEXT = "abcdefghijklmnopqrstuvwxyz"  # 26 characters + 4 specials: 30 ids for a 12-row embedding


@pytest.fixture(scope="module")
def too_small(tmp_path_factory):
    """(translation directory, language-model directory) with 12-row embeddings."""
    root = tmp_path_factory.mktemp("too_small")
    tokenizer = Tokenizer.train("char", [TEXT])
    assert tokenizer.vocab_size > 12
    formats.save_pretrained(tiny_transformer(0, vocab_size=12), root / "translation")
    TokenizerPair(tokenizer, tokenizer).save(root / "translation")
    formats.save_pretrained(DecoderOnlyLM(ModelConfig.tiny(vocab_size=12)), root / "lm")
    tokenizer.save(root / "lm" / "tokenizer.json")
    return root / "translation", root / "lm"


def test_load_refuses_it(too_small):
    for directory in too_small:
        with pytest.raises(DataError, match="has no row in the model's"):
            aiayn.load(directory, "cpu")


@pytest.mark.parametrize(
    "command",
    [["translate", "--text", "abc"], ["score", "--input", "{src}", "--ref", "{src}"],
     ["evaluate", "--input", "{src}", "--ref", "{src}"], ["lm", "generate", "--text", "abc"],
     ["serve", "--port", "0"]],
)
def test_every_command_gives_one_line(too_small, command, tmp_path, capsys):
    if command[0] == "serve":
        pytest.importorskip("fastapi", reason="the 'serve' extra is not installed")
    source = tmp_path / "src.txt"
    source.write_text("abc\n", encoding="utf-8")
    directory = too_small[1] if command[0] == "lm" else too_small[0]
    argv = [part.format(src=source) for part in command] + ["--model", str(directory)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "has no row in the model's" in err and len(err.strip().splitlines()) == 1
