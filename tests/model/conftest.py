"""Model tests run on tiny tensors: one intra-op thread is faster than two fighting for
shared cores (the previous setting is restored after each test)."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True)
def _single_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
