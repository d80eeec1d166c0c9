"""Preparing a translation token store (`aiayn.data.token_store`) once, in one streaming pass.

`find_or_prepare(sources, settings, cache_dir, ...)` computes the store's key, a sha256 of
the sources' fingerprints (`aiayn.data.sources`), the held-out pairs, the tokenizer (a given
or loaded one's JSON; for a trained one its kind, size and sample) and the settings below; a
store under that key in `cache_dir` is opened, else one is made:

1. the tokenizer is trained on at most `tokenizer_sample` pairs, drawn reproducibly (`seed`)
   from all corpora (every pair when there are fewer, in file order: then the tokenizer is
   the one that the whole corpus in memory gave), streamed to the trainer;
2. the pairs are streamed in chunks, encoded with the tokenizer's batch encoder, filtered,
   and their ids appended to the store's files;
3. the manifest, with every filter's count, is written and the directory renamed into place.

The filters, each counted in the log and the manifest (a pair counts under the first that
drops it): `empty` (a side blank, or no tokens), `too_long` (a side over
`max_sentence_tokens` tokens), `length_ratio` (the longer side over `max_length_ratio` times
the shorter, in tokens: Moses' clean-corpus-n.perl uses 9, in words), `duplicates` (a pair
equal to an earlier one; counted always, removed with `remove_duplicates`), `test_overlap`
(a pair equal to a validation or test pair; counted always, removed with
`remove_test_overlap`).
"""

from __future__ import annotations

import array
import itertools
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from aiayn.core.errors import DataError
from aiayn.data.sources import PairSource, digest, pairs_digest
from aiayn.data.token_store import StoreWriter, TokenStore, ids_dtype
from aiayn.data.tokenizer import Names, Tokenizer, TokenizerPair
from aiayn.data.tokenizer_spec import is_trained_kind

log = logging.getLogger(__name__)

Progress = Callable[[int, int], None]
"""`on_progress(done, total)`: how far a long preparation is, in the units it counts."""

ENCODE_CHUNK = 8192  # pairs encoded in one batch call
FILTERS = ("empty", "too_long", "length_ratio", "duplicates", "test_overlap")


@dataclass(frozen=True)
class StoreSettings:
    """The data settings a store depends on (a change makes a new store)."""

    tokenizer: str
    vocab_size: int
    joint_vocab: bool
    special_tokens: dict[str, str | None] | None
    max_sentence_tokens: int
    max_length_ratio: float | None
    remove_duplicates: bool
    remove_test_overlap: bool
    tokenizer_sample: int
    seed: int


def tokenizer_digest(tokenizers: TokenizerPair) -> str:
    """sha256 of the tokenizers' fingerprints (both sides; SentencePiece included)."""
    sides = [tokenizers.source] if tokenizers.is_joint else [tokenizers.source, tokenizers.target]
    return digest([side.fingerprint() for side in sides])


def store_key(
    sources: Sequence[PairSource],
    heldout: Sequence[tuple[str, str]],
    settings: StoreSettings,
    tokenizer: str | None,
) -> str:
    """The key of the store for these inputs; `tokenizer` is the digest of a given tokenizer
    (None when it is trained as the settings say)."""
    return digest(
        {
            "sources": [source.fingerprint() for source in sources],
            "heldout": pairs_digest(heldout),
            "settings": asdict(settings),
            "tokenizer": tokenizer,
        }
    )


