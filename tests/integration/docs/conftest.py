"""The documentation site, built once per test session (`mkdocs build --strict`, in process so that
the hooks' imports of aiayn and torch are paid once), for the tests that read the built HTML."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import NamedTuple

import pytest

ROOT = Path(__file__).resolve().parents[3]


class Build(NamedTuple):
    ok: bool
    log: str  # the warnings and errors MkDocs logged (a dead link, a griffe warning, ...)


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def build(config: Path, site: Path) -> Build:
    """`mkdocs build --strict -f CONFIG -d SITE`, as the command runs it."""
    from mkdocs.commands.build import build as build_site
    from mkdocs.config import load_config
    from mkdocs.exceptions import Abort

    collect = _Collect()
    logger = logging.getLogger("mkdocs")
    logger.addHandler(collect)
    try:
        settings = load_config(str(config), strict=True, site_dir=str(site))
        settings.plugins.on_startup(command="build", dirty=False)
        try:
            build_site(settings)
        finally:
            settings.plugins.on_shutdown()
        ok = True
    except Abort:
        ok = False
    finally:
        logger.removeHandler(collect)
    return Build(ok, "\n".join(collect.lines))


@pytest.fixture(scope="session")
def built_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site of the repository's docs/, built with --strict (the build must pass)."""
    site = tmp_path_factory.mktemp("site")
    done = build(ROOT / "mkdocs.yml", site)
    assert done.ok, f"mkdocs build --strict failed:\n{done.log}"
    return site
