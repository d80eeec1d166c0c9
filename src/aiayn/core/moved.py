"""Old module paths kept for one release: `moved(old, new)` is the old module's `__getattr__`,
which warns (`DeprecationWarning`, naming the new path) on every name taken from it."""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable
from typing import Any


def moved(old: str, new: str) -> Callable[[str], Any]:
    """The module `__getattr__` of `old`, a deprecated path of `new`."""

    def __getattr__(name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        target = importlib.import_module(new)
        if not hasattr(target, name):
            raise AttributeError(f"module {old!r} has no attribute {name!r} (it moved to {new!r})")
        warnings.warn(
            f"{old} is deprecated and will be removed in the next release: import {name} from {new}",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(target, name)

    return __getattr__
