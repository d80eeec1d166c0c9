"""Where training pairs come from, streamed: parallel text files, pairs already in memory (the
built-in tasks, Multi30k), or a Hugging Face `datasets` dataset (`aiayn.data.hf_source`).

A source says how many pairs it has (`count`), yields them in a fixed order (`pairs`), and
gives a `fingerprint`: what identifies its content cheaply (a file's size, modification time
and a hash of three 1 MiB samples; the full text of pairs in memory), so that a token store
made from it is found again, and a changed file makes a new one. `weight` is the corpus's
sampling weight among `data.train`'s corpora.
"""

from __future__ import annotations

import hashlib
import json
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from aiayn.core.errors import DataError
from aiayn.data.corpus import count_parallel, iter_parallel

SAMPLE_BYTES = 1 << 20  # each of the three samples a file's fingerprint hashes


class PairSource(ABC):
    """A corpus of (source, target) text pairs."""

    def __init__(self, name: str, weight: float = 1.0) -> None:
        self.name = name
        self.weight = weight

    @abstractmethod
    def count(self) -> int:
        """Number of pairs (the lines of the files)."""

    @abstractmethod
    def pairs(self) -> Iterator[tuple[str, str]]:
        """The pairs, always in the same order."""

    @abstractmethod
    def fingerprint(self) -> dict[str, Any]:
        """What identifies the content (JSON-serialisable)."""


class FilePairs(PairSource):
    """Two line-aligned text files (plain or gzip), streamed line by line."""

    def __init__(self, src_path: Path, tgt_path: Path, weight: float = 1.0) -> None:
        super().__init__(str(src_path), weight)
        self.src_path, self.tgt_path = Path(src_path), Path(tgt_path)
        self._count: int | None = None

    def count(self) -> int:
        if self._count is None:
            self._count = count_parallel(self.src_path, self.tgt_path)
        return self._count

    def pairs(self) -> Iterator[tuple[str, str]]:
        return iter_parallel(self.src_path, self.tgt_path)

    def fingerprint(self) -> dict[str, Any]:
        return {"files": [file_fingerprint(self.src_path), file_fingerprint(self.tgt_path)]}


class ListPairs(PairSource):
    """Pairs already in memory (a built-in task, Multi30k)."""

    def __init__(self, name: str, pairs: Sequence[tuple[str, str]], weight: float = 1.0) -> None:
        super().__init__(name, weight)
        self._pairs = pairs

    def count(self) -> int:
        return len(self._pairs)

    def pairs(self) -> Iterator[tuple[str, str]]:
        return iter(self._pairs)

    def fingerprint(self) -> dict[str, Any]:
        return {"pairs": pairs_digest(self._pairs)}


def pairs_digest(pairs: Sequence[tuple[str, str]]) -> str:
    """sha256 of the text of `pairs`."""
    digest = hashlib.sha256()
    for src, tgt in pairs:
        digest.update(
            src.encode("utf-8", "surrogatepass") + b"\t" + tgt.encode("utf-8", "surrogatepass") + b"\n"
        )
    return digest.hexdigest()


def file_fingerprint(path: Path) -> dict[str, Any]:
    """Size, modification time and a sha256 of the first, middle and last MiB of `path`."""
    try:
        stat = path.stat()
        digest = hashlib.sha256()
        with path.open("rb") as handle:
            for offset in sorted(
                {0, max(0, stat.st_size // 2 - SAMPLE_BYTES // 2), max(0, stat.st_size - SAMPLE_BYTES)}
            ):
                handle.seek(offset)
                digest.update(handle.read(SAMPLE_BYTES))
    except OSError as err:
        raise DataError(f"cannot read corpus file {path}: {err}") from err
    return {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sample_sha256": digest.hexdigest()}


def digest(value: Any) -> str:
    """sha256 of a JSON-serialisable value (keys sorted)."""
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()
