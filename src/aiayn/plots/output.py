"""Writing figures: PNG or SVG, chosen by the extension of the output file.

Figures are built as plain `matplotlib.figure.Figure` objects (never through `pyplot`), so
nothing needs a display and no global backend is switched: PNG is rendered by Agg, SVG by
matplotlib's SVG writer. Files are written atomically (`aiayn.core.files.atomic_path`).
"""

from __future__ import annotations

from pathlib import Path

from matplotlib.figure import Figure

from aiayn.core.errors import ConfigError
from aiayn.core.files import atomic_path

FORMATS = {".png": "png", ".svg": "svg"}
PNG_DPI = 110


def figure_format(path: str | Path, argument: str = "--out") -> str:
    """'png' or 'svg' for `path`; any other extension raises `ConfigError` naming `argument`."""
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        raise ConfigError(
            f"{argument} {path}: unsupported extension {suffix or '(none)'!r}; use {' or '.join(FORMATS)}"
        )
    return FORMATS[suffix]


def save_figure(figure: Figure, path: str | Path, argument: str = "--out") -> Path:
    """Write `figure` to `path` as PNG or SVG (by extension), atomically; returns the path."""
    fmt = figure_format(path, argument)
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"{argument} {path} is a directory; give a file name ending in .png or .svg")
    try:
        with atomic_path(path) as tmp:
            figure.savefig(tmp, format=fmt, dpi=PNG_DPI, bbox_inches="tight", facecolor="white")
            tmp.chmod(0o644)  # a picture to share, not the private 0600 of a temporary file
    except OSError as error:
        raise ConfigError(f"{argument} {path}: cannot write: {error}") from None
    return path
