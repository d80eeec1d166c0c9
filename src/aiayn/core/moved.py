"""Old module paths kept for one release.

`moved(old, new)` is the `__getattr__` of a module whose names moved to `new`: every name taken
from it warns (`DeprecationWarning`, naming the new path). `aiayn/model_dir.py` is such a module.
The other old top-level modules have no file any more (`src/aiayn` keeps at most five modules):
`moved_module(old, new)` is what `aiayn.<old>` and `from aiayn import <old>` give instead, a
module object made when asked for, whose names warn the same way; `import aiayn.<old>` no longer
works (`ModuleNotFoundError`), since making it work would need an import hook at `import aiayn`.
"""

from __future__ import annotations

import importlib
import types
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


def moved_module(old: str, new: str) -> types.ModuleType:
    """A module object named `old` (not put in `sys.modules`) whose names are `new`'s, each
    warning when taken."""
    module = types.ModuleType(old, f"Deprecated path of `{new}` (one release; each name warns).")
    module.__getattr__ = moved(old, new)  # type: ignore[method-assign]  # PEP 562, per module
    return module
