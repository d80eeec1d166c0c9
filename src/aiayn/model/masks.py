"""Attention masks: padding, subsequent (causal), and their combination.

THE MASK CONVENTION (the one place it is documented): every boolean mask in aiayn is
True where attention is ALLOWED (a real token, or a position that may be looked at)
and False where it is BLOCKED (padding, or a future position). This is the convention
of `torch.nn.functional.scaled_dot_product_attention`; note that it is the opposite of
`nn.MultiheadAttention`'s `key_padding_mask`, where True means "ignore".

Shapes: B batch, T query length, S key length, H heads.
- `padding_mask(tokens)`: (B, T), True at real tokens.
- `target_padding_mask(tgt_in)`: (B, T), the same for a shifted-right target, whose start token
  at position 0 is always real (even when it is the padding token, as in Marian).
- `subsequent_mask(T)`: (T, T), True on and below the diagonal (Sec. 3.2.3: "prevent
  leftward information flow ... masking out all values ... which correspond to illegal
  connections").
- `attention_mask(padding_mask, causal)`: (B, 1, T, S), broadcast over heads.
"""

from __future__ import annotations

import torch
from torch import Tensor


def padding_mask(tokens: Tensor, pad_id: int = 0) -> Tensor:
    """(B, T) LongTensor of ids -> (B, T) bool mask, True at real (non-pad) tokens."""
    if tokens.dim() != 2:
        raise ValueError(f"padding_mask expects token ids of shape (B, T), got {tuple(tokens.shape)}")
    return tokens != pad_id


def target_padding_mask(tgt_in: Tensor, pad_id: int = 0) -> Tensor:
    """(B, T) shifted-right target ids -> (B, T) bool mask, True at real tokens.

    Targets are padded on the right and start with the start token, which is real even when it
    is the padding token itself (Marian and OPUS-MT start decoding with `<pad>`): the mask is
    the row's length, so position 0 is always True and only later pad ids are padding.
    """
    mask = padding_mask(tgt_in, pad_id)
    mask[:, 0] = True
    return mask


def subsequent_mask(length: int, device: torch.device | str | None = None) -> Tensor:
    """(T, T) bool mask, True where query position i may attend to key position j <= i."""
    return torch.ones(length, length, dtype=torch.bool, device=device).tril()


def attention_mask(
    padding_mask: Tensor | None = None,
    causal: bool = False,
    query_length: int | None = None,
) -> Tensor | None:
    """Combine a key padding mask and/or the subsequent mask into one attention mask.

    Args:
        padding_mask: (B, S) bool, True at real keys, or None for no padding.
        causal: also block future positions (decoder self-attention); then T == S.
        query_length: T, needed only when `padding_mask` is None and `causal` is set.

    Returns:
        (B, 1, T, S) bool mask (or (1, 1, T, T) for causal without padding; or (B, 1, 1, S)
        for padding alone, broadcast over queries), or None when nothing is masked.
    """
    if padding_mask is None and not causal:
        return None
    if padding_mask is None:
        if query_length is None:
            raise ValueError("attention_mask needs query_length when causal without padding")
        return subsequent_mask(query_length)[None, None]
    if padding_mask.dim() != 2 or padding_mask.dtype != torch.bool:
        raise ValueError(
            "padding_mask must be a bool tensor of shape (B, S), got "
            f"{padding_mask.dtype} {tuple(padding_mask.shape)}"
        )
    mask = padding_mask[:, None, None, :]  # (B, 1, 1, S)
    if causal:
        length = padding_mask.size(1)
        mask = mask & subsequent_mask(length, padding_mask.device)[None, None]
    return mask
