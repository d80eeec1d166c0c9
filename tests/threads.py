"""The fixture every package of tiny-model tests shares: one intra-op thread.

A package's conftest imports it (`from threads import one_thread`), which makes it autouse there.
"""

import pytest
import torch


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny models run fastest on one thread (and leave the other core to other jobs)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
