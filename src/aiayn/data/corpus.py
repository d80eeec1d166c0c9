"""Reading line-aligned text corpora and dropping unusable sentence pairs.

A corpus file holds one sentence per line, UTF-8, plain (``.txt`` or anything else) or gzip
(recognised by a ``.gz`` suffix or by the gzip magic bytes). Lines end with ``\\n`` or ``\\r\\n``;
the last line may lack its newline. Only ``\\n`` separates lines (unlike ``str.splitlines``,
which would also split on form feeds or U+2028 and break the alignment of parallel files).
"""

import gzip
import itertools
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TypeVar

from aiayn.core.errors import DataError

GZIP_MAGIC = b"\x1f\x8b"
S = TypeVar("S", bound=Sequence)  # one side of a pair: a string or a list of token ids


def read_bytes(path: str | Path) -> bytes:
    """The contents of ``path``, decompressed when it is gzip; errors -> :class:`DataError`."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"corpus file not found: {path}")
    try:
        data = path.read_bytes()
    except OSError as err:
        raise DataError(f"cannot read corpus file {path}: {err}") from err
    if path.suffix == ".gz" or data.startswith(GZIP_MAGIC):
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as err:
            raise DataError(f"corrupt gzip file {path}: {err}") from err
    return data


def utf8_error(where: str | Path, line: int | None, reason: str) -> DataError:
    """The one error for text that is not UTF-8, naming the file and (when known) the line."""
    at = f": line {line}" if line is not None else ""
    return DataError(f"{where}{at} is not valid UTF-8 ({reason})")


def decode_utf8(data: bytes, where: str | Path, line: int = 1) -> str:
    """`data` (the text of `where` from its line `line` on) decoded as UTF-8, a byte order mark at
    the start of the file dropped; invalid UTF-8 -> `utf8_error` naming the line it is on."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise utf8_error(where, line + data.count(b"\n", 0, err.start), err.reason) from None
    return text.removeprefix("\ufeff") if line == 1 else text


def read_lines(path: str | Path, allow_empty: bool = False) -> list[str]:
    """The lines of ``path`` without their ``\\n`` / ``\\r\\n`` endings.

    Invalid UTF-8 -> :class:`DataError` naming the file and the 1-based line number. A file with
    no lines at all -> :class:`DataError` unless ``allow_empty``. A UTF-8 byte order mark at the
    start of the file is dropped.
    """
    text = decode_utf8(read_bytes(path), path)
    lines = text.split("\n")
    if lines[-1] == "":  # the newline that ends the last line, or an empty file
        lines.pop()
    lines = [line.removesuffix("\r") for line in lines]
    if not lines and not allow_empty:
        raise DataError(f"corpus file is empty: {path}")
    return lines


def read_parallel(src_path: str | Path, tgt_path: str | Path) -> list[tuple[str, str]]:
    """Line-aligned (source, target) pairs of two files; different line counts -> DataError."""
    src, tgt = read_lines(src_path), read_lines(tgt_path)
    if len(src) != len(tgt):
        raise DataError(
            f"parallel files differ in length: {src_path} has {len(src)} lines, "
            f"{tgt_path} has {len(tgt)} lines"
        )
    return list(zip(src, tgt, strict=True))


@dataclass
class FilterStats:
    """What :func:`filter_pairs` dropped, for a log line."""

    origin: str
    max_len: int | None
    total: int = 0
    empty: int = 0
    too_long: int = 0
    kept_indices: list[int] = field(default_factory=list)

    @property
    def kept(self) -> int:
        """Number of pairs kept."""
        return len(self.kept_indices)

    def describe(self) -> str:
        """E.g. "dropped 12 empty pairs and 3 pairs longer than 100 tokens from train.de"."""
        limit = f"longer than {self.max_len} tokens" if self.max_len is not None else "too long"
        return (
            f"dropped {self.empty} empty {_pairs(self.empty)} and {self.too_long} "
            f"{_pairs(self.too_long)} {limit} from {self.origin} "
            f"(kept {self.kept} of {self.total})"
        )


def _pairs(n: int) -> str:
    return "pair" if n == 1 else "pairs"


def _is_empty(side: Sequence) -> bool:
    return len(side) == 0 or (isinstance(side, str) and not side.strip())


def filter_pairs(
    pairs: Sequence[tuple[S, S]], max_len: int | None, origin: str
) -> tuple[list[tuple[S, S]], FilterStats]:
    """Drop pairs with an empty side or a side longer than ``max_len``.

    The sides are token id lists (length = number of tokens, before ``<bos>``/``<eos>``) or
    strings (length = number of characters; whitespace-only counts as empty). ``max_len=None``
    keeps any length. ``origin`` names the data (a file) in the stats and in the
    :class:`DataError` raised when nothing is left.

    Returns the kept pairs, in order, and a :class:`FilterStats` with the counts and the indices
    of the kept pairs in ``pairs``.
    """
    stats = FilterStats(origin=origin, max_len=max_len, total=len(pairs))
    kept = []
    for i, (src, tgt) in enumerate(pairs):
        if _is_empty(src) or _is_empty(tgt):
            stats.empty += 1
        elif max_len is not None and max(len(src), len(tgt)) > max_len:
            stats.too_long += 1
        else:
            kept.append((src, tgt))
            stats.kept_indices.append(i)
    if not kept:
        raise DataError(f"no usable sentence pairs in {origin}: {stats.describe()}")
    return kept, stats


