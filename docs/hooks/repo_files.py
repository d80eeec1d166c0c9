"""MkDocs hook: the pages link to files of the repository outside `docs/` (benchmarks/RESULTS.md,
source files) by their path relative to the page, e.g. `../benchmarks/RESULTS.md`, so the same
link works when the repository is browsed. The hook adds each linked file to the build under
`repo/<path in the repository>` (and, for a linked Markdown file, the files it links to) and points
the page's link there, so `mkdocs build --strict` checks these links like any other: a link to a
file that does not exist is left as written, and mkdocs reports it as a dead link."""

from __future__ import annotations

import os
import re
from pathlib import Path

from mkdocs.structure.files import File, Files

MOUNT = "repo"
LINK = re.compile(r"(\]\()([^)\s#]+)((?:#[^)\s]*)?\))")


def _relative_targets(text: str) -> list[str]:
    links = [m.group(2) for m in LINK.finditer(text)]
    return [link for link in links if "://" not in link and not link.startswith("/")]


def _in_repo(docs_dir: Path, page_dir: Path, link: str) -> Path | None:
    """The repository file (relative to the repository root) a docs page's link names, when it
    leaves `docs/` and the file exists; None otherwise."""
    root = docs_dir.parent
    target = Path(os.path.normpath(page_dir / link))
    if target.is_relative_to(docs_dir) or not target.is_relative_to(root) or not target.is_file():
        return None
    return target.relative_to(root)


def on_files(files: Files, config) -> Files:
    docs_dir = Path(config["docs_dir"]).resolve()
    root = docs_dir.parent
    wanted: list[Path] = []
    for file in files.documentation_pages():
        page = Path(file.abs_src_path)
        for link in _relative_targets(page.read_text(encoding="utf-8")):
            found = _in_repo(docs_dir, page.parent, link)
            if found is not None:
                wanted.append(found)
    seen: set[Path] = set()
    while wanted:
        path = wanted.pop()
        if path in seen:
            continue
        seen.add(path)
        files.append(File.generated(config, f"{MOUNT}/{path.as_posix()}", abs_src_path=str(root / path)))
        if path.suffix == ".md":  # a mounted page's own relative links (its pictures) come along
            text = (root / path).read_text(encoding="utf-8")
            for link in _relative_targets(text):
                target = Path(os.path.normpath(root / path.parent / link))
                if target.is_relative_to(root) and target.is_file():
                    wanted.append(target.relative_to(root))
    return files


def on_page_markdown(markdown: str, page, config, files) -> str:
    if page.file.src_uri.startswith(f"{MOUNT}/") or page.file.abs_src_path is None:
        return markdown  # a mounted file, or a page written by a hook (reference_pages.py)
    docs_dir = Path(config["docs_dir"]).resolve()
    page_dir = Path(page.file.abs_src_path).parent

    def point(match: re.Match) -> str:
        found = _in_repo(docs_dir, page_dir, match.group(2))
        if found is None:
            return match.group(0)
        mounted = os.path.relpath(docs_dir / MOUNT / found, page_dir)
        return f"{match.group(1)}{Path(mounted).as_posix()}{match.group(3)}"

    return LINK.sub(point, markdown)