def find_or_prepare(
    sources: Sequence[PairSource],
    settings: StoreSettings,
    cache_dir: Path,
    *,
    heldout: Sequence[tuple[str, str]] = (),
    tokenizers: TokenizerPair | None = None,
    create: bool = True,
    on_progress: Progress | None = None,
) -> tuple[TokenStore, TokenizerPair]:
    """The store of `sources` under `cache_dir`, made when missing (unless `create` is False:
    then a missing store is a `DataError`), and its tokenizers. `on_progress(done, total)`: called
    with the pairs encoded so far, of all pairs, while a store is made.

    `tokenizers` given (a resumed run's): the store trained for these settings is used when it
    holds the same tokenizer, else a store encoded with them. A loaded `data.tokenizer` (not a
    kind) is read first and keys the store by its content.
    """
    if tokenizers is None and not is_trained_kind(settings.tokenizer):
        tokenizers = _loaded_tokenizers(settings.tokenizer, settings.special_tokens, settings.joint_vocab)
    given = tokenizer_digest(tokenizers) if tokenizers is not None else None
    trained_key = store_key(sources, heldout, settings, None) if is_trained_kind(settings.tokenizer) else None
    candidates = [key for key in (trained_key, store_key(sources, heldout, settings, given)) if key]
    for key in candidates:
        directory = cache_dir / key[:32]
        if (directory / "manifest.json").exists():
            store = TokenStore.open(directory, key)
            if given is None or store.manifest["tokenizer_sha256"] == given:
                log.info("token store %s: %d pairs (found, not re-encoded)", directory, store.num_pairs)
                return store, tokenizers or _store_tokenizers(store, settings.special_tokens)
    key = candidates[-1]
    directory = cache_dir / key[:32]
    if not create:
        raise DataError(
            f"no token store {directory} for this data (rank 0 of this machine should have made it)"
        )
    cache_dir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    counts = [source.count() for source in sources]
    if tokenizers is None:
        log.info(
            "training %s tokenizer(s) on %d of %d pairs",
            settings.tokenizer,
            min(sum(counts), settings.tokenizer_sample),
            sum(counts),
        )
        tokenizers = train_tokenizers(sources, counts, settings)
    with StoreWriter(directory, ids_dtype(tokenizers.source.vocab_size), "pairs") as writer:
        tokenizers.save(writer.directory)
        summary = encode_into(writer, sources, tokenizers, settings, heldout, on_progress, sum(counts))
        summary |= {
            "key": key,
            "settings": asdict(settings),
            "tokenizer_sha256": tokenizer_digest(tokenizers),
            "seconds": round(time.perf_counter() - started, 3),
        }
        writer.finish(summary)
    log.info(
        "token store %s: %d pairs in %.1f s (%s)",
        directory,
        summary["num_pairs"],
        summary["seconds"],
        ", ".join(f"{name} {summary['filters'][name]}" for name in FILTERS),
    )
    return TokenStore.open(directory, key), tokenizers


def _loaded_tokenizers(spec: str, names: Names, joint: bool) -> TokenizerPair:
    return TokenizerPair.from_spec(spec, [], [], 0, joint=joint, names=names)


def _store_tokenizers(store: TokenStore, names: Names) -> TokenizerPair:
    return TokenizerPair.load(store.directory, names=names)


def sample_indices(total: int, sample: int, seed: int) -> np.ndarray | None:
    """Sorted indices of `sample` of `total` pairs drawn with `seed`; None: take them all."""
    if total <= sample:
        return None
    return np.sort(np.random.default_rng([seed, total]).choice(total, size=sample, replace=False))


def sampled_texts(sources: Sequence[PairSource], chosen: np.ndarray | None, side: int) -> Iterator[str]:
    """One side's text of the chosen pairs (all of them when `chosen` is None), streamed."""
    pairs = itertools.chain.from_iterable(source.pairs() for source in sources)
    if chosen is None:
        yield from (pair[side] for pair in pairs)
        return
    position = 0
    for index, pair in enumerate(pairs):
        if position == len(chosen):
            return
        if index == chosen[position]:
            position += 1
            yield pair[side]


def train_tokenizers(
    sources: Sequence[PairSource], counts: Sequence[int], settings: StoreSettings
) -> TokenizerPair:
    """The tokenizers trained on the sample (see the module docstring): one on the sources
    then the targets of the sample (joint), or one per side."""
    chosen = sample_indices(sum(counts), settings.tokenizer_sample, settings.seed)
    spec, size, names = settings.tokenizer, settings.vocab_size, settings.special_tokens
    if settings.joint_vocab:
        texts = itertools.chain(sampled_texts(sources, chosen, 0), sampled_texts(sources, chosen, 1))
        joint = Tokenizer.from_spec(spec, texts, size, names)  # type: ignore[arg-type]
        return TokenizerPair(joint, joint)
    return TokenizerPair(
        Tokenizer.from_spec(spec, sampled_texts(sources, chosen, 0), size, names),  # type: ignore[arg-type]
        Tokenizer.from_spec(spec, sampled_texts(sources, chosen, 1), size, names),  # type: ignore[arg-type]
    )


