"""Batches of sentence pairs, grouped by length under a token budget (paper Sec. 5.1).

Layout of one example (token ids, no padding):

* source: ``x_1 .. x_n <eos>``  (no ``<bos>``: the encoder needs no start symbol);
* decoder input ``tgt_in``: ``<bos> y_1 .. y_m``  (the target shifted right);
* ``labels``: ``y_1 .. y_m <eos>``  (what the decoder must predict at each position).

So a source of ``n`` tokens takes ``n + 1`` positions and a target of ``m`` tokens ``m + 1``.
Batches are padded on the right. The ids of ``<bos>``, ``<eos>`` and the padding come from the
tokenizer (:class:`~aiayn.data.special_tokens.SpecialTokens`); each batch carries its ``pad_id``.

:func:`token_batches` puts examples of similar length together so that each batch's padded
size, ``batch_size * max(longest source, longest target)`` in positions, stays within
``max_tokens``; the paper used about 25,000 source and 25,000 target tokens per batch.
"""

import array
import logging
import random
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Generic, TypeVar

import numpy as np
import torch

from aiayn.core.errors import ConfigError
from aiayn.data.special_tokens import SpecialTokens
from aiayn.data.tokenizer import Tokenizer

log = logging.getLogger(__name__)

DEFAULT_POOL_SIZE = 10_000  # examples sorted together before being cut into batches

BatchT = TypeVar("BatchT")


@dataclass
class Batch:
    """A padded batch of sentence pairs (see the module docstring for the layout)."""

    src: torch.Tensor  # (B, S) int64
    tgt_in: torch.Tensor  # (B, T) int64: <bos> + target
    labels: torch.Tensor  # (B, T) int64: target + <eos>
    num_src_tokens: int  # non-pad positions of src
    num_targets: int  # non-pad positions of labels: the target tokens the loss sums over
    indices: list[int]  # dataset index of each row, to map outputs back to examples
    pad_id: int  # the padding id after the end of each row

    def __len__(self) -> int:
        return self.src.size(0)

    def to(self, device: torch.device | str, non_blocking: bool = False) -> "Batch":
        """A copy with the tensors on ``device``.

        With ``non_blocking`` to a CUDA device the host tensors are pinned first, so the copy
        really overlaps with compute (an unpinned "non-blocking" copy is synchronous).
        """
        pin = non_blocking and torch.device(device).type == "cuda" and not self.src.is_cuda

        def move(tensor: torch.Tensor) -> torch.Tensor:
            return (tensor.pin_memory() if pin else tensor).to(device, non_blocking=non_blocking)

        return replace(self, src=move(self.src), tgt_in=move(self.tgt_in), labels=move(self.labels))


def _pad(rows: list[list[int]], pad_id: int) -> torch.Tensor:
    out = torch.full((len(rows), max(map(len, rows))), pad_id, dtype=torch.long)
    for i, row in enumerate(rows):
        out[i, : len(row)] = torch.tensor(row, dtype=torch.long)
    return out


