"""The seed walkthrough, offline: a language model on a text with a GPT-2-layout tokenizer
(`aiayn lm train --tokenizer FILE`), `<|endoftext|>` as its start token, then `aiayn lm generate`."""

from __future__ import annotations

import json

from aiayn import formats
from aiayn.cli.main import main
from aiayn.data.special_tokens import SpecialTokens
from aiayn.data.tokenizer import Tokenizer
from aiayn.inference import stream_text
from aiayn.model import DecoderOnlyLM

from .conftest import END_OF_TEXT, gpt2_layout, save

LINES = [
    "It is a truth universally acknowledged, that a single man in possession of a good fortune",
    "must be in want of a wife. However little known the feelings or views of such a man may be",
    'on his first entering a neighbourhood, "this truth" is so well fixed in the minds of #1 $5!',
]
TEXT = "".join(f"{LINES[i % 3]} ({i})\n" for i in range(120))
BANG = '!"#$$#"!'
TINY_FIELDS = {
    "model.preset": "tiny", "model.d_model": 32, "model.d_ff": 64, "model.num_decoder_layers": 1,
    "data.block_size": 32, "train.batch_tokens": 256, "train.max_steps": 30, "train.eval_every": 10,
    "train.log_every": 10, "train.progress_bar": "false", "train.warmup": 5, "train.lr": 0.01,
    "train.schedule": "constant", "train.label_smoothing": 0.0, "train.threads": 1,
}  # fmt: skip
TINY = [arg for key, value in TINY_FIELDS.items() for arg in ("--set", f"{key}={value}")]


def test_gpt2_tokenizer_file_trains_generates_and_round_trips(tmp_path, capsys):
    tokenizer_file = save(gpt2_layout([TEXT], num_merges=200), tmp_path / "gpt2" / "tokenizer.json")
    text_file = tmp_path / "novel.txt"
    text_file.write_text(TEXT, encoding="utf-8")
    run_dir = tmp_path / "run"
    walkthrough = ["--set", f"data.special_tokens={{bos: '{END_OF_TEXT}', eos: '{END_OF_TEXT}'}}"]
    args = ["lm", "train", "--text", str(text_file), "--tokenizer", str(tokenizer_file)]
    assert main([*args, "--out", str(run_dir), *walkthrough, *TINY]) == 0
    capsys.readouterr()

    # The ids travel with the model: <|endoftext|> opens and closes, <pad> was appended after it.
    end = json.loads(tokenizer_file.read_text())["added_tokens"][0]["id"]
    config = json.loads((run_dir / "config.json").read_text())["config"]
    ids = (config["pad_id"], config["bos_id"], config["eos_id"], config["unk_id"])
    assert ids == (end + 1, end, end, None)
    assert config["tgt_vocab_size"] == end + 2

    # The validation loss falls.
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    val = [r["loss"] for r in records if r["split"] == "val"]
    assert len(val) == 3 and val[-1] < val[0] - 0.5

    # `aiayn lm generate` samples from it, through the model directory's tokenizer.
    generate = ["lm", "generate", "--model", str(run_dir), "--text", "It is", "--max-new-tokens", "20"]
    assert main([*generate, "--seed", "1"]) == 0
    sample = capsys.readouterr().out
    assert sample.startswith("It is") and len(sample) > len("It is\n")
    assert main([*generate, "--seed", "1"]) == 0 and capsys.readouterr().out == sample

    # `!"#$` (ids 0..3 here) survive the LM's tokenizer and its streamed decoding.
    model = formats.from_pretrained(DecoderOnlyLM, run_dir)
    tokenizer = Tokenizer.load(run_dir / "tokenizer.json", SpecialTokens.of(model.config))
    ids = tokenizer.encode(BANG)
    assert set(ids) <= {0, 1, 2, 3} and len(ids) == len(BANG)
    assert tokenizer.decode(ids) == "".join(stream_text(tokenizer, ids)) == BANG

    # A resumed run reads its own tokenizer file back (with the appended <pad>) to the same ids.
    assert main(["lm", "train", "--resume", str(run_dir), "--set", "train.max_steps=32"]) == 0
    last = sorted((run_dir / "checkpoints").iterdir())[-1]
    assert last.name == "step_000032"
    resumed = json.loads((last / "config.json").read_text())["config"]
    assert {k: resumed[k] for k in ("pad_id", "bos_id", "eos_id", "unk_id", "tgt_vocab_size")} == {
        k: config[k] for k in ("pad_id", "bos_id", "eos_id", "unk_id", "tgt_vocab_size")
    }
