"""Deprecated path of `aiayn.formats.model_card` (one release; each name warns)."""

from aiayn.core.moved import moved

__getattr__ = moved(__name__, "aiayn.formats.model_card")
