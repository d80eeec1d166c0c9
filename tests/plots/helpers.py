"""Checks on written pictures."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
from matplotlib import image as mpimg


def assert_png_not_blank(path: Path, min_bytes: int = 5_000) -> np.ndarray:
    """The PNG exists, has a reasonable size and its pixels vary (it is not a blank canvas)."""
    assert path.is_file(), path
    assert path.stat().st_size > min_bytes, path.stat().st_size
    pixels = mpimg.imread(path)
    assert pixels.ndim == 3 and pixels.shape[0] > 100 and pixels.shape[1] > 100
    assert float(pixels[..., :3].var()) > 1e-3
    return pixels


def assert_svg_has_content(path: Path, min_elements: int = 50) -> ET.Element:
    """The SVG is well-formed XML with an <svg> root and many drawing elements."""
    assert path.is_file(), path
    root = ET.parse(path).getroot()
    assert root.tag.endswith("svg")
    assert sum(1 for _ in root.iter()) > min_elements
    assert any(element.tag.endswith("path") for element in root.iter())
    return root
