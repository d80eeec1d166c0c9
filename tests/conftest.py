"""Fixtures shared by several test packages (this directory is on sys.path for them)."""

import os
import tempfile

import pytest

from shared_dates import train_dates_run

# Token stores made by the tests (every translation run makes one) go to a temporary cache, not
# beside the repository's runs; subprocesses inherit it.
os.environ.setdefault("AIAYN_CACHE", tempfile.mkdtemp(prefix="aiayn-test-stores-"))


@pytest.fixture(scope="session")
def dates_run(tmp_path_factory):
    """A `dates` model trained once per session (see `shared_dates`): its run directory."""
    return train_dates_run(tmp_path_factory.mktemp("dates"))
