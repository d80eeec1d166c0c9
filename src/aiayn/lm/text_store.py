"""A language model's text in a token store (`aiayn.data.token_store`): prepared once, streamed.

The text file is read three times, never whole: once to count its characters (the held-out
tail is its last `data.valid_fraction` of characters, as `split_text` cuts it), once to train
the tokenizer on the head's first `data.tokenizer_sample` lines (a trained kind), and once to
encode head and tail in chunks of whole lines (`ENCODE_CHUNK_CHARS`, through the tokenizer's
batch encoder). The store holds two streams, `train` and `valid`, each `<bos>` followed by the
ids of its text (as `text_stream` makes them); `TokenWindows` then cuts windows from the memory
map, as nanoGPT reads `train.bin`. The key covers the file's fingerprint, the tokenizer and the
settings, so a second run, a `--resume` and every rank reuse the store.
"""

from __future__ import annotations

import io
import itertools
import logging
import time
from collections.abc import Iterator
from pathlib import Path

from aiayn.core.errors import DataError
from aiayn.data.corpus import iter_lines, open_binary, utf8_error
from aiayn.data.pair_store import Progress
from aiayn.data.sources import digest, file_fingerprint
from aiayn.data.token_store import StoreWriter, TokenStore, ids_dtype
from aiayn.data.tokenizer import Tokenizer
from aiayn.data.tokenizer_spec import JOINT_FILE, is_trained_kind
from aiayn.lm.dataset import ENCODE_CHUNK_CHARS
from aiayn.lm.settings import LMSettings

log = logging.getLogger(__name__)

CHUNKS_PER_CALL = 64  # text chunks encoded in one batch call


def text_lines(path: Path) -> Iterator[str]:
    """The lines of a UTF-8 text file with their endings, streamed (a leading byte order mark
    dropped); invalid UTF-8 -> `DataError` naming the file and the line."""
    with open_binary(path) as raw:
        text = io.TextIOWrapper(raw, encoding="utf-8", newline="")
        try:
            for number, line in enumerate(text):
                yield line.removeprefix("\ufeff") if number == 0 else line
        except UnicodeDecodeError:
            for _ in iter_lines(path):  # finds the line and raises its DataError
                pass
            raise utf8_error(path, None, "undecodable bytes") from None


def head_and_tail(path: Path, valid_fraction: float) -> tuple[Iterator[str], Iterator[str], int]:
    """Iterators over the lines of the head and of the tail (`split_text`'s cut, by characters),
    and the number of characters of the text."""
    total = sum(len(line) for line in text_lines(path))
    cut = total - int(total * valid_fraction)

    def part(tail: bool) -> Iterator[str]:
        seen = 0
        for line in text_lines(path):
            if seen + len(line) <= cut:
                if not tail:
                    yield line
            else:
                split = max(cut - seen, 0)
                piece = line[split:] if tail else line[:split]
                if piece:
                    yield piece
                if not tail and split < len(line):
                    return
            seen += len(line)

    return part(False), part(True), total


def chunks(lines: Iterator[str]) -> Iterator[str]:
    """Whole lines joined into chunks of about `ENCODE_CHUNK_CHARS` characters."""
    current, size = [], 0
    for line in lines:
        current.append(line)
        size += len(line)
        if size >= ENCODE_CHUNK_CHARS:
            yield "".join(current)
            current, size = [], 0
    if current:
        yield "".join(current)


def lm_store_key(data: LMSettings, path: Path, tokenizer: str | None) -> str:
    """The key of the store of `path` under `data`'s settings (`tokenizer`: a given one's digest)."""
    settings = {
        name: getattr(data, name)
        for name in ("tokenizer", "vocab_size", "special_tokens", "valid_fraction", "tokenizer_sample")
    }
    return digest(
        {"text": file_fingerprint(path), "settings": settings, "tokenizer": tokenizer, "kind": "lm"}
    )


def prepare_lm_store(
    data: LMSettings, tokenizer: Tokenizer | None, cache_dir: Path, create: bool = True,
    on_progress: Progress | None = None,
) -> tuple[TokenStore, Tokenizer]:
    """The store of `data.text_file` in `cache_dir` (made unless `create` is False) and its
    tokenizer (`tokenizer` when given: a resumed run's). `on_progress(done, total)` while a store
    is made: the characters encoded so far, of all."""
    from aiayn.data.paths import resolve_data_file

    path = resolve_data_file(data.text_file, "text file")
    if tokenizer is None and not is_trained_kind(data.tokenizer):
        tokenizer = Tokenizer.from_spec(data.tokenizer, [], data.vocab_size, data.special_tokens)
    given = tokenizer.fingerprint() if tokenizer is not None else None
    keys = [lm_store_key(data, path, None)] if is_trained_kind(data.tokenizer) else []
    keys.append(lm_store_key(data, path, given))
    for key in keys:
        directory = cache_dir / key[:32]
        if (directory / "manifest.json").exists():
            store = TokenStore.open(directory, key)
            if given is None or store.manifest["tokenizer_sha256"] == given:
                log.info("token store %s: %d training tokens (found)", directory, len(store.streams["train"]))
                return store, tokenizer or Tokenizer.load(directory / JOINT_FILE, names=data.special_tokens)
    directory = cache_dir / keys[-1][:32]
    if not create:
        raise DataError(
            f"no token store {directory} for this text (rank 0 of this machine should have made it)"
        )
    started = time.perf_counter()
    if tokenizer is None:
        head, _, _ = head_and_tail(path, data.valid_fraction)
        log.info(
            "training a %s tokenizer on the first %d lines of %s", data.tokenizer, data.tokenizer_sample, path
        )
        sample = chunks(itertools.islice(head, data.tokenizer_sample))
        tokenizer = Tokenizer.from_spec(data.tokenizer, sample, data.vocab_size, data.special_tokens)  # type: ignore[arg-type]
    head, tail, characters = head_and_tail(path, data.valid_fraction)
    if characters == 0 or not any(line.strip() for line in text_lines(path)):
        raise DataError(f"{path}: the text file is empty")
    cache_dir.mkdir(parents=True, exist_ok=True)
    counts = {}
    with StoreWriter(
        directory, ids_dtype(tokenizer.vocab_size), "stream", ["train.bin", "valid.bin"]
    ) as writer:
        tokenizer.save(writer.directory / JOINT_FILE)
        done = 0
        for name, lines in (("train", head), ("valid", tail)):
            pieces = chunks(lines)
            tokens = 0
            while group := list(itertools.islice(pieces, CHUNKS_PER_CALL)):
                ids = [i for row in tokenizer.encode_batch(group) for i in row]
                if tokens == 0:
                    ids.insert(0, tokenizer.specials.bos_id)
                writer.append(f"{name}.bin", [ids])
                tokens += len(ids)
                done += sum(map(len, group))
                if on_progress is not None:
                    on_progress(min(done, characters), characters)
            counts[name] = tokens
        writer.finish(
            {
                "key": keys[-1],
                "text": str(path),
                "characters": characters,
                "num_tokens": counts,
                "tokenizer_sha256": tokenizer.fingerprint(),
                "seconds": round(time.perf_counter() - started, 3),
            }
        )
    log.info("token store %s: %s tokens of %s", directory, counts, path)
    return TokenStore.open(directory, keys[-1]), tokenizer
