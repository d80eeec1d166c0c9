"""Fixtures shared by several test packages (this directory is on sys.path for them)."""

import pytest

from shared_dates import train_dates_run


@pytest.fixture(scope="session")
def dates_run(tmp_path_factory):
    """A `dates` model trained once per session (see `shared_dates`): its run directory."""
    return train_dates_run(tmp_path_factory.mktemp("dates"))
