"""Language-model data: one text file -> a token stream -> training windows.

The text is split by characters into a training head and a held-out tail (the last
`valid_fraction`, 10% by default, as nanoGPT does for tinyshakespeare). Each part is
encoded into a token *stream* that starts with `<bos>`, so that every token of the text is
a prediction target, the first one included (predicted from `<bos>` alone).

A *window* at offset `s` of a stream covers positions `s .. s + block_size`: the model reads
`inputs = stream[s : s + block_size]` and predicts `labels = stream[s + 1 : s + block_size + 1]`
(the decoder-only reading of Sec. 3.2.3: position i sees positions <= i and predicts i + 1).
Windows start every `stride` tokens:

- `stride == block_size` (the default): non-overlapping windows; every token of the stream
  after `<bos>` is a target exactly once per epoch; the last window may be shorter and is
  padded (`<pad>` inputs after the end, `<pad>` labels that the loss ignores).
- `stride == 1`: the classic sliding window, one full window at every offset (every offset
  whose window fits inside the stream); a token is a target in up to `block_size` windows.
- anything in between: overlapping windows; a final shorter window is added when the full
  windows leave the end of the stream uncovered.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from aiayn.core.errors import ConfigError, DataError
from aiayn.data.batching import BatchedDataset
from aiayn.data.corpus import decode_utf8, read_bytes
from aiayn.data.tokenizer import Tokenizer

ENCODE_CHUNK_CHARS = 16_000  # text is encoded in chunks of whole lines of about this size


@dataclass
class LMBatch:
    """A batch of training windows.

    Attributes:
        inputs: (B, T) int64 token ids read by the model.
        labels: (B, T) int64 next-token targets; `pad_id` where there is no target.
        num_targets: number of non-pad labels (the predictions the loss sums over).
        starts: stream offset of each window, to map rows back to the text.
        pad_id: the padding id (inputs and labels after the end of the stream).
    """

    inputs: Tensor
    labels: Tensor
    num_targets: int
    starts: list[int]
    pad_id: int

    def __len__(self) -> int:
        return self.inputs.size(0)

    def to(self, device: torch.device | str, non_blocking: bool = False) -> LMBatch:
        """A copy with the tensors on `device`."""
        return replace(
            self,
            inputs=self.inputs.to(device, non_blocking=non_blocking),
            labels=self.labels.to(device, non_blocking=non_blocking),
        )


def window_starts(num_tokens: int, block_size: int, stride: int | None = None) -> list[int]:
    """Offsets of the windows over a stream of `num_tokens` tokens (see the module docstring).

    Args:
        num_tokens: stream length N (>= 2: at least one target).
        block_size: positions per window T.
        stride: tokens between window starts (default `block_size`).

    Returns:
        Increasing offsets s; window s predicts stream positions s + 1 .. min(s + T, N - 1).
    """
    stride = block_size if stride is None else stride
    if block_size < 1:
        raise ConfigError(f"data.block_size must be >= 1, got {block_size}")
    if not 1 <= stride <= block_size:
        raise ConfigError(f"data.stride must be between 1 and data.block_size ({block_size}), got {stride}")
    if num_tokens < 2:
        raise DataError(f"a language-model stream needs at least 2 tokens, got {num_tokens}")
    last_full = num_tokens - 1 - block_size  # the last offset whose window fits entirely
    starts = list(range(0, last_full + 1, stride))
    covered = starts[-1] + block_size if starts else 0  # last stream position predicted
    if covered < num_tokens - 1:
        starts.append(starts[-1] + stride if starts else 0)
    return starts


class TokenWindows(BatchedDataset[LMBatch]):
    """Training or validation windows over one token stream, batched for the `Trainer`.

    Args:
        stream: (N,) token ids (a list, a 1-D tensor or a numpy array, such as a token store's
            memory map, which is read a batch at a time and never copied), normally starting
            with `<bos>`.
        block_size: positions per window T.
        stride: tokens between window starts (default `block_size`: non-overlapping).
        pad_id: the tokenizer's padding id, after the end of the stream.
    """

    def __init__(
        self, stream: Sequence[int] | Tensor, block_size: int, stride: int | None = None, *, pad_id: int
    ) -> None:
        if not isinstance(stream, np.ndarray):
            stream = torch.as_tensor(stream, dtype=torch.long).flatten().numpy()
        self.stream = stream
        self.block_size = block_size
        self.stride = block_size if stride is None else stride
        self.pad_id = pad_id
        self.starts = torch.tensor(window_starts(len(self.stream), block_size, self.stride))
        self._offsets = np.arange(block_size + 1)

    def __len__(self) -> int:
        """Number of windows."""
        return self.starts.numel()

    @property
    def num_targets(self) -> int:
        """Targets per epoch, counted with multiplicity (overlapping windows count twice)."""
        last = len(self.stream) - 1
        return int((self.starts + self.block_size).clamp(max=last).sub(self.starts).sum())

    def windows_per_batch(self, max_tokens: int) -> int:
        """Windows in one batch of at most `max_tokens` positions (at least one)."""
        return max(1, max_tokens // self.block_size)

    def window_batch(self, rows: Tensor) -> LMBatch:
        """The batch of windows number `rows` ((B,) LongTensor indices into `starts`)."""
        starts = self.starts[rows]
        positions = starts.numpy()[:, None] + self._offsets  # (B, T + 1)
        inside = positions < len(self.stream)  # every window, the last shorter one too, has T + 1
        ids = np.where(inside, self.stream[np.minimum(positions, len(self.stream) - 1)], self.pad_id)
        chunk = torch.from_numpy(ids.astype(np.int64))
        inputs, labels = chunk[:, :-1], chunk[:, 1:]  # past the stream end: pad, no target
        return LMBatch(inputs, labels, int((labels != self.pad_id).sum()), starts.tolist(), self.pad_id)

    def batch_plan(self, max_tokens: int, shuffle: bool, seed: int, epoch: int) -> list[list[int]]:
        """One epoch of batches of `max_tokens // block_size` windows (the last may hold fewer).

        With `shuffle` the window order is a permutation that depends only on `(seed, epoch)`;
        without it (validation) the windows come in stream order.
        """
        if max_tokens < 1:
            raise ConfigError(f"max_tokens must be >= 1, got {max_tokens}")
        order = list(range(len(self)))
        if shuffle:
            random.Random(f"aiayn-lm-{seed}-{epoch}").shuffle(order)
        size = self.windows_per_batch(max_tokens)
        return [order[first : first + size] for first in range(0, len(order), size)]

    def collate(self, indices: list[int]) -> LMBatch:
        return self.window_batch(torch.tensor(indices))


# ---------------------------------------------------------------------- text files
def read_text(path: str | Path) -> str:
    """The whole of a UTF-8 text file (`.gz` allowed); invalid UTF-8 or no text -> `DataError`."""
    text = decode_utf8(read_bytes(path), path)
    if not text.strip():
        raise DataError(f"{path}: the text file is empty")
    return text


def split_text(text: str, valid_fraction: float) -> tuple[str, str]:
    """(head, tail): the last `valid_fraction` of the characters is the held-out tail."""
    if not 0.0 <= valid_fraction < 1.0:
        raise ConfigError(f"data.valid_fraction must be in [0, 1), got {valid_fraction!r}")
    cut = len(text) - int(len(text) * valid_fraction)
    return text[:cut], text[cut:]


def encode_text(tokenizer: Tokenizer, text: str) -> list[int]:
    """Token ids of a long text, encoded in parallel chunks of whole lines (no `<bos>`)."""
    chunks, current, size = [], [], 0
    for line in text.splitlines(keepends=True):
        current.append(line)
        size += len(line)
        if size >= ENCODE_CHUNK_CHARS:
            chunks.append("".join(current))
            current, size = [], 0
    if current:
        chunks.append("".join(current))
    return [i for ids in tokenizer.encode_batch(chunks) for i in ids]


def text_stream(tokenizer: Tokenizer, text: str) -> list[int]:
    """`<bos>` (the tokenizer's) followed by the token ids of `text`: the stream that windows
    are cut from."""
    return [tokenizer.specials.bos_id, *encode_text(tokenizer, text)]
