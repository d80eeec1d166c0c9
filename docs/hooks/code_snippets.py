"""MkDocs hook: a page shows the source of a symbol by naming it, so the code on the page is read
from the code at build time and cannot drift from it. A line

    <!-- code: aiayn.paper.attention -->

becomes a Python code block holding the source of `aiayn.paper.attention` (a function, a class, or
`Class.method`), wherever the package keeps it (found through the import, not a file path, so the
page survives files moving). A name that no longer resolves stops the build with the page and the
name at fault (`mkdocs build --strict` is run by the tests)."""

from __future__ import annotations

import importlib
import inspect
import re
import textwrap

from mkdocs.exceptions import PluginError

MARKER = re.compile(r"^<!-- code: ([\w.]+) -->[ \t]*$", re.MULTILINE)


def resolve(name: str) -> object:
    """The object a dotted name such as `aiayn.paper.MultiHeadAttention.forward` names: the longest
    importable module prefix, then attributes. Raises LookupError naming what is missing."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        module = ".".join(parts[:cut])
        try:
            obj = importlib.import_module(module)
        except ModuleNotFoundError as error:
            if error.name is not None and module.startswith(error.name):
                continue  # not a module: the name goes on with attributes
            raise LookupError(f"{name}: importing {module} failed: {error}") from error
        except ImportError as error:
            raise LookupError(f"{name}: importing {module} failed: {error}") from error
        for attribute in parts[cut:]:
            if not hasattr(obj, attribute):
                raise LookupError(f"{name}: {'.'.join(parts[:cut])} has no {attribute!r}")
            obj = getattr(obj, attribute)
        return obj
    raise LookupError(f"{name}: no such module")


def source_of(name: str) -> str:
    """The source lines of the symbol `name`, dedented, with the file and line they start at."""
    obj = resolve(name)
    obj = getattr(obj, "__func__", obj)
    try:
        lines, start = inspect.getsourcelines(obj)
        path = inspect.getsourcefile(obj) or "?"
    except (OSError, TypeError) as error:
        raise LookupError(f"{name}: no source ({error})") from error
    where = path[path.rfind("src/") + 4 :] if "src/" in path else path
    code = textwrap.dedent("".join(lines)).rstrip("\n")
    return f'```python title="{where}, line {start}"\n{code}\n```'


def expand(markdown: str, page: str = "<page>") -> str:
    """The page with every `<!-- code: NAME -->` line replaced by NAME's source."""

    def one(match: re.Match) -> str:
        try:
            return source_of(match.group(1))
        except LookupError as error:
            raise PluginError(f"{page}: <!-- code: {match.group(1)} --> names no code: {error}") from error

    return MARKER.sub(one, markdown)


def on_page_markdown(markdown: str, page, config, files) -> str:
    return expand(markdown, page.file.src_uri)
