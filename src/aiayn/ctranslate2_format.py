"""Deprecated path of `aiayn.formats.ctranslate2_format` (one release; each name warns)."""

from aiayn.core.moved import moved

__getattr__ = moved(__name__, "aiayn.formats.ctranslate2_format")
