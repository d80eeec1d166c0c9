"""The attention explorer: one self-contained HTML page to browse a model's attention.

    page = explorer_page(examples, title="dates model")   # from aiayn.plots.attention_examples
    write_explorer(examples, "page.html")

The page (template: `explorer/template.html`, package data) embeds every weight as JSON in a
`<script type="application/json">` block and has inline CSS and JavaScript only; its
Content-Security-Policy forbids any network access, so it works offline. In the page, one
chooses the sentence, the attention kind (encoder self, decoder self, encoder-decoder), the
layer and the head (or the average over heads); hovering a token shows what it attends to.

The drawing is the *attention view*, three package files shared with the page of `aiayn serve`:
`attention_view.html` (controls, heatmap, head thumbnails), `attention_view.css` and
`attention_view.js` (`AttentionView.show(sentence, id)` draws one `sentence_entry`). The explorer
inlines all three; the service serves them as static files.

The heatmap cells are `<td id="cell-{q}-{k}" data-q data-k data-weight>` (query row q, key
column k, 0-based) and the table `#heatmap` carries `data-sentence`, `data-kind`, `data-layer`
(0-based) and `data-head` (0-based or 'mean') of what it shows, so tests can read the page back.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from aiayn.core.files import atomic_path
from aiayn.plots.attention_data import KINDS, AttentionExample, display_token

DECIMALS = 5
"""Weights are rounded to this many decimals in the page (error < 1e-5)."""


def _rounded(array: np.ndarray) -> list:
    return np.round(array.astype(np.float64), DECIMALS).tolist()


VIEW_FILES = ("attention_view.html", "attention_view.css", "attention_view.js")
"""The attention view's package files (markup, styles, script)."""

_EXPLORER_CONTROLS = '<label>sentence <select id="sentence"></select></label>'


def page_head(template: str) -> str:
    """`template` with its `__AIAYN_HEAD__` replaced by the one HTML head of aiayn's pages (the
    explorer and the evaluation report): doctype, charset, viewport, a Content-Security-Policy
    that allows no network access, and the `__AIAYN_TITLE__` placeholder."""
    head = resources.files("aiayn.explorer").joinpath("page_head.html").read_text(encoding="utf-8")
    return template.replace("__AIAYN_HEAD__", head.rstrip("\n"), 1)


def view_file(name: str) -> str:
    """The text of one of the attention view's files (`VIEW_FILES`)."""
    if name not in VIEW_FILES:
        raise ValueError(f"not an attention view file: {name!r}")
    return resources.files("aiayn.explorer").joinpath(name).read_text(encoding="utf-8")


def view_markup(extra_controls: str = "") -> str:
    """The view's HTML, with `extra_controls` (trusted markup) first in its row of controls."""
    return view_file("attention_view.html").replace("__AIAYN_EXTRA_CONTROLS__", extra_controls)


def sentence_entry(example: AttentionExample) -> dict[str, Any]:
    """One sentence as the view draws it: texts, display tokens and, per attention kind the
    model has, the weights as nested lists [layer][head][query][key] (kinds without layers,
    e.g. encoder and cross for a language model, are left out)."""
    entry: dict[str, Any] = {
        "source": example.source,
        "target": example.target,
        "translated": example.translated,
        "source_tokens": [display_token(t) for t in example.source_tokens],
        "target_tokens": [display_token(t) for t in example.target_tokens],
    }
    for kind in KINDS:
        maps = example.maps(kind)
        if maps.shape[0] > 0:
            entry[kind] = _rounded(maps)
    return entry


def explorer_data(examples: Sequence[AttentionExample], title: str, model: dict[str, Any]) -> dict[str, Any]:
    """The JSON document the page reads: title, model summary and one `sentence_entry` per
    sentence."""
    return {"title": title, "model": model, "sentences": [sentence_entry(e) for e in examples]}


def _script_safe_json(data: dict[str, Any]) -> str:
    """JSON that cannot end its `<script>` element early (`<`, `>`, `&` as \\u escapes)."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def explorer_page(
    examples: Sequence[AttentionExample],
    title: str = "aiayn attention explorer",
    model: dict[str, Any] | None = None,
) -> str:
    """The complete HTML page for `examples` (at least one)."""
    if not examples:
        raise ValueError("the explorer needs at least one sentence")
    first = examples[0]
    model = model or {
        "num_heads": first.num_heads,
        "num_encoder_layers": int(first.encoder.shape[0]),
        "num_decoder_layers": int(first.decoder.shape[0]),
        "d_model": None,
    }
    template = resources.files("aiayn.explorer").joinpath("template.html").read_text(encoding="utf-8")
    template = page_head(template)
    values = {
        "TITLE": html.escape(title),
        "DATA": _script_safe_json(explorer_data(examples, title, model)),
        "VIEW_CSS": view_file("attention_view.css"),
        "VIEW_HTML": view_markup(_EXPLORER_CONTROLS),
        "VIEW_JS": view_file("attention_view.js"),
    }
    pattern = r"__AIAYN_(TITLE|DATA|VIEW_CSS|VIEW_HTML|VIEW_JS)__"
    return re.sub(pattern, lambda m: values[m.group(1)], template)


def write_explorer(
    examples: Sequence[AttentionExample],
    path: str | Path,
    title: str = "aiayn attention explorer",
    model: dict[str, Any] | None = None,
) -> Path:
    """Write `explorer_page(...)` to `path` (atomically)."""
    page = explorer_page(examples, title, model)
    with atomic_path(path) as tmp:
        tmp.write_text(page, encoding="utf-8")
        tmp.chmod(0o644)  # a page to share, not the private 0600 of a temporary file
    return Path(path)
