"""The packed training pass (`aiayn.model.packing`): same values, same gradients as padded."""

from __future__ import annotations

import pytest
import torch

from aiayn.model import PackedLayout

from .helpers import PAD, build, pad_to_lengths, random_tokens


def test_pack_unpack_round_trip_puts_zeros_at_padding():
    mask = torch.tensor([[True, True, False], [True, False, False]])
    layout = PackedLayout.from_padding_mask(mask)
    x = torch.arange(2 * 3 * 2, dtype=torch.float32).view(2, 3, 2)
    packed = layout.pack(x)
    assert layout.num_tokens == 3 and packed.shape == (3, 2)
    torch.testing.assert_close(packed, x[mask])  # row-major order
    restored = layout.unpack(packed)
    torch.testing.assert_close(restored[mask], x[mask])
    assert torch.all(restored[~mask] == 0)


def batch():
    src = pad_to_lengths(random_tokens(3, 7, seed=1), [7, 4, 2])
    tgt_in = pad_to_lengths(random_tokens(3, 6, seed=2), [3, 6, 1])
    return src, tgt_in


@pytest.mark.parametrize(("norm_first", "positional"), [(False, "sinusoidal"), (True, "learned")])
def test_packed_pass_matches_padded_values_and_gradients(norm_first, positional):
    """Logits at real targets and every parameter's gradient equal the padded pass's."""
    src, tgt_in = batch()
    keep = tgt_in != PAD
    labels = torch.randint(1, 23, tgt_in.shape, generator=torch.Generator().manual_seed(3))
    grads = []
    for packed in (False, True):
        model = build("transformer", seed=4, norm_first=norm_first, positional=positional)
        logits = model(src, tgt_in, output_mask=keep) if packed else model(src, tgt_in)[keep]
        loss = torch.nn.functional.cross_entropy(logits, labels[keep], reduction="sum")
        loss.backward()
        grads.append((logits.detach(), {n: p.grad for n, p in model.named_parameters()}))
    (padded_logits, padded_grads), (packed_logits, packed_grads) = grads
    torch.testing.assert_close(packed_logits, padded_logits, atol=1e-5, rtol=0)
    assert padded_grads.keys() == packed_grads.keys()
    for name, grad in padded_grads.items():
        torch.testing.assert_close(packed_grads[name], grad, atol=1e-5, rtol=1e-4, msg=name)


def test_output_mask_may_select_a_subset_of_real_targets():
    src, tgt_in = batch()
    model = build("transformer", seed=5)
    subset = (tgt_in != PAD) & (torch.arange(6) % 2 == 0)
    with torch.no_grad():
        torch.testing.assert_close(model(src, tgt_in, output_mask=subset), model(src, tgt_in)[subset],
                                   atol=1e-5, rtol=0)


def test_output_mask_on_padding_is_an_error():
    src, tgt_in = batch()
    model = build("transformer", seed=5)
    with pytest.raises(ValueError, match="output_mask selects padding"):
        model(src, tgt_in, output_mask=torch.ones_like(tgt_in, dtype=torch.bool))


def test_output_mask_without_any_padding_matches_the_full_pass():
    src, tgt_in = random_tokens(2, 5, seed=6), random_tokens(2, 4, seed=7)
    model = build("transformer", seed=5)
    keep = torch.ones_like(tgt_in, dtype=torch.bool)
    with torch.no_grad():
        torch.testing.assert_close(model(src, tgt_in, output_mask=keep), model(src, tgt_in)[keep],
                                   atol=1e-5, rtol=0)
