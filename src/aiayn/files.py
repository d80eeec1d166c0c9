"""Atomic file writes: a crash mid-write never leaves a half-written file behind.

Every file aiayn writes that a later run reads (model weights, configs, checkpoints) goes
through `atomic_write`: the content goes to a temporary file in the same directory, is
flushed to disk, and then renamed over the destination in one step (`os.replace`).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside `path`; on success it is fsync'ed and renamed to `path`.

    On an exception the temporary file is removed and `path` is left untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    os.chmod(tmp, 0o666 & ~_current_umask())  # mkstemp makes 0600; give the usual permissions
    try:
        yield tmp
        with open(tmp, "rb+") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def atomic_write(path: str | Path, writer: Callable[[Path], None]) -> None:
    """Call `writer(tmp_path)` and atomically move the result to `path`."""
    with atomic_path(path) as tmp:
        writer(tmp)


def atomic_write_text(path: str | Path, text: str) -> None:
    """Atomically write `text` (UTF-8) to `path`."""
    atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
