"""Fixtures shared by several test packages (this directory is on sys.path for them)."""

import os
import shutil
import tempfile

import pytest

from shared_dates import train_dates_run

# Token stores made by the tests (every translation run makes one) go to a temporary cache, not
# beside the repository's runs; subprocesses inherit it, and the session removes it at its end.
_TEST_STORES = None if "AIAYN_CACHE" in os.environ else tempfile.mkdtemp(prefix="aiayn-test-stores-")
if _TEST_STORES:
    os.environ["AIAYN_CACHE"] = _TEST_STORES


def pytest_sessionfinish(session, exitstatus) -> None:
    if _TEST_STORES:
        shutil.rmtree(_TEST_STORES, ignore_errors=True)


@pytest.fixture(autouse=True)
def own_user_cache(tmp_path_factory, monkeypatch):
    """Each test its own user cache directory ($AIAYN_CACHE_DIR: kept decoding steps, downloads),
    not yet made: what one test keeps never changes what another does (`--compile auto` uses a
    kept step where it finds one). Tests that share kept steps ask for `shared_kept_steps`."""
    directory = tmp_path_factory.getbasetemp() / "user-caches" / next(tempfile._get_candidate_names())
    monkeypatch.setenv("AIAYN_CACHE_DIR", str(directory))
    return directory


@pytest.fixture
def shared_kept_steps(tmp_path_factory, monkeypatch):
    """One user cache directory for the whole session, for the tests that compile the decoding
    step: each variant of a model's kept step is built once, by the first test that needs it."""
    directory = tmp_path_factory.getbasetemp() / "user-caches" / "shared"
    monkeypatch.setenv("AIAYN_CACHE_DIR", str(directory))
    return directory


@pytest.fixture(scope="session")
def dates_run(tmp_path_factory):
    """A `dates` model trained once per session (see `shared_dates`): its run directory."""
    return train_dates_run(tmp_path_factory.mktemp("dates"))
