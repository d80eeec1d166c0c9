"""Loading a Hugging Face tokenizer and finding its special ids (`aiayn.data.special_tokens`)."""

from __future__ import annotations

import logging
import pickle
from pathlib import Path

import pytest
import tokenizers
from tokenizers import models

from aiayn.core.errors import ConfigError, DataError
from aiayn.data import Tokenizer, TokenizerPair
from aiayn.data.special_tokens import TRAINED_SPECIALS, SpecialTokens

from .conftest import END_OF_TEXT, gpt2_layout, save

TEXTS = ["The quick brown fox jumps over the lazy dog.", 'She said "hi" #1 $5!'] * 20
BANG = '!"#$ "$#! $$'  # text made only of the characters at ids 0..3 of a GPT-2 layout


@pytest.fixture(scope="module")
def gpt2_file(tmp_path_factory):
    return save(gpt2_layout(TEXTS, num_merges=40), tmp_path_factory.mktemp("gpt2") / "tokenizer.json")


def test_gpt2_layout_defaults(gpt2_file, caplog):
    with caplog.at_level(logging.INFO, logger="aiayn"):
        tokenizer = Tokenizer.load(str(gpt2_file))
    end = tokenizer.hf.token_to_id(END_OF_TEXT)
    # <|endoftext|> is both bos and eos; no unk; a padding token appended after it.
    assert tokenizer.specials == SpecialTokens(pad_id=end + 1, bos_id=end, eos_id=end, unk_id=None)
    assert tokenizer.vocab_size == end + 2 and tokenizer.id_to_token(end + 1) == "<pad>"
    assert "has no padding token: appended <pad>" in caplog.text and "grows by one row" in caplog.text


def test_ids_0_to_3_are_ordinary_characters(gpt2_file):
    tokenizer = Tokenizer.load(str(gpt2_file))
    ids = tokenizer.encode(BANG)
    assert {0, 1, 2, 3} <= set(ids)
    assert tokenizer.decode(ids) == BANG
    assert tokenizer.decode([0, 1, 2, 3]) == '!"#$'
    # Exactly the configured special ids are dropped, and nothing else.
    specials = tokenizer.specials
    assert tokenizer.decode([specials.bos_id, *ids, specials.eos_id, specials.pad_id]) == BANG


def test_special_tokens_are_never_read_from_text(gpt2_file):
    tokenizer = Tokenizer.load(str(gpt2_file))
    ids = tokenizer.encode(f"a{END_OF_TEXT}b<pad>")
    assert not tokenizer.specials.ids & set(ids)
    assert tokenizer.decode(ids) == f"a{END_OF_TEXT}b<pad>"


def test_a_directory_and_named_tokens(gpt2_file):
    named = Tokenizer.load(str(gpt2_file.parent), names={"bos": END_OF_TEXT, "eos": END_OF_TEXT, "unk": None})
    assert named.specials == Tokenizer.load(str(gpt2_file)).specials


def test_reading_the_saved_file_back_gives_the_same_ids(gpt2_file, tmp_path):
    tokenizer = Tokenizer.load(str(gpt2_file))
    tokenizer.save(tmp_path / "tokenizer.json")
    again = Tokenizer.load(tmp_path / "tokenizer.json")  # <pad> is now part of the file
    assert again.specials == tokenizer.specials and again.vocab_size == tokenizer.vocab_size
    assert again.encode(BANG) == tokenizer.encode(BANG)


def test_pickling_keeps_ids_and_behaviour(gpt2_file):
    tokenizer = Tokenizer.load(str(gpt2_file))
    copy = pickle.loads(pickle.dumps(tokenizer))  # how torchrun ranks receive it
    assert copy.specials == tokenizer.specials and copy.path == tokenizer.path
    assert copy.encode(f"x{END_OF_TEXT}") == tokenizer.encode(f"x{END_OF_TEXT}")


