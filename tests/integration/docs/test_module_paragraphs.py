"""Each engine optimisation module says, in its docstring, what it computes differently from the
reference `aiayn.paper` and which test proves it the same (or, for int8, bounds the difference):
a paragraph naming `aiayn.paper` and citing `tests/PATH.py::test_name`, where that file exists
and defines that test, so the paragraph cannot outlive the test it cites. The modules that
replace a computation of the reference open with that paragraph (right after their title line);
attention and multi-head attention, whose fast path is one part of them, carry it later."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SRC = ROOT / "src" / "aiayn"
OPENING = [
    "runtime/prepacked.py", "runtime/int8.py", "runtime/compiled.py", "runtime/kept.py",
    "runtime/operators.py", "model/packing.py", "model/kv_cache.py",
]  # fmt: skip
ANYWHERE = ["model/attention.py", "model/multi_head_attention.py"]
CITATION = re.compile(r"`(tests/[\w/]+\.py)::(\w+)`")


def problems(module: Path, opening: bool, root: Path = ROOT) -> list[str]:
    """What is wrong with `module`'s paragraph against the reference, one line each."""
    docstring = ast.get_docstring(ast.parse(module.read_text(encoding="utf-8"))) or ""
    paragraphs = docstring.split("\n\n")
    candidates = paragraphs[1:2] if opening else paragraphs
    found = [p for p in candidates if "aiayn.paper" in p and CITATION.search(p)]
    if not found:
        where = "its second paragraph" if opening else "no paragraph"
        return [f"{module.name}: {where} names `aiayn.paper` with a `tests/...py::test_name` citation"]
    wrong = []
    for path, name in CITATION.findall(found[0]):
        test_file = root / path
        if not test_file.is_file():
            wrong.append(f"{module.name}: cites {path}, which does not exist")
        elif not re.search(rf"^def {name}\(", test_file.read_text(encoding="utf-8"), re.MULTILINE):
            wrong.append(f"{module.name}: cites {path}::{name}, which that file does not define")
    return wrong


def test_every_optimisation_module_names_the_reference_and_a_test_that_exists() -> None:
    found = [line for path in OPENING for line in problems(SRC / path, opening=True)]
    found += [line for path in ANYWHERE for line in problems(SRC / path, opening=False)]
    assert not found, "\n".join(found)


def test_the_check_reports_a_module_without_the_paragraph_and_a_stale_citation(tmp_path: Path) -> None:
    text = (SRC / "runtime" / "prepacked.py").read_text(encoding="utf-8")
    title, _, rest = text.partition("\n\n")
    without = tmp_path / "without.py"
    without.write_text(title + "\n\n" + rest.split("\n\n", 1)[1])  # the paragraph removed
    assert problems(without, opening=True) == [
        "without.py: its second paragraph names `aiayn.paper` with a `tests/...py::test_name` citation"
    ]
    renamed = tmp_path / "renamed.py"
    renamed.write_text(text.replace("::test_prepacked_log_probs_equal_the_reference", "::test_gone"))
    assert problems(renamed, opening=True) == [
        "renamed.py: cites tests/runtime/test_against_paper.py::test_gone, which that file does not define"
    ]
    moved = tmp_path / "moved.py"
    moved.write_text(text.replace("tests/runtime/test_against_paper.py", "tests/runtime/test_moved.py"))
    assert (
        problems(moved, opening=True)[0]
        == "moved.py: cites tests/runtime/test_moved.py, which does not exist"
    )
