"""Deprecated path of `aiayn.core.errors` (one release; each name warns)."""

from aiayn.core.moved import moved

__getattr__ = moved(__name__, "aiayn.core.errors")
