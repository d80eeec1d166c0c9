"""The results are organised by the question a user asks: each page of docs/results/ leads with one
table whose every figure links to its entry in the measurement log (benchmarks/RESULTS.md) and gives
its date, machine and command; no heading in docs/ or in the log names an issue; the README's
headline figures link into docs/results/. (That each linked anchor exists is checked by the strict
site build, tests/integration/docs/test_site.py.)"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
RESULTS = ROOT / "docs" / "results"
QUESTION_PAGES = ["quality.md", "training-speed.md", "decoding-speed.md", "memory-and-scale.md",
                  "startup.md", "gpu.md"]
ISSUE_HEADING = re.compile(r"^#+ .*[Ii]ssue [0-9]+", re.MULTILINE)
LOG_LINK = re.compile(r"^\| \[[^\]]+\]\(\.\./\.\./benchmarks/RESULTS\.md#[\w-]+\) \|")
DATE = re.compile(r"\| 20\d\d-\d\d-\d\d \|")


def leading_table(text: str) -> list[str]:
    """The rows (after the header and rule) of the first table of a page."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| "))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append(line)
    return rows


def table_faults(text: str) -> list[str]:
    header = next(line for line in text.splitlines() if line.startswith("| "))
    faults = [f"header lacks {name}" for name in ("date", "machine", "command") if name not in header]
    for row in leading_table(text):
        if not LOG_LINK.match(row):
            faults.append(f"no link to the log: {row[:80]}")
        if not DATE.search(row):
            faults.append(f"no date: {row[:80]}")
    return faults


def test_each_question_page_leads_with_a_table_of_linked_dated_figures() -> None:
    for name in QUESTION_PAGES:
        text = (RESULTS / name).read_text(encoding="utf-8")
        assert text.index("| ") < text.index("\n## "), f"{name}: the table is not the first thing"
        assert len(leading_table(text)) >= 3, name
        assert table_faults(text) == [], f"docs/results/{name}: {table_faults(text)}"


def test_the_table_check_sees_a_figure_without_its_log_entry_or_date() -> None:
    good = "| figure | value | date | machine | command |\n|---|---|---|---|---|\n" \
           "| [a](../../benchmarks/RESULTS.md#multi30k) | 1 | 2026-11-24 | EPYC | `x` |\n"
    assert table_faults(good) == []
    assert table_faults(good.replace("](../../benchmarks/RESULTS.md#multi30k)", "")) != []
    assert table_faults(good.replace("2026-11-24", "last week")) != []


def test_no_heading_names_an_issue() -> None:
    pages = [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "benchmarks" / "RESULTS.md"]
    found = [f"{page.relative_to(ROOT)}: {m.group(0)}" for page in pages
             for m in ISSUE_HEADING.finditer(page.read_text(encoding="utf-8"))]
    assert found == []
    assert ISSUE_HEADING.search("## Decoding as fast as CTranslate2 (issue 27)\n")


def test_the_readme_headlines_link_into_the_results_pages() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme[readme.index("\n- **"):readme.index("## The commands at a glance")]
    headlines = re.split(r"^- ", block.strip(), flags=re.MULTILINE)[1:]
    assert len(headlines) == 3
    for headline in headlines:
        assert re.search(r"\]\(docs/results/[\w-]+\.md", headline), headline
    decoding = headlines[2]
    assert "CTranslate2" in decoding and "int8" in decoding and "float32" in decoding
    assert re.search(r"\d+ s of\s+compiling", decoding), "the decoding headline does not state the warm-up"


def test_the_multi30k_selection_table_says_which_run_it_belongs_to() -> None:
    log = (ROOT / "benchmarks" / "RESULTS.md").read_text(encoding="utf-8")
    before = log[:log.index("| model | alpha 0.6 | 0.8 | 1.0 | 1.2 | 1.5 |")]
    assert "earlier de-en run" in before.strip().rsplit("\n\n", 1)[-1]
