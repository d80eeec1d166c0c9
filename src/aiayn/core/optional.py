"""Optional dependencies: importing one, or a one-line error naming the pip extra that brings it."""

from __future__ import annotations

import importlib
from types import ModuleType

from aiayn.core.errors import ConfigError

EXTRA = "export"
"""The pip extra that brings CTranslate2 and Hugging Face Transformers."""


def require(module: str, feature: str) -> ModuleType:
    """Import `module`, or raise `ConfigError` naming the pip extra that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ConfigError(
            f"{feature} needs the Python package {module!r}, which comes with aiayn's optional "
            f"extra {EXTRA!r}: pip install 'aiayn[{EXTRA}]'"
        ) from None
