"""Fixtures of the command tests (`tests/cli` mirrors `aiayn/cli`, one file per command): the
tiny trained models of the packages the commands run, made once per session."""

import pytest
import torch

from decoding.conftest import model_dir  # noqa: F401 (a fixture: a tiny translation model directory)
from serve.conftest import lm_dir, translation_dir  # noqa: F401 (fixtures: the service's two models)


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny models run fastest on one thread (and leave the other core to other jobs)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
