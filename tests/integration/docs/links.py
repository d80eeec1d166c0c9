"""Reading the documentation's Markdown: its relative links, the anchors its headings make (as
MkDocs names them), and which links do not resolve."""

from __future__ import annotations

import os
import re
from pathlib import Path

from markdown.extensions.toc import slugify

LINK = re.compile(r"\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6} (.+?)\s*$", re.MULTILINE)
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


def prose(text: str) -> str:
    """The text without its fenced code blocks (a `# comment` in a shell block is no heading)."""
    return FENCE.sub("", text)


def anchors(path: Path) -> set[str]:
    """The anchors of a Markdown file's headings, slugged as MkDocs' `toc` extension slugs them."""
    return {slugify(title, "-") for title in HEADING.findall(prose(path.read_text(encoding="utf-8")))}


def relative_links(text: str) -> list[str]:
    links = LINK.findall(prose(text))
    return [link for link in links if "://" not in link and not link.startswith("mailto:")]


def dead_links(page: Path, text: str | None = None) -> list[str]:
    """The relative links of `page` (or of `text`, read as if it were `page`) whose file does
    not exist, or whose `#anchor` is not a heading of that file; each as `link (why)`."""
    text = page.read_text(encoding="utf-8") if text is None else text
    dead = []
    for link in relative_links(text):
        target, _, anchor = link.partition("#")
        path = Path(os.path.normpath(page.parent / target)) if target else page
        if not path.is_file():
            dead.append(f"{link} (no file {path})")
        elif anchor and path.suffix == ".md" and anchor not in anchors(path):
            dead.append(f"{link} (no heading #{anchor} in {path.name})")
    return dead
