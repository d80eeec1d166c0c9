"""`mkdocs build --strict` builds the site without a warning, and fails on a dead link: to a
page, to an anchor, or to a repository file outside docs/ (the hook mounts those)."""

from __future__ import annotations

import shutil
from pathlib import Path

from .conftest import ROOT, build


def test_the_site_builds_strict(built_site: Path) -> None:
    assert (built_site / "paper" / "index.html").is_file()
    results = built_site / "repo" / "benchmarks" / "RESULTS" / "index.html"
    assert results.is_file(), "benchmarks/RESULTS.md is not part of the site"
    assert 'href="../repo/benchmarks/RESULTS/' in (built_site / "results" / "index.html").read_text()
    for page in ("reference/settings", "reference/commands", "reference/api", "install", "changelog"):
        assert (built_site / page / "index.html").is_file(), f"the site has no {page} page"


def test_a_planted_dead_link_fails_the_strict_build(tmp_path: Path) -> None:
    copy = tmp_path / "repo"
    copy.mkdir()
    shutil.copytree(ROOT / "docs", copy / "docs")
    shutil.copy(ROOT / "mkdocs.yml", copy / "mkdocs.yml")
    for name in ("benchmarks", "src", "CHANGELOG.md"):  # what the pages link to or include outside docs/
        (copy / name).symlink_to(ROOT / name)
    page = copy / "docs" / "training.md"
    planted = ["missing-page.md", "model.md#no-such-heading", "../benchmarks/NO_RESULTS.md"]
    page.write_text(page.read_text() + "".join(f"\n[planted]({link})\n" for link in planted))
    done = build(copy / "mkdocs.yml", tmp_path / "site")
    assert not done.ok
    for link in planted:
        assert link in done.log, f"the strict build did not report {link}:\n{done.log}"
