"""Atomic file writes: a crash mid-write never leaves a half-written file behind.

Every file aiayn writes that a later run reads (model weights, configs, checkpoints) goes
through `atomic_write`: the content goes to a temporary file in the same directory, is
flushed to disk, and then renamed over the destination in one step (`os.replace`). A whole
directory (an export, an import, an averaged model) is written by `atomic_directory` the same
way, and `write_errors` turns a full disk or a file-size limit into a one-line `WriteError`.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from aiayn.core.errors import AiaynError, ConfigError

FULL = (errno.ENOSPC, errno.EFBIG, errno.EDQUOT, errno.EROFS)
"""The errors of a write that cannot go on (a full disk, a file-size limit, a quota, a read-only
file system), whatever the writer."""


class WriteError(AiaynError, OSError):
    """An output could not be written (nothing of it was kept)."""


def _write_errno(error: BaseException) -> int | None:
    """The errno of a failed write: an OSError's, or the '(os error N)' that Rust writers
    (safetensors) put in their message."""
    if isinstance(error, OSError):
        return error.errno
    found = re.search(r"\(os error (\d+)\)", str(error))
    return int(found.group(1)) if found else None


@contextlib.contextmanager
def write_errors(output: str | Path) -> Iterator[None]:
    """Turn a write that cannot go on (`FULL`) inside the block into `WriteError` naming `output`.
    Other errors pass unchanged."""
    try:
        yield
    except WriteError:
        raise
    except Exception as error:
        number = _write_errno(error)
        if number not in FULL:
            raise
        message = f"cannot write {output}: {os.strerror(number)}; nothing was written"
        raise WriteError(number, message) from None


@contextlib.contextmanager
def atomic_directory(out: str | Path) -> Iterator[Path]:
    """Yield an empty temporary directory beside `out`; on success it becomes `out` (an existing
    `out` is replaced only then). On an exception, or a kill, `out` is as it was: a temporary
    directory is never taken for a finished one (its name starts with '.' and ends '.tmp')."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    try:
        yield tmp
        os.chmod(tmp, 0o777 & ~_current_umask())
        if out.exists():
            old = out.with_name(f".{out.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            os.replace(out, old)
            os.replace(tmp, out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


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


@contextlib.contextmanager
def output_directory(out: str | Path, overwrite: bool) -> Iterator[Path]:
    """Yield an empty temporary directory beside `out`; on success it becomes `out`.

    A failed export leaves nothing behind (a full disk or a file-size limit is a one-line
    `WriteError`); an existing `out` is refused unless `overwrite` (then it is replaced only
    once the new directory is complete).
    """
    out = Path(out)
    if out.exists() and not overwrite:
        raise ConfigError(f"--out {out} already exists; pass --overwrite to replace it")
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} exists and is not a directory")
    with write_errors(out), atomic_directory(out) as tmp:
        yield tmp
