"""Translation data: from a `TranslationSettings` to tokenizers, the training pairs in a token store and
the encoded validation pairs (a built-in synthetic task, Multi30k, or parallel corpora).

The training pairs of every task go through one path (`aiayn.data.pair_store`): prepared once
into a token store under the cache directory (`data.cache_dir`, else `$AIAYN_CACHE`, else
`.cache` beside the run directory), found again by every later run, `--resume` and process,
and batched from its memory map (`aiayn.data.store_dataset`). The validation and test pairs
are small and stay in memory (BLEU needs their text).

`data.task: files` reads `data.train_src`/`data.train_tgt`, or the corpora listed in
`data.train`, each one of

    {src: FILE, tgt: FILE, weight: 1.0}
    {hf: NAME, config: de-en, split: train, weight: 1.0}            # a Hugging Face Hub dataset
    {hf: parquet|json|csv, files: [FILE, ...], weight: 1.0}          # local files, through `datasets`

(`weight`: the corpus's sampling weight, see `aiayn.data.store_dataset`; a Hugging Face entry
reads the fields named `data.src_lang` and `data.tgt_lang`, at the top of a row or inside its
`translation` mapping, or the fields `src_field`/`tgt_field` name; see `aiayn.data.hf_source`).
"""

from __future__ import annotations

import itertools
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from aiayn.core.errors import ConfigError
from aiayn.core.files import atomic_write_text
from aiayn.data.batching import BatchedDataset, ParallelDataset
from aiayn.data.corpus import check_parallel_files, filter_pairs, read_parallel
from aiayn.data.multi30k import load_multi30k
from aiayn.data.pair_store import Progress, StoreSettings, find_or_prepare
from aiayn.data.paths import resolve_data_file
from aiayn.data.sources import FilePairs, ListPairs, PairSource
from aiayn.data.store_dataset import StoreDataset
from aiayn.data.synthetic import TASKS, make_task
from aiayn.data.token_store import TokenStore, cache_dir_for
from aiayn.data.tokenizer import TokenizerPair
from aiayn.training.auto_rules import AUTO, Choice, validation_split_size
from aiayn.training.auto_settings import choose_vocab_size
from aiayn.translation.settings import TranslationSettings

log = logging.getLogger(__name__)

Pairs = list[tuple[str, str]]
CORPUS_KEYS = {"src", "tgt", "weight", "hf", "config", "split", "files", "src_field", "tgt_field"}
MAX_CORPORA = 255  # a pair's corpus number is one byte


@dataclass
class PreparedData:
    """Tokenizers, the training pairs (from the store) and the encoded validation set, and
    raw text pairs for BLEU."""

    tokenizers: TokenizerPair
    train: BatchedDataset[Any]
    valid: ParallelDataset | None
    valid_pairs: Pairs
    test_pairs: Pairs
    store: TokenStore | None = None
    choices: tuple[Choice, ...] = ()  # the data settings chosen at `auto` (data.vocab_size)


def store_settings(config: TranslationSettings) -> StoreSettings:
    """The settings the training store depends on."""
    return StoreSettings(
        tokenizer=config.tokenizer,
        vocab_size=config.vocab_size,
        joint_vocab=config.joint_vocab,
        special_tokens=config.special_tokens,
        max_sentence_tokens=config.max_sentence_tokens,
        max_length_ratio=config.max_length_ratio,
        remove_duplicates=config.remove_duplicates,
        remove_test_overlap=config.remove_test_overlap,
        tokenizer_sample=config.tokenizer_sample,
        seed=config.seed,
    )


def corpus_source(entry: Any, number: int, config: TranslationSettings) -> PairSource:
    """One entry of `data.train` as a source (see the module docstring); a bad entry ->
    `ConfigError` naming it."""
    where = f"data.train[{number}]"
    if not isinstance(entry, dict):
        raise ConfigError(f"{where} must be a mapping such as {{src: FILE, tgt: FILE}}, got {entry!r}")
    unknown = sorted(set(entry) - CORPUS_KEYS)
    if unknown:
        raise ConfigError(
            f"{where}: unknown key(s) {', '.join(unknown)}; valid: {', '.join(sorted(CORPUS_KEYS))}"
        )
    weight = entry.get("weight", 1.0)
    if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not 0 < weight < 1e6:
        raise ConfigError(f"{where}.weight must be a number > 0, got {weight!r}")
    if "hf" in entry:
        from aiayn.data.hf_source import HFPairs  # the `datasets` extra, imported when used

        return HFPairs.from_entry(entry, where, config.src_lang, config.tgt_lang, float(weight))
    if not (entry.get("src") and entry.get("tgt")):
        raise ConfigError(f"{where} needs src and tgt (two line-aligned files) or hf (a dataset)")
    src = resolve_data_file(entry["src"], f"{where}.src")
    tgt = resolve_data_file(entry["tgt"], f"{where}.tgt")
    return FilePairs(src, tgt, float(weight))