def _chunks(pairs: Iterator[tuple[str, str]], size: int) -> Iterator[list[tuple[str, str]]]:
    while chunk := list(itertools.islice(pairs, size)):
        yield chunk


def encode_into(
    writer: StoreWriter,
    sources: Sequence[PairSource],
    tokenizers: TokenizerPair,
    settings: StoreSettings,
    heldout: Sequence[tuple[str, str]],
    on_progress: Progress | None = None,
    total: int = 0,
) -> dict[str, Any]:
    """Stream, encode, filter and append every source's pairs; the manifest's counts.
    `on_progress(done, total)` after each chunk: pairs read so far, of `total`."""
    counts = dict.fromkeys(FILTERS, 0)
    heldout_hashes = {hash(pair) for pair in heldout}
    starts: dict[str, list[np.ndarray]] = {"src": [], "tgt": []}
    lengths: dict[str, list[np.ndarray]] = {"src": [], "tgt": []}
    corpus_ids, pair_hashes, overlap = array.array("B"), array.array("q"), array.array("B")
    corpora = []
    ratio, longest = settings.max_length_ratio, settings.max_sentence_tokens
    done = 0
    for number, source in enumerate(sources):
        read = kept_before = 0
        kept_before = len(corpus_ids)
        for chunk in _chunks(source.pairs(), ENCODE_CHUNK):
            read += len(chunk)
            texts = [(s, t) for s, t in chunk if s.strip() and t.strip()]
            counts["empty"] += len(chunk) - len(texts)
            src = tokenizers.source.encode_batch([s for s, _ in texts])
            tgt = tokenizers.target.encode_batch([t for _, t in texts])
            keep_src, keep_tgt = [], []
            for pair, s, t in zip(texts, src, tgt, strict=True):
                short, long = sorted((len(s), len(t)))
                if short == 0:
                    counts["empty"] += 1
                elif long > longest:
                    counts["too_long"] += 1
                elif ratio is not None and long > ratio * short:
                    counts["length_ratio"] += 1
                else:
                    keep_src.append(s)
                    keep_tgt.append(t)
                    key = hash(pair)
                    pair_hashes.append(key)
                    overlap.append(key in heldout_hashes)
            for side, rows in (("src", keep_src), ("tgt", keep_tgt)):
                starts[side].append(writer.append(f"{side}_ids.bin", rows))
                lengths[side].append(np.fromiter(map(len, rows), dtype=np.int32, count=len(rows)))
            corpus_ids.extend([number] * len(keep_src))
            done += len(chunk)
            if on_progress is not None:
                on_progress(done, total)
        corpora.append({"name": source.name, "read": read, "encoded": len(corpus_ids) - kept_before})
    hashes = np.frombuffer(pair_hashes, dtype=np.int64) if pair_hashes else np.zeros(0, np.int64)
    keep = np.zeros(len(hashes), dtype=bool)
    keep[np.unique(hashes, return_index=True)[1]] = True  # the first of equal pairs
    counts["duplicates"] = int(len(hashes) - keep.sum())
    if not settings.remove_duplicates:
        keep[:] = True
    overlapping = np.frombuffer(overlap, dtype=np.uint8).astype(bool) if overlap else np.zeros(0, bool)
    counts["test_overlap"] = int((overlapping & keep).sum())
    if settings.remove_test_overlap:
        keep &= ~overlapping
    if not keep.any():
        raise DataError(f"no usable sentence pairs in {', '.join(s.name for s in sources)}: {counts}")
    for side in ("src", "tgt"):
        writer.save_array(f"{side}_starts.npy", _joined(starts[side], np.int64)[keep])
        writer.save_array(f"{side}_lengths.npy", _joined(lengths[side], np.int32)[keep])
    corpus = np.frombuffer(corpus_ids, dtype=np.uint8)[keep]
    writer.save_array("corpus.npy", corpus)
    for number, entry in enumerate(corpora):
        entry["kept"] = int((corpus == number).sum())
    return {
        "num_pairs": int(keep.sum()),
        "pairs_read": sum(entry["read"] for entry in corpora),
        "corpora": corpora,
        "filters": counts,
        "removed": {"duplicates": settings.remove_duplicates, "test_overlap": settings.remove_test_overlap},
    }


def _joined(parts: list[np.ndarray], dtype: type) -> np.ndarray:
    return np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype=dtype)
