"""The README is a map of at most 12 KB whose links resolve, and every page of docs/ is in the
site's navigation (a page outside it can only be found by a link, or not at all)."""

from __future__ import annotations

from pathlib import Path

import yaml

from .links import dead_links, relative_links

ROOT = Path(__file__).resolve().parents[3]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
GENERATED = {"reference/settings.md", "reference/commands.md", "changelog.md"}
"""The pages docs/hooks/reference_pages.py writes at build time (in the nav, not in docs/)."""


def nav_pages(nav: list) -> set[str]:
    """Every page a MkDocs `nav` names, at any depth of sections."""
    found: set[str] = set()
    for entry in nav:
        for value in entry.values() if isinstance(entry, dict) else [entry]:
            found |= nav_pages(value) if isinstance(value, list) else {value}
    return found


def pages_outside_nav(docs: Path, nav: list) -> list[str]:
    """The Markdown pages of `docs` (hooks aside) that the nav does not name."""
    pages = {path.relative_to(docs).as_posix() for path in docs.rglob("*.md") if "hooks" not in path.parts}
    return sorted(pages - nav_pages(nav))


def test_readme_is_a_map_of_at_most_12_kib() -> None:
    size = len(README.read_bytes())
    assert size <= 12_288, f"README.md is {size} bytes; the map must stay within 12,288"


def test_readme_links_resolve() -> None:
    assert any(link.startswith("docs/") for link in relative_links(README.read_text(encoding="utf-8")))
    assert dead_links(README) == []


def test_every_page_is_in_the_nav_and_every_nav_entry_exists() -> None:
    nav = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))["nav"]
    sections = [next(iter(section)) for section in nav]
    assert sections == ["Home", "Learn", "Use", "Reference", "Results", "Project"]
    assert pages_outside_nav(DOCS, nav) == []
    missing = sorted(page for page in nav_pages(nav) - GENERATED if not (DOCS / page).is_file())
    assert missing == [], f"the nav names pages that do not exist: {missing}"


def test_the_nav_check_finds_a_page_left_out(tmp_path: Path) -> None:
    (tmp_path / "reference").mkdir()
    for page in ("index.md", "reference/api.md", "orphan.md"):
        (tmp_path / page).write_text("# x\n")
    nav = [{"Home": "index.md"}, {"Reference": [{"Python API": "reference/api.md"}]}]
    assert pages_outside_nav(tmp_path, nav) == ["orphan.md"]
