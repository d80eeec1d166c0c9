"""Encoded classification examples and their batches for the `Trainer`.

A text becomes `<bos>` followed by its token ids, right-padded with `<pad>`; the encoder
reads the whole sequence and its outputs are mean-pooled (see `aiayn.model.encoder_only`).
The leading `<bos>` gives every attention head a fixed position to attend to when nothing
else is relevant; Ebrahimi et al. (2020, "How Can Self-Attention Networks Recognize Dyck-n
Languages?") found such a start symbol essential for recognising nested brackets.
Batches group texts of similar length under a token budget (as for translation, Sec. 5.1).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from aiayn.core.eval_mode import eval_mode
from aiayn.data.batching import BatchedDataset, token_batches
from aiayn.data.tokenizer import Tokenizer

log = logging.getLogger(__name__)


@dataclass
class ClassBatch:
    """A padded batch of texts and their classes.

    Attributes:
        tokens: (B, S) int64 token ids, the padding id after the end of each text.
        labels: (B,) int64 class indices.
        indices: the dataset index of each row.
    """

    tokens: Tensor
    labels: Tensor
    indices: list[int]

    def __len__(self) -> int:
        return len(self.indices)

    @property
    def num_targets(self) -> int:
        """The predictions the loss sums over: one per example."""
        return len(self.indices)

    def to(self, device: torch.device | str, non_blocking: bool = False) -> ClassBatch:
        """A copy with `tokens` and `labels` on `device`."""
        tokens, labels = (t.to(device, non_blocking=non_blocking) for t in (self.tokens, self.labels))
        return replace(self, tokens=tokens, labels=labels)


def pad_batch(token_ids: Sequence[Sequence[int]], pad_id: int) -> Tensor:
    """(B, S) tensor of the token id lists, right-padded with `pad_id` (S = the longest, >= 1)."""
    out = torch.full((len(token_ids), max(1, *map(len, token_ids))), pad_id, dtype=torch.long)
    for row, ids in enumerate(token_ids):
        out[row, : len(ids)] = torch.tensor(ids, dtype=torch.long)
    return out


def encode_texts(tokenizer: Tokenizer, texts: Sequence[str], max_tokens: int, origin: str) -> list[list[int]]:
    """`<bos>` (the tokenizer's) + the token ids of each text, cut to `max_tokens` text tokens
    (the number of texts cut short is logged)."""
    encoded = tokenizer.encode_batch(list(texts))
    too_long = sum(len(ids) > max_tokens for ids in encoded)
    if too_long:
        log.warning("%s: %d text(s) longer than %d tokens were truncated", origin, too_long, max_tokens)
    return [[tokenizer.specials.bos_id, *ids[:max_tokens]] for ids in encoded]


class ClassificationDataset(BatchedDataset[ClassBatch]):
    """Token id lists and class indices, with token-budget batching (padded with `pad_id`)."""

    def __init__(self, token_ids: Sequence[list[int]], labels: Sequence[int], pad_id: int) -> None:
        if len(token_ids) != len(labels):
            raise ValueError(f"{len(token_ids)} texts but {len(labels)} labels")
        self.token_ids = list(token_ids)
        self.labels = list(labels)
        self.pad_id = pad_id

    def __len__(self) -> int:
        return len(self.token_ids)

    def batch_plan(self, max_tokens: int, shuffle: bool, seed: int, epoch: int) -> list[list[int]]:
        """Texts of similar length together (see `token_batches`)."""
        lengths = [len(ids) for ids in self.token_ids]
        return token_batches(lengths, lengths, max_tokens, shuffle=shuffle, seed=seed, epoch=epoch)

    def collate(self, indices: list[int]) -> ClassBatch:
        tokens = pad_batch([self.token_ids[i] for i in indices], self.pad_id)
        labels = torch.tensor([self.labels[i] for i in indices], dtype=torch.long)
        return ClassBatch(tokens, labels, indices)


def classification_loss(model: nn.Module, batch: ClassBatch, smoothing: float) -> tuple[Tensor, int]:
    """Summed (label-smoothed) cross-entropy over the batch's examples, and their number."""
    logits = model(batch.tokens)  # (B, C)
    loss = F.cross_entropy(logits.float(), batch.labels, label_smoothing=smoothing, reduction="sum")
    return loss, batch.num_targets


def predict_probabilities(
    model: nn.Module, dataset: ClassificationDataset, batch_tokens: int = 4096
) -> tuple[Tensor, Tensor]:
    """(N, C) class probabilities and (N,) predicted classes, in dataset order."""
    device = next(model.parameters()).device
    probs = torch.zeros(len(dataset), model.num_classes)
    with eval_mode(model):
        for batch in dataset.batches(batch_tokens, shuffle=False):
            logits = model(batch.tokens.to(device)).float()  # (B, C)
            probs[batch.indices] = logits.softmax(dim=-1).cpu()
    return probs, probs.argmax(dim=-1)


def accuracy(model: nn.Module, dataset: ClassificationDataset, batch_tokens: int = 4096) -> float:
    """Percentage of examples whose most probable class is the label."""
    _, predicted = predict_probabilities(model, dataset, batch_tokens)
    labels = torch.tensor(dataset.labels)
    return 100.0 * int((predicted == labels).sum()) / len(dataset) if len(dataset) else 0.0
