"""Translation data: from a `DataConfig` to tokenizers and encoded sentence pairs ready for
batching (a built-in synthetic task, Multi30k, or parallel text files)."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from aiayn.data.batching import ParallelDataset
from aiayn.data.corpus import filter_pairs, read_parallel
from aiayn.data.multi30k import load_multi30k
from aiayn.data.paths import resolve_data_file
from aiayn.data.synthetic import TASKS, make_task
from aiayn.data.tokenizer import TokenizerPair
from aiayn.data.tokenizer_spec import is_trained_kind
from aiayn.errors import ConfigError
from aiayn.training.config import DataConfig

log = logging.getLogger(__name__)

Pairs = list[tuple[str, str]]


@dataclass
class PreparedData:
    """Tokenizers, the encoded training/validation sets, and raw text pairs for BLEU."""

    tokenizers: TokenizerPair
    train: ParallelDataset
    valid: ParallelDataset | None
    valid_pairs: Pairs
    test_pairs: Pairs


def read_splits(config: DataConfig) -> dict[str, tuple[Pairs, str]]:
    """Raw (source, target) text pairs of each available split, with a name for logs."""
    if config.task in TASKS:
        splits = make_task(config.task, config.seed, config.num_train, config.num_valid, config.num_test)
        return {name: (pairs, f"{config.task}/{name}") for name, pairs in splits.items() if pairs}
    if config.task == "multi30k":
        names = {"train": "train", "valid": "val", "test": "test_2016_flickr"}
        return {
            split: (
                load_multi30k(name, config.src_lang, config.tgt_lang, download=config.download),
                f"multi30k/{name}.{config.src_lang}-{config.tgt_lang}",
            )
            for split, name in names.items()
        }
    if config.task == "files":
        if not (config.train_src and config.train_tgt):
            raise ConfigError("data.task 'files' needs data.train_src and data.train_tgt")
        splits = {}
        for split in ("train", "valid", "test"):
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
    """Encode pairs, dropping (and logging the count of) empty and over-long pairs."""
    pairs, stats = filter_pairs(pairs, None, origin)  # empty lines
    if stats.empty:
        log.warning(stats.describe())
    src = tokenizers.source.encode_batch([s for s, _ in pairs])
    tgt = tokenizers.target.encode_batch([t for _, t in pairs])
    kept, stats = filter_pairs(list(zip(src, tgt, strict=True)), max_sentence_tokens, origin)
    if stats.empty or stats.too_long:
        log.warning(stats.describe())
    return ParallelDataset([s for s, _ in kept], [t for _, t in kept], tokenizers.specials)


def prepare_data(config: DataConfig, tokenizers: TokenizerPair | None = None) -> PreparedData:
    """Read the splits, train or load the tokenizers (unless given), encode."""
    splits = read_splits(config)
    if "train" not in splits:
        raise ConfigError("the data config yields no training pairs")
    train_pairs, train_origin = splits["train"]
    if tokenizers is None:
        if is_trained_kind(config.tokenizer):
            log.info("training %s tokenizer(s) on %d pairs", config.tokenizer, len(train_pairs))
        tokenizers = TokenizerPair.from_spec(
            config.tokenizer,
            [s for s, _ in train_pairs],
            [t for _, t in train_pairs],
            config.vocab_size,
            joint=config.joint_vocab,
            names=config.special_tokens,
        )
    train = encode_split(train_pairs, train_origin, tokenizers, config.max_sentence_tokens)
    valid = None
    valid_pairs: Pairs = []
    if "valid" in splits:
        valid_pairs, valid_origin = splits["valid"]
        valid = encode_split(valid_pairs, valid_origin, tokenizers, config.max_sentence_tokens)
        valid_pairs = [(s, t) for s, t in valid_pairs if s.strip() and t.strip()]
    test_pairs = splits["test"][0] if "test" in splits else []
    log.info(
        "data: %d training pairs, %d validation pairs, %d test pairs; vocabularies %d/%d",
        len(train),
        len(valid) if valid else 0,
        len(test_pairs),
        tokenizers.source.vocab_size,
        tokenizers.target.vocab_size,
    )
    return PreparedData(tokenizers, train, valid, valid_pairs, test_pairs)
