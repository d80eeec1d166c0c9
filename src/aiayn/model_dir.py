"""Deprecated path of `aiayn.formats` (one release; each name warns)."""

from aiayn.formats.moved import moved

__getattr__ = moved(__name__, "aiayn.formats")
