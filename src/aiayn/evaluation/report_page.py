"""The evaluation report as one self-contained HTML page, plus the same data as JSON.

    write_report(build_report(...), "report.html")    # writes report.html and report.json

The page follows the explorer's rules (`aiayn.explorer`): the data is embedded as JSON in a
`<script type="application/json">` block, CSS and JavaScript are inline (package files in
`evaluation/report_assets/`, plus the explorer's attention view), and the
Content-Security-Policy forbids any network access, so it works from `file://` and offline.
The JSON file holds exactly the embedded dict (see `aiayn.evaluation.report`).
"""

from __future__ import annotations

import html
import json
import re
from importlib import resources
from pathlib import Path
from typing import Any

from aiayn.core.errors import ConfigError
from aiayn.core.files import atomic_path, write_errors
from aiayn.explorer import _script_safe_json, page_head, view_file, view_markup

ASSETS = "report_assets"


def _asset(name: str) -> str:
    return resources.files("aiayn.evaluation").joinpath(ASSETS, name).read_text(encoding="utf-8")


def report_page(data: dict[str, Any]) -> str:
    """The complete HTML page for the report data of `build_report`."""
    values = {
        "TITLE": html.escape(str(data.get("title", "aiayn evaluation report"))),
        "DATA": _script_safe_json(data),
        "VIEW_CSS": view_file("attention_view.css"),
        "VIEW_HTML": view_markup(),
        "VIEW_JS": view_file("attention_view.js"),
        "REPORT_CSS": _asset("report.css"),
        "REPORT_JS": _asset("report.js"),
    }
    pattern = r"__AIAYN_(TITLE|DATA|VIEW_CSS|VIEW_HTML|VIEW_JS|REPORT_CSS|REPORT_JS)__"
    return re.sub(pattern, lambda m: values[m.group(1)], page_head(_asset("template.html")))


def json_path(page_path: str | Path) -> Path:
    """Where the JSON beside a page goes: `OUT.html` -> `OUT.json`."""
    return Path(page_path).with_suffix(".json")


def check_report_path(path: str | Path, option: str = "--report") -> None:
    """A one-line error unless `path` names an .html file in an existing directory."""
    page = Path(path)
    if page.suffix.lower() not in (".html", ".htm"):
        raise ConfigError(f"{option} {path}: the report must be an .html file")
    if not page.parent.is_dir():
        raise ConfigError(f"{option} {path}: directory {page.parent} does not exist")


def write_report(data: dict[str, Any], path: str | Path) -> tuple[Path, Path]:
    """Write the page to `path` and the data to `json_path(path)` (each atomically)."""
    check_report_path(path)
    page, data_file = Path(path), json_path(path)
    written: list[Path] = []
    try:
        with write_errors(page):
            for target, text in ((data_file, json.dumps(data, ensure_ascii=False) + "\n"),
                                 (page, report_page(data))):
                with atomic_path(target) as tmp:
                    tmp.write_text(text, encoding="utf-8")
                    tmp.chmod(0o644)  # files to share, not the private 0600 of a temporary file
                written.append(target)
    except BaseException:
        for target in written:  # no data file without its page
            target.unlink(missing_ok=True)
        raise
    return page, data_file
