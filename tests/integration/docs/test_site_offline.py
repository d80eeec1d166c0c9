"""The built site loads nothing from another host: no `<script src>`, stylesheet, font or preload
from an absolute URL in any page, and no `@import` or `url()` of one in its stylesheets (Material
loads Google Fonts unless `theme.font: false`; the math is typeset by the KaTeX copy in
docs/assets/katex/). A reader offline gets the whole site."""

from __future__ import annotations

import re
from pathlib import Path

# A URL that leaves the site: a scheme (http:, https:, ...) or protocol-relative `//host`.
REMOTE = r"(?:[a-z][a-z0-9+.-]*:)?//"
SCRIPT = re.compile(r"<script\b[^>]*\bsrc=[\"']?(" + REMOTE + r"[^\"'\s>]+)", re.IGNORECASE)
LINK = re.compile(r"<link\b[^>]*>", re.IGNORECASE)
LOADED_BY_LINK = re.compile(
    r"\brel=[\"']?[^\"'>]*\b(stylesheet|preload|prefetch|preconnect|modulepreload|icon)\b"
)
HREF = re.compile(r"\bhref=[\"']?(" + REMOTE + r"[^\"'\s>]+)", re.IGNORECASE)
CSS_URL = re.compile(r"(?:@import\s+(?:url\()?|url\()\s*[\"']?(" + REMOTE + r"[^\"')\s]+)", re.IGNORECASE)
STYLE = re.compile(r"<style\b[^>]*>(.*?)</style>", re.IGNORECASE | re.DOTALL)


def remote_loads(html: str) -> list[str]:
    """What a page would fetch from another host: scripts, linked stylesheets, fonts and preloads,
    and URLs in its inline styles."""
    found = SCRIPT.findall(html)
    for link in LINK.findall(html):
        if LOADED_BY_LINK.search(link):
            found += HREF.findall(link)
    for style in STYLE.findall(html):
        found += CSS_URL.findall(style)
    return found


def test_no_page_or_stylesheet_loads_from_another_host(built_site: Path) -> None:
    pages = sorted(built_site.rglob("*.html"))
    assert len(pages) > 20
    remote = {str(page.relative_to(built_site)):
              remote_loads(page.read_text(encoding="utf-8")) for page in pages}
    assert {page: urls for page, urls in remote.items() if urls} == {}
    for sheet in built_site.rglob("*.css"):
        assert CSS_URL.findall(sheet.read_text(encoding="utf-8")) == [], f"{sheet} loads from another host"
    home = (built_site / "index.html").read_text(encoding="utf-8")
    assert 'src="assets/katex/katex.min.js"' in home and "fonts.googleapis" not in home
    assert list((built_site / "assets" / "katex" / "fonts").glob("*.woff2"))


def test_the_paper_page_has_math_and_highlighted_code(built_site: Path) -> None:
    page = (built_site / "paper" / "index.html").read_text(encoding="utf-8")
    assert page.count('class="arithmatex"') >= 4, "the paper's equations are not marked as math"
    assert r"\sqrt{d_k}" in page
    assert 'class="highlight"' in page and "<span class=" in page  # Pygments, at build time


def test_the_check_finds_each_kind_of_remote_load() -> None:
    planted = [
        '<script src="https://cdn.example.org/highlight.min.js"></script>',
        "<link rel=\"stylesheet\" href='//fonts.example.org/css?family=Roboto'>",
        '<link href="https://fonts.example.org/s/roboto.woff2" rel="preload" as="font">',
        "<style>@import url(https://fonts.example.org/css2?family=Roboto);</style>",
        '<style>.x { background: url("http://example.org/a.png") }</style>',
    ]
    for html in planted:
        assert len(remote_loads(html)) == 1, html
    local = '<script src="assets/katex/katex.min.js"></script><link rel="stylesheet" href="../x.css">'
    linked = '<a href="https://arxiv.org/abs/1706.03762">the paper</a><link rel="canonical" href="https://x.org/">'
    assert remote_loads(local + linked) == []