def make_batch(
    src_ids_list: Sequence[Sequence[int]],
    tgt_ids_list: Sequence[Sequence[int]],
    indices: Sequence[int] | None = None,
    *,
    specials: SpecialTokens,
) -> Batch:
    """Pad token id lists (without bos/eos) into a :class:`Batch`, with the bos, eos and
    padding ids of ``specials``.

    ``indices`` defaults to ``0 .. B-1``.
    """
    if len(src_ids_list) != len(tgt_ids_list) or not src_ids_list:
        raise ValueError(
            f"need as many sources as targets, at least one: "
            f"{len(src_ids_list)} vs {len(tgt_ids_list)}"
        )
    bos, eos, pad = specials.bos_id, specials.eos_id, specials.pad_id
    src = [[*ids, eos] for ids in src_ids_list]
    tgt_in = [[bos, *ids] for ids in tgt_ids_list]
    labels = [[*ids, eos] for ids in tgt_ids_list]
    return Batch(
        src=_pad(src, pad),
        tgt_in=_pad(tgt_in, pad),
        labels=_pad(labels, pad),
        num_src_tokens=sum(map(len, src)),
        num_targets=sum(map(len, labels)),
        indices=list(indices) if indices is not None else list(range(len(src))),
        pad_id=pad,
    )


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
    the batches come shortest first. :func:`plan_token_batches` is the same plan as arrays.
    """
    plan = plan_token_batches(
        np.asarray(src_lengths, dtype=np.int64),
        np.asarray(tgt_lengths, dtype=np.int64),
        max_tokens,
        shuffle=shuffle,
        seed=seed,
        epoch=epoch,
        pool_size=pool_size,
    )
    return [batch.tolist() for batch in plan]


def _shuffled_range(count: int, rng: random.Random) -> np.ndarray:
    """``list(range(count))`` after ``rng.shuffle``, the very same permutation (CPython's
    Fisher-Yates), held as 8 bytes per index rather than a list of Python ints."""
    order = array.array("q", range(count))
    randbelow = rng._randbelow  # what random.shuffle draws from
    for i in reversed(range(1, count)):
        j = randbelow(i + 1)
        order[i], order[j] = order[j], order[i]
    return np.frombuffer(order, dtype=np.int64)


def plan_token_batches(
    src_lengths: np.ndarray,
    tgt_lengths: np.ndarray,
    max_tokens: int,
    shuffle: bool = True,
    seed: int = 0,
    epoch: int = 0,
    pool_size: int = DEFAULT_POOL_SIZE,
) -> list[np.ndarray]:
    """:func:`token_batches` from length arrays, each batch an int64 array of indices.

    Only the lengths are read (a few bytes per example), so a corpus of millions of pairs is
    planned without its sentences; the plan is the one the list-based planner made for the
    same ``(seed, epoch)`` (same random stream, stable sort by length), so results recorded
    with it stand.
    """
    if len(src_lengths) != len(tgt_lengths):
        raise ValueError(f"{len(src_lengths)} source lengths but {len(tgt_lengths)} target lengths")
    if max_tokens < 1 or pool_size < 1:
        raise ConfigError(f"max_tokens and pool_size must be >= 1, got {max_tokens}, {pool_size}")
    size = np.maximum(np.asarray(src_lengths, dtype=np.int64), np.asarray(tgt_lengths, dtype=np.int64)) + 1
    rng = random.Random(f"aiayn-batches-{seed}-{epoch}")
    if shuffle:
        order = _shuffled_range(len(size), rng)
    else:
        order = np.arange(len(size), dtype=np.int64)
        pool_size = max(len(order), 1)
    batches: list[np.ndarray] = []
    for start in range(0, len(order), pool_size):
        pool = order[start : start + pool_size]
        pool = pool[np.argsort(size[pool], kind="stable")]
        pool_sizes = size[pool].tolist()
        first, count = 0, 0
        for position, positions in enumerate(pool_sizes):  # sorted: the newest is the longest
            if count and (count + 1) * positions > max_tokens:
                batches.append(pool[first:position])
                first, count = position, 0
            count += 1
        if count:
            batches.append(pool[first:])
    oversized = int((size > max_tokens).sum())
    if oversized:
        log.warning(
            "%d example(s) longer than max_tokens=%d positions each form a batch of their own",
            oversized,
            max_tokens,
        )
    if shuffle:
        rng.shuffle(batches)
    return batches


def shard(batches: Sequence[list[int]], rank: int, world_size: int) -> list[list[int]]:
    """The batches of process ``rank``: ``batches[i]`` for each ``i % world_size == rank``.

    Every rank gets the same number of batches, ``len(batches) // world_size``; the last
    ``len(batches) % world_size`` batches are left out so that no rank waits for the others.
    """
    if world_size < 1 or not 0 <= rank < world_size:
        raise ConfigError(f"need 0 <= rank < world_size, got rank={rank}, world_size={world_size}")
    usable = len(batches) - len(batches) % world_size
    return [batches[i] for i in range(rank, usable, world_size)]


class BatchedDataset(ABC, Generic[BatchT]):
    """A dataset read in batches, epoch after epoch: resumable and shared out between processes.

    A subclass says how one epoch is cut into batches of example indices (`batch_plan`, which
    must depend only on ``(seed, epoch)`` and the data) and how indices become a batch
    (`collate`); this class deals the plan out to processes (:func:`shard`) and resumes it.
    """

    @abstractmethod
    def __len__(self) -> int:
        """Number of examples."""

    @abstractmethod
    def batch_plan(self, max_tokens: int, shuffle: bool, seed: int, epoch: int) -> list[list[int]]:
        """One epoch's batches, as lists of example indices, under a budget of ``max_tokens``."""

    @abstractmethod
    def collate(self, indices: list[int]) -> BatchT:
        """The batch of examples ``indices``."""

    def batch_indices(
        self,
        max_tokens: int,
        shuffle: bool = True,
        seed: int = 0,
        epoch: int = 0,
        rank: int = 0,
        world_size: int = 1,
    ) -> list[list[int]]:
        """This rank's index batches for one epoch (see :meth:`batch_plan` and :func:`shard`)."""
        return shard(self.batch_plan(max_tokens, shuffle, seed, epoch), rank, world_size)

    def num_batches(self, max_tokens: int, **kwargs) -> int:
        """Number of batches :meth:`batches` yields for these arguments (with ``start=0``)."""
        return len(self.batch_indices(max_tokens, **kwargs))

    def batches(
        self,
        max_tokens: int,
        shuffle: bool = True,
        seed: int = 0,
        epoch: int = 0,
        start: int = 0,
        rank: int = 0,
        world_size: int = 1,
    ) -> Iterator[BatchT]:
        """Yield the epoch's batches, skipping the first ``start`` (to resume mid-epoch).

        The order depends only on ``(seed, epoch)`` (and the data), so resuming with the same
        arguments and ``start=k`` continues exactly where batch ``k - 1`` left off. Under
        torchrun each ``rank`` of ``world_size`` reads its own equal share of the epoch.
        """
        for indices in self.batch_indices(max_tokens, shuffle, seed, epoch, rank, world_size)[start:]:
            yield self.collate(indices)


