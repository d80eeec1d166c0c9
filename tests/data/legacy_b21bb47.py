"""The in-memory translation data path of commit b21bb47 (before the token store), kept as the
reference that the store's batches are compared with: the list-based planner verbatim, and the
preparation that held every sentence as a Python list of ids."""

import logging
import random
from collections.abc import Sequence

from aiayn.core.errors import ConfigError
from aiayn.data.tokenizer import TokenizerPair
from aiayn.translation.data import encode_split, read_splits
from aiayn.translation.settings import TranslationSettings

log = logging.getLogger(__name__)

DEFAULT_POOL_SIZE = 10_000


def token_batches(
    src_lengths: Sequence[int],
    tgt_lengths: Sequence[int],
    max_tokens: int,
    shuffle: bool = True,
    seed: int = 0,
    epoch: int = 0,
    pool_size: int = DEFAULT_POOL_SIZE,
) -> list[list[int]]:
    """Group example indices into length-homogeneous batches under a token budget.

    Lengths are token counts without bos/eos; an example takes ``max(src, tgt) + 1`` padded
    positions. A batch never exceeds ``len(batch) * max(positions) <= max_tokens``, except an
    example that alone is over the budget: it forms a batch of its own (with a warning logged),
    it is never dropped. Every index appears in exactly one batch.

    With ``shuffle``, the indices are shuffled, cut into pools of ``pool_size``, sorted by length
    within each pool, cut into batches, and the batches are shuffled; the result depends only on
    ``(seed, epoch)``. Without ``shuffle`` (evaluation), all examples are sorted by length and
    the batches come shortest first.
    """
    if len(src_lengths) != len(tgt_lengths):
        raise ValueError(f"{len(src_lengths)} source lengths but {len(tgt_lengths)} target lengths")
    if max_tokens < 1 or pool_size < 1:
        raise ConfigError(f"max_tokens and pool_size must be >= 1, got {max_tokens}, {pool_size}")
    size = [max(s, t) + 1 for s, t in zip(src_lengths, tgt_lengths, strict=True)]
    order = list(range(len(size)))
    rng = random.Random(f"aiayn-batches-{seed}-{epoch}")
    if shuffle:
        rng.shuffle(order)
    else:
        pool_size = max(len(order), 1)
    batches: list[list[int]] = []
    oversized = 0
    for start in range(0, len(order), pool_size):
        pool = sorted(order[start : start + pool_size], key=lambda i: size[i])
        batch: list[int] = []
        longest = 0
        for i in pool:
            if batch and (len(batch) + 1) * max(longest, size[i]) > max_tokens:
                batches.append(batch)
                batch, longest = [], 0
            batch.append(i)
            longest = max(longest, size[i])
            oversized += size[i] > max_tokens
        if batch:
            batches.append(batch)
    if oversized:
        log.warning(
            "%d example(s) longer than max_tokens=%d positions each form a batch of their own",
            oversized,
            max_tokens,
        )
    if shuffle:
        rng.shuffle(batches)
    return batches


def legacy_train_data(config: TranslationSettings) -> tuple[TokenizerPair, list[list[int]], list[list[int]]]:
    """b21bb47's `prepare_data` for the training split: the tokenizer trained on the whole
    split in memory (sources then targets), every pair encoded, empty and over-long pairs dropped."""
    train_pairs, origin = read_splits(config)["train"]
    tokenizers = TokenizerPair.from_spec(
        config.tokenizer,
        [s for s, _ in train_pairs],
        [t for _, t in train_pairs],
        config.vocab_size,
        joint=config.joint_vocab,
        names=config.special_tokens,
    )
    train = encode_split(train_pairs, origin, tokenizers, config.max_sentence_tokens)
    return tokenizers, train.src_ids, train.tgt_ids


def legacy_batches(
    src_ids: list[list[int]], tgt_ids: list[list[int]], max_tokens: int, shuffle: bool, seed: int, epoch: int
) -> list[list[tuple[list[int], list[int]]]]:
    """The (source ids, target ids) of each batch, in order, as b21bb47's `ParallelDataset`
    planned them."""
    plan = token_batches(
        [len(s) for s in src_ids], [len(t) for t in tgt_ids], max_tokens, shuffle, seed, epoch
    )
    return [[(src_ids[i], tgt_ids[i]) for i in batch] for batch in plan]
