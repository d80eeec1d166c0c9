"""The sinusoidal positional encoding of Sec. 3.5, drawn.

    PE(pos, 2i)   = sin(pos / 10000^(2i / d_model))
    PE(pos, 2i+1) = cos(pos / 10000^(2i / d_model))

Left: the (max_len, d_model) table as two heatmaps, the sin (even) dimensions and the cos (odd)
ones, position down and i across: the wavelengths grow geometrically from 2π (i = 0) to
10000·2π, so the left columns flicker and the right ones barely change. Right: a few
dimensions as curves over the positions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from matplotlib.figure import Figure

from aiayn.core.errors import ConfigError
from aiayn.model.positional_encoding import sinusoidal_table
from aiayn.plots.output import save_figure


def default_dimensions(d_model: int) -> list[int]:
    """A few dimensions, from short to long wavelengths: even (sin) ones at about d/64, d/16 and
    d/4, and the odd (cos) partner of the last, which has the same wavelength shifted by π/2."""
    evens = [2 * (d_model // k // 2) for k in (64, 16, 4)]
    picks = [*evens, evens[-1] + 1]
    return sorted({d for d in picks if 0 <= d < d_model})


def wavelength(dim: int, d_model: int) -> float:
    """The wavelength 2π · 10000^(2i / d_model) of dimension `dim` (2i or 2i + 1)."""
    return 2 * math.pi * 10000.0 ** (2 * (dim // 2) / d_model)


def check_positional_arguments(d_model: int, max_len: int, dims: Sequence[int]) -> None:
    if d_model < 2:
        raise ConfigError(f"--d-model must be >= 2, got {d_model}")
    if max_len < 1:
        raise ConfigError(f"--max-len must be >= 1, got {max_len}")
    if d_model * max_len > 20_000_000:
        raise ConfigError(f"--d-model {d_model} x --max-len {max_len} is too large to draw")
    bad = [d for d in dims if not 0 <= d < d_model]
    if bad:
        raise ConfigError(f"--dims {bad} out of range: dimensions are 0..{d_model - 1}")


def positional_figure(d_model: int, max_len: int, dims: Sequence[int] | None = None) -> Figure:
    """Heatmaps of the (max_len, d_model) table (sin and cos halves) and curves of dimensions `dims`."""
    dims = list(dims) if dims is not None else default_dimensions(d_model)
    check_positional_arguments(d_model, max_len, dims)
    table = sinusoidal_table(max_len, d_model).numpy()  # (max_len, d_model)
    figure = Figure(figsize=(14, 4.8), layout="constrained")
    sin_axes, cos_axes, curve_axes = figure.subplots(1, 3, width_ratios=[1, 1, 1.25])
    # The even (sin) and odd (cos) dimensions side by side: interleaved, neighbouring columns
    # alternate between sin and cos and the picture is all stripes.
    halves = (
        (sin_axes, table[:, 0::2], "PE(pos, 2i) = sin(pos / 10000^(2i/d))"),
        (cos_axes, table[:, 1::2], "PE(pos, 2i+1) = cos(pos / 10000^(2i/d))"),
    )
    for axes, half, title in halves:
        image = axes.imshow(half, cmap="RdBu_r", vmin=-1, vmax=1, aspect="auto", interpolation="nearest")
        axes.set_xlabel(f"i (dimension 2i{'' if axes is sin_axes else ' + 1'})")
        axes.set_title(title, fontsize=9.5)
    sin_axes.set_ylabel("position")
    cos_axes.set_yticklabels([])
    figure.colorbar(image, ax=[sin_axes, cos_axes], fraction=0.03, pad=0.01)
    positions = range(max_len)
    for d in dims:
        wave = "sin" if d % 2 == 0 else "cos"
        curve_axes.plot(
            positions, table[:, d], label=f"dim {d} ({wave}, wavelength {wavelength(d, d_model):.3g})"
        )
    curve_axes.set_xlabel("position")
    curve_axes.set_ylabel("PE(pos, dim)")
    curve_axes.set_title("a few dimensions: each is a sinusoid of its own wavelength", fontsize=10)
    curve_axes.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, frameon=False)
    curve_axes.grid(alpha=0.3)
    figure.suptitle(
        f"Sinusoidal positional encoding (Sec. 3.5): {max_len} positions, d_model = {d_model}", fontsize=11
    )
    return figure


def plot_positional(d_model: int, max_len: int, path: str | Path, dims: Sequence[int] | None = None) -> Path:
    """Draw the encoding to `path` (.png or .svg)."""
    return save_figure(positional_figure(d_model, max_len, dims), path)