def test_explicit_names_override_the_rules(tmp_path):
    hf = gpt2_layout(TEXTS, num_merges=20)
    hf.add_special_tokens(["<|start|>", "<|stop|>", "<|fill|>"])
    path = save(hf, tmp_path / "three.json")
    with pytest.raises(DataError, match=r"three\.json: cannot tell which token is bos and eos"):
        Tokenizer.load(str(path))
    names = {"pad": "<|fill|>", "bos": "<|start|>", "eos": "<|stop|>"}
    tokenizer = Tokenizer.load(str(path), names=names)
    ids = {role: hf.token_to_id(token) for role, token in names.items()}
    assert tokenizer.specials == SpecialTokens(ids["pad"], ids["bos"], ids["eos"], None)
    assert tokenizer.vocab_size == hf.get_vocab_size(with_added_tokens=True)  # nothing appended


def test_conventional_names_and_the_models_unknown_token(tmp_path):
    vocab = {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "[MASK]": 4, "hello": 5, "world": 6}
    hf = tokenizers.Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    hf.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    hf.add_special_tokens(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    tokenizer = Tokenizer.load(str(save(hf, tmp_path / "bert.json")))
    assert tokenizer.specials == SpecialTokens(pad_id=0, bos_id=2, eos_id=3, unk_id=1)
    assert tokenizer.encode("hello there") == [5, 1]


def test_a_tokenizer_trained_by_aiayn_keeps_0_to_3(tmp_path):
    trained = Tokenizer.train("char", ["abc"])
    trained.save(tmp_path / "tokenizer.json")
    assert Tokenizer.load(str(tmp_path)).specials == TRAINED_SPECIALS


def test_bad_names_and_clashes(gpt2_file):
    with pytest.raises(DataError, match=r"tokenizer\.json: data\.special_tokens\.bos '<s>' is not a token"):
        Tokenizer.load(str(gpt2_file), names={"bos": "<s>"})
    with pytest.raises(DataError, match="padding token '<|endoftext|>' is also bos"):
        Tokenizer.load(str(gpt2_file), names={"pad": END_OF_TEXT})
    with pytest.raises(ConfigError, match="unknown role"):
        Tokenizer.load(str(gpt2_file), names={"start": END_OF_TEXT})
    with pytest.raises(ConfigError, match="must be a token string"):
        Tokenizer.load(str(gpt2_file), names={"bos": 3})


def test_missing_files_and_the_hub_offline(tmp_path, monkeypatch):
    with pytest.raises(DataError, match="no such file"):
        Tokenizer.load(str(tmp_path / "nope.json"))
    with pytest.raises(DataError, match="holds no tokenizer.json"):
        Tokenizer.load(str(tmp_path))

    def offline(name):
        raise Exception("request error: dns error: failed to lookup address information")

    monkeypatch.setattr(tokenizers.Tokenizer, "from_pretrained", offline)
    with pytest.raises(DataError) as error:
        Tokenizer.load("gpt2")
    message = str(error.value)
    assert "'gpt2'" in message and "internet" in message and "dns error" in message
    assert "path of its tokenizer.json" in message


def test_trained_kinds_and_a_loaded_tokenizer_for_both_sides(gpt2_file, caplog):
    char = Tokenizer.from_spec("char", ["abc"], 0)
    assert char.specials == TRAINED_SPECIALS
    with pytest.raises(ConfigError, match="data.special_tokens applies to a loaded tokenizer"):
        Tokenizer.from_spec("char", ["abc"], 0, {"bos": "<bos>"})
    with caplog.at_level(logging.WARNING, logger="aiayn"):
        pair = TokenizerPair.from_spec(str(gpt2_file), ["a"], ["b"], 0, joint=False)
    assert pair.is_joint and "joint_vocab: false ignored" in caplog.text


def test_a_path_object_is_never_a_hub_name(tmp_path, monkeypatch):
    def hub(name):
        raise AssertionError(f"asked the Hub for {name}")

    monkeypatch.setattr(tokenizers.Tokenizer, "from_pretrained", hub)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(DataError, match="gpt2: no such file"):
        Tokenizer.load(Path("gpt2"))