def train_sources(config: TranslationSettings) -> list[PairSource]:
    """The training corpora of a `files` config, not yet read (they are streamed later)."""
    if config.task != "files":
        raise ConfigError(
            f"data.task must be one of {', '.join(TASKS)}, multi30k, files; got {config.task!r}"
        )
    if config.train is not None:
        if config.train_src or config.train_tgt:
            raise ConfigError("give data.train or data.train_src/data.train_tgt, not both")
        if not isinstance(config.train, list) or not config.train:
            raise ConfigError(f"data.train must be a non-empty list of corpora, got {config.train!r}")
        if len(config.train) > MAX_CORPORA:
            raise ConfigError(f"data.train lists {len(config.train)} corpora; at most {MAX_CORPORA}")
        return [corpus_source(entry, number, config) for number, entry in enumerate(config.train)]
    if not (config.train_src and config.train_tgt):
        raise ConfigError("data.task 'files' needs data.train_src and data.train_tgt (or data.train)")
    src = resolve_data_file(config.train_src, "data.train_src")
    tgt = resolve_data_file(config.train_tgt, "data.train_tgt")
    return [FilePairs(src, tgt)]


def check_files(config: TranslationSettings) -> None:
    """For task 'files': every corpus file of every split found (a directory is named as one),
    readable, UTF-8, not empty, and each pair of files of the same length; a `DataError` naming
    the file otherwise. Reads each file once, streamed (a run does this before it claims its
    directory)."""
    if config.task != "files":
        return
    pairs = [(s.src_path, s.tgt_path) for s in train_sources(config) if isinstance(s, FilePairs)]
    for split in ("valid", "test"):
        src, tgt = getattr(config, f"{split}_src"), getattr(config, f"{split}_tgt")
        if src and tgt:
            pairs.append((resolve_data_file(src, f"data.{split}_src"),
                          resolve_data_file(tgt, f"data.{split}_tgt")))
        elif src or tgt:
            raise ConfigError(f"data.{split}_src and data.{split}_tgt must be given together")
    for src_path, tgt_path in pairs:
        check_parallel_files(src_path, tgt_path)


def read_splits(
    config: TranslationSettings, names: tuple[str, ...] = ("train", "valid", "test")
) -> dict[str, tuple[Pairs, str]]:
    """Raw (source, target) text pairs of each available split among `names`, in memory, with
    a name for logs (the training split of big corpora is streamed by `prepare_data` instead)."""
    if config.task in TASKS:
        splits = make_task(config.task, config.seed, config.num_train, config.num_valid, config.num_test)
        return {
            name: (pairs, f"{config.task}/{name}")
            for name, pairs in splits.items()
            if pairs and name in names
        }
    if config.task == "multi30k":
        files = {"train": "train", "valid": "val", "test": "test_2016_flickr"}
        return {
            split: (
                load_multi30k(name, config.src_lang, config.tgt_lang, download=config.download),
                f"multi30k/{name}.{config.src_lang}-{config.tgt_lang}",
            )
            for split, name in files.items()
            if split in names
        }
    if config.task == "files":
        if not (config.train_src and config.train_tgt) and config.train is None:
            raise ConfigError("data.task 'files' needs data.train_src and data.train_tgt (or data.train)")
        splits = {}
        for split in names:
            src, tgt = getattr(config, f"{split}_src"), getattr(config, f"{split}_tgt")
            if src and tgt:
                src_path = resolve_data_file(src, f"data.{split}_src")
                tgt_path = resolve_data_file(tgt, f"data.{split}_tgt")
                splits[split] = (read_parallel(src_path, tgt_path), str(src_path))
            elif src or tgt:
                raise ConfigError(f"data.{split}_src and data.{split}_tgt must be given together")
        return splits
    raise ConfigError(f"data.task must be one of {', '.join(TASKS)}, multi30k, files; got {config.task!r}")


def encode_split(
    pairs: Pairs, origin: str, tokenizers: TokenizerPair, max_sentence_tokens: int
) -> ParallelDataset:
    """Encode pairs in memory (the validation set), dropping (and logging the count of) empty
    and over-long pairs."""
    pairs, stats = filter_pairs(pairs, None, origin)  # empty lines
    if stats.empty:
        log.warning(stats.describe())
    src = tokenizers.source.encode_batch([s for s, _ in pairs])
    tgt = tokenizers.target.encode_batch([t for _, t in pairs])
    kept, stats = filter_pairs(list(zip(src, tgt, strict=True)), max_sentence_tokens, origin)
    if stats.empty or stats.too_long:
        log.warning(stats.describe())
    return ParallelDataset([s for s, _ in kept], [t for _, t in kept], tokenizers.specials)


