"""Attention maps as a grid of heatmaps: one row per (kind, layer), one column per head.

Each panel is the (queries, keys) matrix of softmax weights of one head (Sec. 3.2.1): row i
is how query token i distributes its attention over the key tokens (so each row sums to 1).
Tick labels are the subword tokens: source tokens + `<eos>`, target `<bos>` + tokens.
Masked (future) positions of decoder self-attention, whose weight is exactly 0, are grey.
Layers are numbered from 1 (the bottom layer, nearest the embeddings) in titles and on the
command line.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from matplotlib import colormaps
from matplotlib.figure import Figure

from aiayn.core.errors import ConfigError
from aiayn.plots.attention_data import KIND_TITLES, KINDS, AttentionExample, display_token
from aiayn.plots.output import save_figure

CMAP = colormaps["viridis"].with_extremes(bad="#e4e6ea")
SHORT_KIND = {"encoder": "enc self", "decoder": "dec self", "cross": "enc-dec"}


@dataclass
class Panel:
    """One drawn heatmap: `weights` (queries, keys) of head `head` in layer `layer` (0-based)."""

    kind: str
    layer: int
    head: int
    weights: np.ndarray
    query_tokens: list[str]
    key_tokens: list[str]


def parse_layer(value: str) -> int | str:
    """A `--layer` value: a 1-based layer number, 'all' or 'last'."""
    if value in ("all", "last"):
        return value
    try:
        number = int(value)
    except ValueError:
        raise ConfigError(
            f"--layer must be a layer number (1 = first), 'all' or 'last', got {value!r}"
        ) from None
    if number < 1:
        raise ConfigError(f"--layer counts from 1 (the first layer), got {number}")
    return number


def select_panels(example: AttentionExample, kind: str = "all", layer: int | str = "last") -> list[Panel]:
    """The panels to draw for `kind` ('encoder', 'decoder', 'cross' or 'all') and `layer`
    (1-based number, 'all' or 'last'), in drawing order: kind, then layer, then head."""
    kinds = KINDS if kind == "all" else (kind,)
    if kind != "all" and kind not in KINDS:
        raise ConfigError(f"--kind must be one of {', '.join(KINDS)} or all, got {kind!r}")
    panels = []
    for k in kinds:
        maps = example.maps(k)  # (L, H, Q, K)
        num_layers = maps.shape[0]
        if layer == "all":
            layers = list(range(num_layers))
        elif layer == "last":
            layers = [num_layers - 1]
        elif isinstance(layer, int) and 1 <= layer <= num_layers:
            layers = [layer - 1]
        else:
            raise ConfigError(f"--layer {layer}: the model has {num_layers} {k} layers (1..{num_layers})")
        for index in layers:
            for head in range(maps.shape[1]):
                panels.append(
                    Panel(k, index, head, maps[index, head], example.query_tokens(k), example.key_tokens(k))
                )
    return panels


def attention_figure(example: AttentionExample, panels: list[Panel]) -> Figure:
    """A figure with `panels` in rows of `example.num_heads` (one row per kind and layer)."""
    heads = example.num_heads
    rows = [panels[i : i + heads] for i in range(0, len(panels), heads)]
    max_keys = max(len(p.key_tokens) for p in panels)
    max_queries = max(len(p.query_tokens) for p in panels)
    cell = min(0.2, 7.0 / max(max_keys, max_queries))  # inches per token
    label_room = 0.09 * max(len(display_token(t)) for p in panels for t in p.key_tokens + p.query_tokens)
    width = heads * (max_keys * cell + 0.35) + label_room + 1.4
    heights = [len(row[0].query_tokens) * cell + label_room + 0.45 for row in rows]
    figure = Figure(figsize=(min(width, 40.0), min(sum(heights) + 0.8, 60.0)), layout="constrained")
    grid = figure.add_gridspec(len(rows), heads, height_ratios=heights)
    font = 7 if cell >= 0.15 else 5
    image = None
    axes_all = []
    for r, row in enumerate(rows):
        for c, panel in enumerate(row):
            axes = figure.add_subplot(grid[r, c])
            axes_all.append(axes)
            shown = panel.weights
            if panel.kind == "decoder":  # future positions: masked, drawn grey rather than as 0
                shown = np.ma.masked_array(shown, mask=np.triu(np.ones_like(shown, dtype=bool), k=1))
            image = axes.imshow(shown, cmap=CMAP, vmin=0.0, vmax=1.0, aspect="equal", interpolation="nearest")
            axes.set_title(
                f"{SHORT_KIND[panel.kind]} · layer {panel.layer + 1} · head {panel.head + 1}", fontsize=8
            )
            axes.set_xticks(range(len(panel.key_tokens)))
            axes.set_xticklabels([display_token(t) for t in panel.key_tokens], rotation=90, fontsize=font)
            axes.set_yticks(range(len(panel.query_tokens)))
            if c == 0:
                axes.set_yticklabels([display_token(t) for t in panel.query_tokens], fontsize=font)
                axes.set_ylabel(
                    "query (source)" if panel.kind == "encoder" else "query (decoder input)", fontsize=8
                )
            else:
                axes.set_yticklabels([])
            axes.tick_params(length=0)
    if image is not None:
        bar = figure.colorbar(image, ax=axes_all, shrink=0.6, fraction=0.03, pad=0.01)
        bar.set_label("attention weight", fontsize=8)
        bar.ax.tick_params(labelsize=7)
    origin = "model translation" if example.translated else "given target"
    kinds = ", ".join(dict.fromkeys(KIND_TITLES[p.kind] for p in panels))
    figure.suptitle(f"{kinds}\n{example.source!r} → {example.target!r} ({origin})", fontsize=9)
    return figure


def plot_attention(
    example: AttentionExample, path: str | Path, kind: str = "all", layer: int | str = "last"
) -> list[Panel]:
    """Draw the chosen attention maps of `example` to `path` (.png or .svg); returns the
    panels drawn (their `weights` are exactly the images' data)."""
    panels = select_panels(example, kind, layer)
    save_figure(attention_figure(example, panels), path)
    return panels
