"""One home per job: the `--set` option, the model preset table and the UTF-8 error are each
defined once in src/aiayn (found by reading the source with `ast`), and a planted second one is
found; the pages' HTML head is one file, `explorer/page_head.html`."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "aiayn"
BASE = {"d_model": 512, "d_ff": 2048}
"""Table 3's base sizes: a table of presets states them; nothing else does."""


def _constants(nodes: list[ast.expr]) -> set[object]:
    return {node.value for node in nodes if isinstance(node, ast.Constant)}


def definitions(root: Path) -> dict[str, list[str]]:
    """'FILE:LINE' of each `add_argument("--set", ...)` and each statement of the base preset's
    sizes (keywords d_model=512 and d_ff=2048, or a tuple holding 512 and 2048) under `root`."""
    found: dict[str, list[str]] = {"--set": [], "preset table": [], "UTF-8 error": []}
    for path in sorted(root.rglob("*.py")):
        where = path.relative_to(root).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                name = getattr(node.func, "attr", getattr(node.func, "id", ""))
                if name == "add_argument" and "--set" in _constants(node.args):
                    found["--set"].append(f"{where}:{node.lineno}")
                keywords = {k.arg: k.value.value for k in node.keywords if isinstance(k.value, ast.Constant)}
                if all(keywords.get(key) == value for key, value in BASE.items()):
                    found["preset table"].append(f"{where}:{node.lineno}")
            elif isinstance(node, ast.Constant) and "not valid UTF-8" in str(node.value):
                found["UTF-8 error"].append(f"{where}:{node.lineno}")
            elif isinstance(node, ast.Tuple) and set(BASE.values()) <= _constants(node.elts):
                found["preset table"].append(f"{where}:{node.lineno}")
    return found


def test_each_is_defined_once() -> None:
    found = definitions(SRC)
    assert [entry.split(":")[0] for entry in found["--set"]] == ["cli/options.py"], found
    assert [entry.split(":")[0] for entry in found["preset table"]] == ["model/config.py"], found
    assert [entry.split(":")[0] for entry in found["UTF-8 error"]] == ["data/corpus.py"], found


def test_a_planted_second_definition_is_found(tmp_path: Path) -> None:
    (tmp_path / "cli.py").write_text(
        "def build(parser):\n"
        "    parser.add_argument('--set', action='append')\n"
        "    return dict(d_model=512, num_heads=8, d_ff=2048)\n"
    )
    reader = "def read(path):\n    raise ValueError(f'{path} is not valid UTF-8')\n"
    (tmp_path / "reader.py").write_text(reader)
    (tmp_path / "sizes.py").write_text("BASE = ('base', 512, 8, 6, 2048, 0.1)\n")
    assert definitions(tmp_path) == {
        "--set": ["cli.py:2"], "preset table": ["cli.py:3", "sizes.py:1"], "UTF-8 error": ["reader.py:2"]
    }


SELF_CONTAINED = "no network access is allowed or needed"
"""What the head of a self-contained page (the explorer, the report) says; the served page
(`serve/static/page.html`) has a head of its own, which allows its server."""


def html_heads(root: Path) -> list[str]:
    """The .html files under `root` that hold a self-contained page's head."""
    pages = root.rglob("*.html")
    return sorted(p.relative_to(root).as_posix() for p in pages if SELF_CONTAINED in p.read_text())


def test_one_html_head_and_a_planted_second_is_found(tmp_path: Path) -> None:
    assert html_heads(SRC) == ["explorer/page_head.html"]
    (tmp_path / "page.html").write_text(f"<!DOCTYPE html>\n<head>\n<!-- {SELF_CONTAINED} -->\n</head>\n")
    assert html_heads(tmp_path) == ["page.html"]
