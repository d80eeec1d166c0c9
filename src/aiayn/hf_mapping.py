"""Deprecated path of `aiayn.formats.hf_mapping` (one release; each name warns)."""

from aiayn.core.moved import moved

__getattr__ = moved(__name__, "aiayn.formats.hf_mapping")
