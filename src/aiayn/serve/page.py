"""The service's web page: a text box, the model's output, and the attention view.

The page (`static/page.html`) draws attention with the explorer's own view
(`aiayn.explorer`: attention_view.html/.css/.js); the service serves those files, and the
page's script (`static/page.js`) under /static/. Everything comes from this server, so the
page works offline, and its Content-Security-Policy forbids any other origin. The files are
read from the package once, when the app is built; no request ever names a file.
"""

from __future__ import annotations

import html
from importlib import resources

from aiayn.explorer import view_file, view_markup

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)

MEDIA_TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}


def _own_file(name: str) -> str:
    return resources.files("aiayn.serve").joinpath("static", name).read_text(encoding="utf-8")


def static_files() -> dict[str, tuple[str, str]]:
    """URL name under /static/ -> (text, media type): the page's script and styles and the
    attention view's."""
    files = {
        "attention_view.js": view_file("attention_view.js"),
        "attention_view.css": view_file("attention_view.css"),
        "page.js": _own_file("page.js"),
        "page.css": _own_file("page.css"),
    }
    return {name: (text, MEDIA_TYPES[name[name.rindex(".") :]]) for name, text in files.items()}


def page_html(title: str) -> str:
    """The page, titled `title` (escaped)."""
    return (
        _own_file("page.html")
        .replace("__AIAYN_CSP__", CONTENT_SECURITY_POLICY)
        .replace("__AIAYN_VIEW_HTML__", view_markup())
        .replace("__AIAYN_TITLE__", html.escape(title))
    )
