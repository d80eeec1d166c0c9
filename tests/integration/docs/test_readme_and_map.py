"""The README is a map of at most 12 KB whose links resolve, and the docs index maps every
section the README used to hold to the page where its content now lives."""

from __future__ import annotations

import re
from pathlib import Path

from .links import dead_links, relative_links

ROOT = Path(__file__).resolve().parents[3]
README = ROOT / "README.md"
INDEX = ROOT / "docs" / "index.md"
MAP_HEADING = "## Where the old README's sections went"
# The sections of the README before it became a map (as at commit 91465a2).
OLD_SECTIONS = [
    "Contents", "Quick start", "The model, as the paper names it", "Training", "Translating and scoring",
    "The evaluation report: which sentences fail, and what the model attended to",
    "Language models and classifiers", "Your own tokenizer", "Use your model elsewhere",
    "Start from a trained model", "Run tracking", "Looking inside", "Serve it",
    "Several processes, GPUs and machines", "Big corpora: prepared once, memory-mapped",
    "What happens when...", "Results and benchmarks",
    "Multi30k German -> English in 60 minutes on two CPU cores", "Layout",
]  # fmt: skip


def section_map(text: str) -> dict[str, str]:
    """The rows of the section-to-page table: old section -> the cell that says where it went."""
    table = text.split(MAP_HEADING, 1)[1]
    rows = re.findall(r"^\| (.+?) \| (.+?) \|$", table, re.MULTILINE)
    return {old: new for old, new in rows if old != "README section" and not set(old) <= set("-|")}


def test_readme_is_a_map_of_at_most_12_kib() -> None:
    size = len(README.read_bytes())
    assert size <= 12_288, f"README.md is {size} bytes; the map must stay within 12,288"


def test_readme_links_resolve() -> None:
    assert any(link.startswith("docs/") for link in relative_links(README.read_text(encoding="utf-8")))
    assert dead_links(README) == []


def test_every_old_section_is_mapped_and_every_entry_resolves() -> None:
    rows = section_map(INDEX.read_text(encoding="utf-8"))
    assert sorted(rows) == sorted(OLD_SECTIONS)
    for old, new in rows.items():
        assert relative_links(f"{new}"), f"the row for {old!r} links to no page"
    assert dead_links(INDEX) == []


def test_the_checks_catch_a_dropped_section_and_dead_entries() -> None:
    text = INDEX.read_text(encoding="utf-8")
    planted = text.replace("| Serve it | [Serving](serving.md) |", "| Serve it | [Serving](serve.md) |")
    planted = planted.replace("(training.md#run-tracking)", "(training.md#run-trackers)")
    planted = planted.replace("| Layout | [Layout](layout.md) |\n", "")
    assert planted.count("\n") < text.count("\n")
    assert "Layout" not in section_map(planted)
    dead = dead_links(INDEX, planted)
    assert any(d.startswith("serve.md (no file") for d in dead), dead
    assert any(d.startswith("training.md#run-trackers (no heading") for d in dead), dead
