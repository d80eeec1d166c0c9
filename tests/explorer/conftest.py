"""Fixtures of the explorer tests: the tiny translation model of the attention pictures."""

import pytest
import torch

from plots.conftest import model_dir  # noqa: F401 (a fixture: a tiny translation model directory)


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny models run fastest on one thread (and leave the other core to other jobs)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
