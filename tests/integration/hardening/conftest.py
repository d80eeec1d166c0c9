"""Shared helpers for the hardening tests: tiny configs, training subprocesses, a tiny model."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import load_file

from aiayn import formats
from aiayn.training.checkpoint import list_checkpoints

REFERENCE_STEPS = 60
"""Length of the uninterrupted reference run; interrupted runs are resumed to this step."""


def tiny_train_config(**train) -> dict:
    """A copy-task config with a very small model (about 25 ms a step on one CPU thread).

    Dropout is on, so a resumed run only matches an uninterrupted one when the random number
    generator state is restored too.
    """
    return {
        "data": {
            "task": "copy",
            "seed": 3,
            "num_train": 200,
            "num_valid": 8,
            "num_test": 0,
            "tokenizer": "char",
            "max_sentence_tokens": 20,
        },
        "model": {
            "preset": "tiny",
            "d_model": 32,
            "num_heads": 2,
            "num_encoder_layers": 1,
            "num_decoder_layers": 1,
            "d_ff": 64,
            "dropout": 0.1,
            "max_len": 48,
        },
        "train": {
            "max_steps": REFERENCE_STEPS,
            "batch_tokens": 200,
            "schedule": "inverse_sqrt",
            "lr": 0.003,
            "warmup": 5,
            "eval_every": 1000,
            "log_every": 1,
            "progress_bar": False,
            "bleu_max_sentences": 2,
            "threads": 1,
            "precision": "fp32",  # 'auto' times both at start-up and may choose differently run to run
        }
        | train,
    }


def write_config(path: Path, **train) -> Path:
    """Write `tiny_train_config(**train)` as YAML to `path`."""
    path.write_text(yaml.safe_dump(tiny_train_config(**train)), encoding="utf-8")
    return path


class TrainProcess:
    """`python -m aiayn train ARGS` in a subprocess; output goes to files (no pipe can fill)."""

    def __init__(self, args: list[str], log_dir: Path, pause_in_save: float | None = None) -> None:
        """`pause_in_save`: seconds each checkpoint save waits just before it is published
        (see `slow_save.py`), so that the test can kill the process in the middle of a save."""
        log_dir.mkdir(parents=True, exist_ok=True)
        self.stdout_path = log_dir / "stdout.txt"
        self.stderr_path = log_dir / "stderr.txt"
        if pause_in_save is None:
            command = [sys.executable, "-m", "aiayn", "train", *args]
        else:
            script = Path(__file__).with_name("slow_save.py")
            command = [sys.executable, str(script), str(pause_in_save), *args]
        with self.stdout_path.open("wb") as out, self.stderr_path.open("wb") as err:
            self.process = subprocess.Popen(
                command,
                stdout=out,
                stderr=err,
                env=os.environ | {"PYTHONUNBUFFERED": "1"},
            )

    def wait_until(self, condition: Callable[[], bool], what: str, timeout: float = 120.0) -> None:
        """Poll `condition` until it holds; fail (killing the process) if the process ends first."""
        deadline = time.monotonic() + timeout
        while not condition():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.process.kill()
                self.process.wait()
                pytest.fail(f"training process ended or timed out before {what}:\n{self.output()}")
            time.sleep(0.01)

    def send(self, signum: int) -> int:
        """Send `signum` and return the exit code."""
        self.process.send_signal(signum)
        try:
            return self.process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            pytest.fail(f"training did not stop within 120 s of {signal.Signals(signum).name}")

    def output(self) -> str:
        return self.stdout_path.read_text(errors="replace") + self.stderr_path.read_text(errors="replace")


def train_steps(run_dir: Path) -> list[int]:
    """Steps of the train records in `metrics.jsonl` (a torn last line is skipped)."""
    path = run_dir / "metrics.jsonl"
    steps = []
    if path.is_file():
        for line in path.read_text().splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if record.get("split") == "train":
                steps.append(record["step"])
    return steps


def checkpoint_step(checkpoint: Path) -> int:
    return int(checkpoint.name.removeprefix("step_"))


def final_weights(run_dir: Path) -> dict[str, torch.Tensor]:
    """The tensors of the newest checkpoint's `model.safetensors`."""
    return load_file(str(list_checkpoints(run_dir)[-1] / "model.safetensors"))


def assert_same_weights(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys()
    for name in a:
        assert torch.equal(a[name], b[name]), f"tensor {name} differs"


@pytest.fixture(autouse=True)
def restore_logging_and_threads():
    """In-process `aiayn train` adds log handlers (train.log) and sets torch's thread count;
    undo both so the tests do not leak into each other."""
    logger = logging.getLogger("aiayn")
    handlers, level, threads = list(logger.handlers), logger.level, torch.get_num_threads()
    yield
    for handler in logger.handlers[:]:
        if handler not in handlers:
            logger.removeHandler(handler)
            handler.close()
    logger.setLevel(level)
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def reference_run(tmp_path_factory) -> Path:
    """An uninterrupted run of REFERENCE_STEPS steps (in-process), to compare resumed runs with."""
    from aiayn.cli.main import main

    root = tmp_path_factory.mktemp("reference")
    config = write_config(root / "config.yaml")
    logger = logging.getLogger("aiayn")
    handlers, level, threads = list(logger.handlers), logger.level, torch.get_num_threads()
    try:
        assert main(["train", str(config), "--out", str(root / "run")]) == 0
    finally:
        torch.set_num_threads(threads)
        logger.setLevel(level)
        for handler in logger.handlers[:]:
            if handler not in handlers:
                logger.removeHandler(handler)
                handler.close()
    assert [checkpoint_step(c) for c in list_checkpoints(root / "run")] == [REFERENCE_STEPS]
    return root / "run"


TOKENIZER_TEXTS = ["ein hund läuft", "zwei katzen", "der mann liest ein buch", "a dog runs", "yes"]


def make_model_dir(directory: Path, max_len: int = 16) -> Path:
    """A model directory: a random (perturbed) tiny Transformer with a joint character tokenizer."""
    from aiayn.data import Tokenizer, TokenizerPair
    from aiayn.model import ModelConfig, Transformer

    tokenizer = Tokenizer.train("char", TOKENIZER_TEXTS)
    torch.manual_seed(0)
    config = ModelConfig.tiny(
        vocab_size=tokenizer.vocab_size,
        d_model=16,
        num_heads=2,
        num_encoder_layers=1,
        num_decoder_layers=1,
        d_ff=32,
        max_len=max_len,
    )
    model = Transformer(config)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.5 * torch.randn_like(parameter))
    formats.save_pretrained(model, directory)
    TokenizerPair(tokenizer, tokenizer).save(directory)
    return directory
