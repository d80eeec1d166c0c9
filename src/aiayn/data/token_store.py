"""A token store: a corpus encoded once, kept on disk as memory-mapped id arrays.

Like fairseq's binarized datasets and nanoGPT's `train.bin`, the token ids of every sentence
(or of one long text) lie end to end in one flat file, `uint16` when the vocabulary has at most
65,536 tokens, else `uint32`; beside it, the start and length of each sentence (`int64` and
`int32` arrays), and `manifest.json`. Every process opens the files with `numpy.memmap`: the
ids stay in the page cache, shared by all processes of a machine, and a batch reads only its
own rows. A directory of the store:

    manifest.json                the format, the key it was made for, counts, filters, dtype
    tokenizer.json | src_/tgt_tokenizer.json   the tokenizer the ids come from
    src_ids.bin, src_starts.npy, src_lengths.npy   (a translation store; `tgt_*` alike)
    corpus.npy                   which corpus of `data.train` each pair came from (uint8)
    train.bin, valid.bin         (a language-model store: one stream each)

A store is made in a temporary directory beside its final place and renamed when complete, so
a store that is found is whole (the temporary directory of a killed preparation is never used,
and the next preparation on the same machine deletes it); a store whose manifest or files do
not match is refused with a `DataError` naming it (delete the directory to prepare it again).
`StoreWriter` writes one, `TokenStore.open` reads one.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import shutil
import socket
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from aiayn.core.errors import DataError

log = logging.getLogger(__name__)

FORMAT = "aiayn-token-store"
VERSION = 1
MANIFEST = "manifest.json"
SIDES = ("src", "tgt")
CACHE_ENV = "AIAYN_CACHE"
HOST_FILE = "HOST"  # in a store being written: the machine writing it


def cache_dir_for(setting: str | None, run_dir: Path | None = None) -> Path:
    """Where token stores are kept: `setting` (`data.cache_dir`), else `$AIAYN_CACHE`, else
    `.cache` beside the run directory (`runs/.cache` when there is none)."""
    if setting:
        return Path(setting).expanduser()
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    return (Path(run_dir).parent if run_dir is not None else Path("runs")) / ".cache"


def ids_dtype(vocab_size: int) -> np.dtype:
    """`uint16` when every id fits (< 65,536 tokens), else `uint32`."""
    return np.dtype(np.uint16 if vocab_size <= 1 << 16 else np.uint32)


class TokenStore:
    """An opened store: `manifest` plus memory-mapped arrays (`ids[side]`, `starts[side]`,
    `lengths[side]`, `corpus` for pairs; `streams[name]` for a language-model store)."""

    def __init__(self, directory: Path, manifest: dict[str, Any]) -> None:
        self.directory = directory
        self.manifest = manifest
        dtype = np.dtype(manifest["dtype"])
        self.ids: dict[str, np.ndarray] = {}
        self.starts: dict[str, np.ndarray] = {}
        self.lengths: dict[str, np.ndarray] = {}
        if manifest["kind"] == "pairs":
            for side in SIDES:
                self.ids[side] = _memmap(directory / f"{side}_ids.bin", dtype)
                self.starts[side] = np.load(directory / f"{side}_starts.npy", mmap_mode="r")
                self.lengths[side] = np.load(directory / f"{side}_lengths.npy", mmap_mode="r")
            self.corpus = np.load(directory / "corpus.npy", mmap_mode="r")
        else:
            self.streams = {
                name.removesuffix(".bin"): _memmap(directory / name, dtype) for name in manifest["id_files"]
            }

    @classmethod
    def open(cls, directory: str | Path, key: str | None = None) -> TokenStore:
        """Open the store in `directory`, checking its manifest (format, version, `key` when
        given) and the sizes of its files; anything amiss -> `DataError` naming the store."""
        directory = Path(directory)
        try:
            manifest = json.loads((directory / MANIFEST).read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            raise DataError(
                f"{directory} is not a readable token store ({err}); delete it to prepare again"
            ) from None
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
            raise DataError(f"{directory} is not an aiayn token store (no {FORMAT!r} manifest)")
        if manifest.get("version") != VERSION:
            raise DataError(
                f"{directory}: token store version {manifest.get('version')!r}, this aiayn reads {VERSION}; "
                "delete it to prepare again"
            )
        if key is not None and manifest.get("key") != key:
            raise DataError(
                f"{directory}: a token store for other data or settings (key {manifest.get('key')!r}, "
                f"expected {key!r}); delete it or point data.cache_dir elsewhere"
            )
        for name, size in manifest.get("files", {}).items():
            path = directory / name
            actual = path.stat().st_size if path.is_file() else None
            if actual != size:
                raise DataError(
                    f"corrupt token store {directory}: {name} has {actual} bytes, the manifest says {size}; "
                    "delete it to prepare again"
                )
        try:
            return cls(directory, manifest)
        except (OSError, ValueError, KeyError) as err:
            raise DataError(f"corrupt token store {directory}: {err}; delete it to prepare again") from err

    @property
    def num_pairs(self) -> int:
        """Number of pairs kept (a pair store)."""
        return len(self.lengths["src"])

    def row(self, side: str, index: int) -> np.ndarray:
        """The ids of sentence `index` of `side` ('src' or 'tgt'), a view of the memory map."""
        start = int(self.starts[side][index])
        return self.ids[side][start : start + int(self.lengths[side][index])]


def _memmap(path: Path, dtype: np.dtype) -> np.ndarray:
    if path.stat().st_size == 0:  # numpy cannot map an empty file
        return np.zeros(0, dtype=dtype)
    return np.memmap(path, dtype=dtype, mode="r")


class StoreWriter:
    """Writes a store into a temporary directory; `finish` renames it into place.

    Use as a context manager: leaving the block by an exception (a full disk, an interrupt)
    removes the temporary directory, so nothing half-written is ever found. A full disk is
    reported as a one-line `DataError`.
    """

    def __init__(self, final: Path, dtype: np.dtype, kind: str, id_files: Sequence[str] = ()) -> None:
        self.final = final
        self.dtype = dtype
        self.kind = kind
        self.id_files = list(id_files) or [f"{side}_ids.bin" for side in SIDES]
        self.temp = final.parent / f".tmp-{final.name}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self._handles: dict[str, Any] = {}
        self._positions: dict[str, int] = {}

    def __enter__(self) -> StoreWriter:
        remove_stale_temporaries(self.final.parent)
        with _disk_errors(self.final):
            self.temp.mkdir(parents=True)
            (self.temp / HOST_FILE).write_text(socket.gethostname())
            for name in self.id_files:
                self._handles[name] = (self.temp / name).open("wb")
                self._positions[name] = 0
        return self

    def __exit__(self, kind: type | None, error: BaseException | None, trace: Any) -> None:
        for handle in self._handles.values():
            with contextlib.suppress(OSError):
                handle.close()
        if self.temp.exists():
            shutil.rmtree(self.temp, ignore_errors=True)

    @property
    def directory(self) -> Path:
        """Where the files are being written (for the tokenizer and extra arrays)."""
        return self.temp

    def append(self, name: str, rows: Sequence[Sequence[int]]) -> np.ndarray:
        """Append `rows` to the ids file `name` end to end; returns their start positions."""
        lengths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
        flat = np.fromiter((i for row in rows for i in row), dtype=self.dtype, count=int(lengths.sum()))
        starts = (
            self._positions[name] + np.concatenate(([0], np.cumsum(lengths)[:-1])) if len(rows) else lengths
        )
        with _disk_errors(self.final):
            flat.tofile(self._handles[name])
        self._positions[name] += int(lengths.sum())
        return starts

    def save_array(self, name: str, values: np.ndarray) -> None:
        """Write one `.npy` array of the store."""
        with _disk_errors(self.final):
            np.save(self.temp / name, values)

    def finish(self, manifest: dict[str, Any]) -> Path:
        """Write the manifest (with every file's size), flush, and rename into place. When
        another process finished the same store first, this one is dropped and theirs kept."""
        with _disk_errors(self.final):
            for handle in self._handles.values():
                handle.flush()
                os.fsync(handle.fileno())
                handle.close()
            (self.temp / HOST_FILE).unlink()
            files = {p.name: p.stat().st_size for p in sorted(self.temp.iterdir())}
            manifest = {
                "format": FORMAT,
                "version": VERSION,
                "kind": self.kind,
                "dtype": self.dtype.name,
                "id_files": self.id_files,
            } | manifest
            manifest["files"] = files
            (self.temp / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
            try:
                os.rename(self.temp, self.final)
            except OSError as err:
                if err.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                    raise
                log.info("token store %s was finished by another process; using it", self.final)
        return self.final


def remove_stale_temporaries(cache_dir: Path) -> list[Path]:
    """Delete the temporary directories that killed preparations left in `cache_dir` (those of
    this machine whose process is gone; they are never used as stores either way)."""
    removed = []
    host = socket.gethostname()
    for path in cache_dir.glob(".tmp-*") if cache_dir.is_dir() else []:
        parts = path.name.rsplit("-", 2)
        try:
            same_host = (path / HOST_FILE).read_text() == host
        except OSError:
            continue
        if len(parts) != 3 or not parts[1].isdigit() or not same_host:
            continue
        try:
            os.kill(int(parts[1]), 0)
        except ProcessLookupError:
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
        except OSError:
            continue
    return removed


@contextlib.contextmanager
def _disk_errors(final: Path) -> Iterator[None]:
    try:
        yield
    except OSError as err:
        if err.errno == errno.ENOSPC:
            raise DataError(f"no space left on the device while writing the token store {final}") from err
        raise DataError(f"cannot write the token store {final}: {err}") from err
