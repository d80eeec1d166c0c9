"""One trained `dates` model for the whole test session (`tests/conftest.py`'s `dates_run`).

`aiayn train` on the built-in dates task with a loaded tokenizer whose special tokens are not
at ids 0..3 (there: ` ,-.`, ordinary characters), so the run also proves that the ids travel
with the model. Used by `tests/own_tokenizer` (the task is learnt, greedy and beam search) and
`tests/export` (its int8 CTranslate2 export). Its length, 1100 steps, is sized in
benchmarks/RESULTS.md ("The same task with a loaded tokenizer ...").
"""

from __future__ import annotations

import functools
import logging
from pathlib import Path

import tokenizers
import torch
from tokenizers import decoders, models

from aiayn.cli.main import main
from aiayn.data.synthetic import make_task

NAMES = {"bos": "[START]", "eos": "[END]"}
STEPS = 1100
SETTINGS = {
    "data.num_train": 30000, "data.num_valid": 100, "data.num_test": 400,
    "train.max_steps": STEPS, "train.max_minutes": "null", "train.eval_every": STEPS,
    "train.validation_metric": "loss", "train.progress_bar": "false",
}  # fmt: skip


def splits() -> dict[str, list[tuple[str, str]]]:
    """The run's own splits (`aiayn train` makes the same from the same settings); a copy of the
    lists, made once per session (a dozen tests ask for them)."""
    return {split: list(pairs) for split, pairs in _splits().items()}


@functools.cache
def _splits() -> dict[str, list[tuple[str, str]]]:
    return make_task("dates", 1, *(SETTINGS[f"data.num_{split}"] for split in ("train", "valid", "test")))


def char_tokenizer_with_specials_last(texts: list[str]) -> tokenizers.Tokenizer:
    """One token per character seen, then `[UNK]` (its model's unknown token) and the special
    tokens `[START]`, `[END]`; no padding token (aiayn appends one)."""
    chars = sorted({c for text in texts for c in text})
    vocab = {c: i for i, c in enumerate([*chars, "[UNK]"])}
    hf = tokenizers.Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="[UNK]", fuse_unk=False))
    hf.decoder = decoders.Fuse()
    hf.add_special_tokens(list(NAMES.values()))
    return hf


def train_dates_run(root: Path, *settings: str) -> Path:
    """Train the run in `root / "run"` (in-process) and return that directory; `settings` are
    more `--set` overrides (`tests/paper`: `train.implementation=paper`). The log handlers and
    thread count that in-process training sets are undone afterwards."""
    logger, threads = logging.getLogger("aiayn"), torch.get_num_threads()
    handlers, level = list(logger.handlers), logger.level
    path = root / "chars.json"
    char_tokenizer_with_specials_last([s + t for s, t in splits()["train"]]).save(str(path))
    names = "{" + ", ".join(f"{role}: '{token}'" for role, token in NAMES.items()) + "}"
    overrides = [f"data.tokenizer={path}", f"data.special_tokens={names}"]
    overrides += [f"{key}={value}" for key, value in SETTINGS.items()] + list(settings)
    try:
        assert main(["train", "--out", str(root / "run"), *[a for o in overrides for a in ("--set", o)]]) == 0
    finally:
        for handler in logger.handlers[:]:
            if handler not in handlers:
                logger.removeHandler(handler)
                handler.close()
        logger.setLevel(level)
        torch.set_num_threads(threads)
    return root / "run"
