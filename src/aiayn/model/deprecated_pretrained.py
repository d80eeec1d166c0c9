"""`Model.save_pretrained` / `Model.from_pretrained`, deprecated: model directories are a format
(`aiayn.formats.save_pretrained(model, directory)`, `aiayn.formats.from_pretrained(cls, directory)`),
and the model knows no format. Kept for one release; each call warns.

The one import from `aiayn.model` into `aiayn.formats` is here, inside the methods, and
`pyproject.toml`'s import contract names it as the one exception until it is removed.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # annotations only: the model reads no file
    from pathlib import Path


class PretrainedMethods:
    """The deprecated methods, mixed into `Transformer`, `DecoderOnlyLM` and `EncoderOnly`."""

    def save_pretrained(self, directory: str | Path) -> Path:
        """Deprecated: `aiayn.formats.save_pretrained(model, directory)`."""
        from aiayn import formats

        _warn("save_pretrained(model, directory)")
        return formats.save_pretrained(self, directory)  # type: ignore[arg-type]

    @classmethod
    def from_pretrained(cls, directory: str | Path, device: Any = "cpu") -> Any:
        """Deprecated: `aiayn.formats.from_pretrained(ModelClass, directory, device)`."""
        from aiayn import formats

        _warn(f"from_pretrained({cls.__name__}, directory, device)")
        return formats.from_pretrained(cls, directory, device)


def _warn(replacement: str) -> None:
    warnings.warn(
        f"the model methods save_pretrained/from_pretrained are deprecated and will be removed in "
        f"the next release: use aiayn.formats.{replacement}",
        DeprecationWarning,
        stacklevel=3,
    )
