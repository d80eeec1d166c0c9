"""Training batches read from a token store (`aiayn.data.token_store`).

The plan of an epoch reads only the store's lengths arrays (`plan_token_batches`: a few bytes
per pair); a batch's ids are read from the memory-mapped id files when it is collated, so a
process holds the corpus's lengths and one batch, not the corpus.

Several corpora (`data.train` with weights): each epoch takes, of a corpus of `n` pairs and
weight `w`, `floor(w)` copies of all its pairs plus a random `(w - floor(w)) * n` of them
(fairseq's upsampling, and a subsample for `w < 1`), drawn from `(seed, epoch)`; the batches are
then planned over those pairs as over one corpus. With every weight 1 (one corpus, say) an
epoch is every pair once, and the plan is exactly the in-memory planner's.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from aiayn.data.batching import Batch, BatchedDataset, plan_token_batches
from aiayn.data.special_tokens import SpecialTokens
from aiayn.data.token_store import TokenStore


class StoreDataset(BatchedDataset[Batch]):
    """The pairs of a token store, batched by length under a token budget.

    Args:
        store: an opened pair store.
        specials: the bos, eos and padding ids the batches add.
        weights: the sampling weight of each corpus of the store (None: all 1).
    """

    def __init__(
        self, store: TokenStore, specials: SpecialTokens, weights: Sequence[float] | None = None
    ) -> None:
        self.store = store
        self.specials = specials
        self.weights = list(weights) if weights is not None else None
        self.src_lengths = store.lengths["src"]  # memory-mapped int32: shared, not copied
        self.tgt_lengths = store.lengths["tgt"]

    def __len__(self) -> int:
        return len(self.src_lengths)

    def __getitem__(self, i: int) -> tuple[list[int], list[int]]:
        return self.store.row("src", i).tolist(), self.store.row("tgt", i).tolist()

    @property
    def weighted(self) -> bool:
        """Whether an epoch samples the corpora (some weight is not 1)."""
        return self.weights is not None and any(w != 1 for w in self.weights)

    def epoch_rows(self, seed: int, epoch: int) -> np.ndarray:
        """The store rows of one epoch under the corpus weights (see the module docstring)."""
        rng = np.random.default_rng([seed, epoch, 0x5EED])
        corpus = np.asarray(self.store.corpus)
        rows = []
        for number, weight in enumerate(self.weights or []):
            members = np.flatnonzero(corpus == number)
            whole = int(weight)
            rows.extend([members] * whole)
            extra = round((weight - whole) * len(members))
            if extra:
                rows.append(np.sort(rng.choice(members, size=extra, replace=False)))
        return np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)

    def batch_plan(self, max_tokens: int, shuffle: bool, seed: int, epoch: int) -> list[np.ndarray]:
        """Length-homogeneous batches of store rows (see `plan_token_batches`)."""
        if not (shuffle and self.weighted):
            return plan_token_batches(
                self.src_lengths, self.tgt_lengths, max_tokens, shuffle=shuffle, seed=seed, epoch=epoch
            )
        rows = self.epoch_rows(seed, epoch)
        plan = plan_token_batches(
            self.src_lengths[rows], self.tgt_lengths[rows], max_tokens, shuffle=True, seed=seed, epoch=epoch
        )
        return [rows[batch] for batch in plan]

    def collate(self, indices: Sequence[int]) -> Batch:
        """The padded batch of store rows `indices` (the layout of `aiayn.data.batching`)."""
        indices = [int(i) for i in indices]
        bos, eos, pad = self.specials.bos_id, self.specials.eos_id, self.specials.pad_id
        src_rows = [self.store.row("src", i) for i in indices]
        tgt_rows = [self.store.row("tgt", i) for i in indices]
        src_len = max(len(r) for r in src_rows) + 1
        tgt_len = max(len(r) for r in tgt_rows) + 1
        src = np.full((len(indices), src_len), pad, dtype=np.int64)
        tgt_in = np.full((len(indices), tgt_len), pad, dtype=np.int64)
        labels = np.full((len(indices), tgt_len), pad, dtype=np.int64)
        for row, (s, t) in enumerate(zip(src_rows, tgt_rows, strict=True)):
            src[row, : len(s)] = s
            src[row, len(s)] = eos
            tgt_in[row, 0] = bos
            tgt_in[row, 1 : len(t) + 1] = t
            labels[row, : len(t)] = t
            labels[row, len(t)] = eos
        return Batch(
            src=torch.from_numpy(src),
            tgt_in=torch.from_numpy(tgt_in),
            labels=torch.from_numpy(labels),
            num_src_tokens=sum(len(s) + 1 for s in src_rows),
            num_targets=sum(len(t) + 1 for t in tgt_rows),
            indices=indices,
            pad_id=pad,
        )