def corpus_weights(config: TranslationSettings) -> list[float] | None:
    """The sampling weight of each training corpus (None: one corpus, or `data.train` unset)."""
    if config.task != "files" or not isinstance(config.train, list):
        return None
    return [float(entry.get("weight", 1.0)) for entry in config.train]


def prepare_data(
    config: TranslationSettings,
    tokenizers: TokenizerPair | None = None,
    *,
    cache_dir: Path | None = None,
    create: bool = True,
    on_progress: Progress | None = None,
) -> PreparedData:
    """The tokenizers (trained, or `tokenizers` given), the training store (found or made in
    `cache_dir`, default `cache_dir_for(config.cache_dir)`; `create=False`: found only), the encoded
    validation set and the held-out text pairs. `on_progress(pairs done, pairs)` while a store is
    made."""
    if config.task == "files":
        heldout = read_splits(config, ("valid", "test"))
        sources = train_sources(config)
    else:  # in memory already
        heldout = read_splits(config)
        if "train" not in heldout:
            raise ConfigError("the data config yields no training pairs")
        train_pairs, train_origin = heldout.pop("train")
        sources = [ListPairs(train_origin, train_pairs)]
    heldout_pairs = [pair for pairs, _ in heldout.values() for pair in pairs]
    choices = ()
    if config.vocab_size == AUTO:  # before the tokenizer is trained: from the pairs alone
        choices = (choose_vocab_size(config, sum(source.count() for source in sources)),)
    store, tokenizers = find_or_prepare(
        sources,
        store_settings(config),
        Path(cache_dir) if cache_dir is not None else cache_dir_for(config.cache_dir),
        heldout=heldout_pairs,
        tokenizers=tokenizers,
        create=create,
        on_progress=on_progress,
    )
    train = StoreDataset(store, tokenizers.specials, corpus_weights(config))
    valid = None
    valid_pairs: Pairs = []
    if "valid" in heldout:
        valid_pairs, valid_origin = heldout["valid"]
        valid = encode_split(valid_pairs, valid_origin, tokenizers, config.max_sentence_tokens)
        valid_pairs = [(s, t) for s, t in valid_pairs if s.strip() and t.strip()]
    test_pairs = heldout["test"][0] if "test" in heldout else []
    log.info(
        "data: %d training pairs, %d validation pairs, %d test pairs; vocabularies %d/%d",
        len(train),
        len(valid) if valid else 0,
        len(test_pairs),
        tokenizers.source.vocab_size,
        tokenizers.target.vocab_size,
    )
    return PreparedData(tokenizers, train, valid, valid_pairs, test_pairs, store, choices)


SPLIT_FILES = ("valid_split.src", "valid_split.tgt")
"""The validation set split off the training files, in the run directory (`split_validation`)."""


def split_validation(config: TranslationSettings, run_dir: Path) -> dict[str, Any] | None:
    """For task 'files' with `data.valid_from_train` and no validation files: draw
    `validation_split_size` of the training pairs (seeded by `data.seed`, so the same corpus
    gives the same split), write them into `run_dir` (atomically), and return the settings that
    read them as the validation set and remove them (and their repeats) from training
    (`data.remove_test_overlap`). None otherwise, and for a corpus too small to split (then the
    run has no validation set, as logged)."""
    if config.task != "files" or not config.valid_from_train or config.valid_src or config.valid_tgt:
        return None
    sources = train_sources(config)
    total = sum(source.count() for source in sources)
    size = validation_split_size(total)
    if size < 1:
        log.warning("no validation set given, and %d training pairs are too few to split one off: "
                    "training without validation (give data.valid_src/data.valid_tgt)", total)
        return None
    chosen = set(np.random.default_rng(config.seed).choice(total, size, replace=False).tolist())
    pairs = itertools.chain.from_iterable(source.pairs() for source in sources)
    split = [pair for number, pair in enumerate(pairs) if number in chosen]
    paths = [Path(run_dir).resolve() / name for name in SPLIT_FILES]
    run_dir.mkdir(parents=True, exist_ok=True)
    for path, side in zip(paths, (0, 1), strict=True):
        atomic_write_text(path, "".join(pair[side] + "\n" for pair in split))
    log.info(
        "no validation set given: %d of the %d training pairs split off (seed %d) into %s and %s, "
        "and removed from training (data.remove_test_overlap)", size, total, config.seed, *paths,
    )
    return {"valid_src": str(paths[0]), "valid_tgt": str(paths[1]), "remove_test_overlap": True}
