"""docs/paper.md shows the code of `aiayn.paper` by naming symbols (`<!-- code: NAME -->`), which the
hook docs/hooks/code_snippets.py replaces with the source at build time: every name resolves, a name
that no longer exists stops the build, and the built page holds the source itself."""

from __future__ import annotations

import importlib.util
import inspect
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
PAGE = ROOT / "docs" / "paper.md"


def _hook():
    path = ROOT / "docs" / "hooks" / "code_snippets.py"
    spec = importlib.util.spec_from_file_location("code_snippets", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_symbol_the_page_names_resolves_to_its_source() -> None:
    hook = _hook()
    text = PAGE.read_text(encoding="utf-8")
    names = hook.MARKER.findall(text)
    assert "aiayn.paper.attention" in names and len(names) >= 10
    expanded = hook.expand(text, "paper.md")
    assert not hook.MARKER.search(expanded)
    from aiayn import paper

    for name in names:
        source = inspect.getsource(getattr(paper, name.removeprefix("aiayn.paper.")))
        assert source.strip().splitlines()[0] in expanded, name


def test_a_symbol_that_no_longer_exists_stops_the_build() -> None:
    from mkdocs.exceptions import PluginError

    hook = _hook()
    planted = "## 3.2.1\n\n<!-- code: aiayn.paper.attention_renamed -->\n"
    message = r"paper.md: <!-- code: aiayn.paper.attention_renamed --> .*'attention_renamed'"
    with pytest.raises(PluginError, match=message):
        hook.expand(planted, "paper.md")
    with pytest.raises(PluginError, match="aiayn.nowhere"):
        hook.expand("<!-- code: aiayn.nowhere.attention -->\n", "paper.md")
    # a method by Class.method, and a module-level function, found through the import
    assert "def forward" in hook.source_of("aiayn.paper.MultiHeadAttention.forward")
    assert hook.source_of("aiayn.paper.rate").startswith('```python title="aiayn/paper/')


def test_the_built_page_shows_the_code(built_site: Path) -> None:
    html = (built_site / "paper" / "index.html").read_text(encoding="utf-8")
    assert "code: aiayn.paper" not in html
    text = re.sub(r"<[^>]+>", "", html)
    for line in ("def attention(", "class MultiHeadAttention(nn.Module):", "def rate("):
        assert line in text, f"the built paper page lacks {line!r}"