# ---------------------------------------------------------------------- streaming
READ_CHUNK = 1 << 20  # bytes read at a time when streaming a corpus file


def open_binary(path: str | Path) -> IO[bytes]:
    """`path` opened for reading bytes, decompressed on the fly when it is gzip; a missing or
    unreadable file -> :class:`DataError` naming it."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"corpus file not found: {path}")
    try:
        handle = path.open("rb")
        if path.suffix == ".gz" or handle.read(2) == GZIP_MAGIC:
            handle.close()
            return gzip.open(path, "rb")
        handle.seek(0)
        return handle
    except OSError as err:
        raise DataError(f"cannot read corpus file {path}: {err}") from err


def iter_lines(path: str | Path) -> Iterator[str]:
    """The lines of `path` one at a time, as :func:`read_lines` reads them (only ``\\n`` ends a
    line, a ``\\r`` before it is dropped, a leading byte order mark too), without holding the
    file in memory. Invalid UTF-8 -> :class:`DataError` naming the file and the line."""
    with open_binary(path) as handle:
        try:
            for number, raw in enumerate(handle, start=1):
                yield decode_utf8(raw.removesuffix(b"\n").removesuffix(b"\r"), path, number)
        except (OSError, EOFError, zlib.error) as err:
            raise DataError(f"cannot read corpus file {path}: {err}") from err


def count_lines(path: str | Path) -> int:
    """Number of lines of `path` (a last line without its newline counts), streamed."""
    lines, last = 0, b"\n"
    with open_binary(path) as handle:
        try:
            while chunk := handle.read(READ_CHUNK):
                lines += chunk.count(b"\n")
                last = chunk[-1:]
        except (OSError, EOFError, zlib.error) as err:
            raise DataError(f"cannot read corpus file {path}: {err}") from err
    return lines + (last != b"\n")


def check_text_file(path: str | Path) -> int:
    """Read all of `path` once, streamed, and return its number of lines (as `count_lines`
    counts them): a file that is missing, unreadable, not UTF-8 (a binary file) or empty ->
    :class:`DataError` naming it (and the line). What a run checks before it claims its
    directory."""
    import codecs

    decoder = codecs.getincrementaldecoder("utf-8")()
    lines, last, size = 0, b"\n", 0
    with open_binary(path) as handle:
        try:
            while chunk := handle.read(READ_CHUNK):
                try:
                    decoder.decode(chunk)
                except UnicodeDecodeError as err:
                    line = lines + chunk.count(b"\n", 0, max(err.start, 0)) + 1
                    raise utf8_error(path, line, err.reason) from None
                lines += chunk.count(b"\n")
                last, size = chunk[-1:], size + len(chunk)
            decoder.decode(b"", final=True)
        except UnicodeDecodeError as err:
            raise utf8_error(path, lines + 1, err.reason) from None
        except (OSError, EOFError, zlib.error) as err:
            raise DataError(f"cannot read corpus file {path}: {err}") from err
    if size == 0:
        raise DataError(f"corpus file is empty: {path}")
    return lines + (last != b"\n")


def check_parallel_files(src_path: str | Path, tgt_path: str | Path) -> int:
    """`check_text_file` of both files, and their line counts equal: the number of pairs."""
    src, tgt = check_text_file(src_path), check_text_file(tgt_path)
    if src != tgt:
        raise DataError(
            f"parallel files differ in length: {src_path} has {src} lines, {tgt_path} has {tgt} lines"
        )
    return src


def count_parallel(src_path: str | Path, tgt_path: str | Path) -> int:
    """The number of line pairs of two parallel files; different counts or none -> DataError."""
    src, tgt = count_lines(src_path), count_lines(tgt_path)
    if src != tgt:
        raise DataError(
            f"parallel files differ in length: {src_path} has {src} lines, {tgt_path} has {tgt} lines"
        )
    if src == 0:
        raise DataError(f"corpus file is empty: {src_path}")
    return src


def iter_parallel(src_path: str | Path, tgt_path: str | Path) -> Iterator[tuple[str, str]]:
    """Line-aligned (source, target) pairs of two files, streamed; a file that ends before the
    other -> DataError naming both."""
    src_lines, tgt_lines = iter_lines(src_path), iter_lines(tgt_path)
    for number, (src, tgt) in enumerate(itertools.zip_longest(src_lines, tgt_lines), start=1):
        if src is None or tgt is None:
            short = src_path if src is None else tgt_path
            raise DataError(
                f"parallel files differ in length: {short} ends at line {number - 1}, "
                f"{tgt_path if src is None else src_path} goes on"
            )
        yield src, tgt