class ParallelDataset(BatchedDataset[Batch]):
    """Encoded sentence pairs (token id lists without bos/eos) and their batching, which adds
    the bos, eos and padding ids of ``specials``."""

    def __init__(
        self, src_ids: Sequence[list[int]], tgt_ids: Sequence[list[int]], specials: SpecialTokens
    ) -> None:
        if len(src_ids) != len(tgt_ids):
            raise ValueError(f"{len(src_ids)} sources but {len(tgt_ids)} targets")
        self.src_ids = list(src_ids)
        self.tgt_ids = list(tgt_ids)
        self.specials = specials

    @classmethod
    def from_pairs(
        cls, pairs: Sequence[tuple[str, str]], source: Tokenizer, target: Tokenizer
    ) -> "ParallelDataset":
        """Encode text pairs with the ``source`` and ``target`` tokenizers (the target's special
        ids, which a model shares with the source's)."""
        return cls(
            source.encode_batch([s for s, _ in pairs]),
            target.encode_batch([t for _, t in pairs]),
            target.specials,
        )

    def __len__(self) -> int:
        return len(self.src_ids)

    def __getitem__(self, i: int) -> tuple[list[int], list[int]]:
        return self.src_ids[i], self.tgt_ids[i]

    def batch_plan(self, max_tokens: int, shuffle: bool, seed: int, epoch: int) -> list[list[int]]:
        """Length-homogeneous batches of pairs (see :func:`token_batches`)."""
        src_lengths = np.fromiter(map(len, self.src_ids), dtype=np.int64, count=len(self.src_ids))
        tgt_lengths = np.fromiter(map(len, self.tgt_ids), dtype=np.int64, count=len(self.tgt_ids))
        plan = plan_token_batches(
            src_lengths, tgt_lengths, max_tokens, shuffle=shuffle, seed=seed, epoch=epoch
        )
        return [batch.tolist() for batch in plan]

    def collate(self, indices: list[int]) -> Batch:
        src, tgt = [self.src_ids[i] for i in indices], [self.tgt_ids[i] for i in indices]
        return make_batch(src, tgt, indices, specials=self.specials)
