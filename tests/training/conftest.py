"""Shared helpers for training tests: tiny configs on the built-in tasks."""

from __future__ import annotations

import pytest
import torch

from aiayn.tasks import config_from_dict


def tiny_config(**train) -> dict:
    """A tiny copy-task config that trains in seconds on a CPU."""
    return {
        "data": {
            "task": "copy",
            "seed": 3,
            "num_train": 400,
            "num_valid": 40,
            "num_test": 20,
            "tokenizer": "char",
            "max_sentence_tokens": 40,
        },
        "model": {"preset": "tiny", "dropout": 0.1, "max_len": 64},
        "train": {
            "max_steps": 12,
            "batch_tokens": 400,
            "schedule": "inverse_sqrt",
            "lr": 0.003,
            "warmup": 5,
            "eval_every": 6,
            "log_every": 2,
            "progress": "none",
            "bleu_max_sentences": 10,
            "test_beam": 1,
            "threads": 1,
            "precision": "fp32",  # 'auto' measures, and may choose differently run to run
        }
        | train,
    }


@pytest.fixture
def one_thread():
    """One intra-op thread, as train.threads=1 gives `aiayn train` (a tiny model gains nothing from
    a second, which stalls on a busy core); for tests that drive a `Trainer` directly."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def make_config():
    def build(**train):
        return config_from_dict(tiny_config(**train))

    return build
