"""`mkdocs build --strict` builds the site without a warning, and fails on a dead link: to a
page, to an anchor, or to a repository file outside docs/ (the hook mounts those)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def build(config: Path, site: Path) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)]
    return subprocess.run(command, capture_output=True, text=True, timeout=300)


def test_the_site_builds_strict(tmp_path: Path) -> None:
    done = build(ROOT / "mkdocs.yml", tmp_path / "site")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "site" / "paper" / "index.html").is_file()
    results = tmp_path / "site" / "repo" / "benchmarks" / "RESULTS" / "index.html"
    assert results.is_file(), "benchmarks/RESULTS.md is not part of the site"
    assert 'href="../repo/benchmarks/RESULTS/' in (tmp_path / "site" / "results" / "index.html").read_text()


def test_a_planted_dead_link_fails_the_strict_build(tmp_path: Path) -> None:
    copy = tmp_path / "repo"
    copy.mkdir()
    shutil.copytree(ROOT / "docs", copy / "docs")
    shutil.copy(ROOT / "mkdocs.yml", copy / "mkdocs.yml")
    for name in ("benchmarks", "src"):  # what the pages link to outside docs/
        (copy / name).symlink_to(ROOT / name)
    page = copy / "docs" / "training.md"
    planted = ["missing-page.md", "model.md#no-such-heading", "../benchmarks/NO_RESULTS.md"]
    page.write_text(page.read_text() + "".join(f"\n[planted]({link})\n" for link in planted))
    done = build(copy / "mkdocs.yml", tmp_path / "site")
    assert done.returncode != 0
    for link in planted:
        assert link in done.stderr, f"the strict build did not report {link}:\n{done.stderr}"
