"""Property tests (hypothesis): padding invariance, causality, gradients everywhere."""

from __future__ import annotations

import functools

import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from .helpers import VOCAB, build, pad_to_lengths

ATOL = 1e-5
PROPERTY = settings(max_examples=25, deadline=None)
CONFIGS = [
    pytest.param(False, "sinusoidal", id="post_ln-sinusoidal"),
    pytest.param(True, "sinusoidal", id="pre_ln-sinusoidal"),
    pytest.param(False, "learned", id="post_ln-learned"),
    pytest.param(True, "learned", id="pre_ln-learned"),
]


@functools.cache
def model(kind: str, norm_first: bool = False, positional: str = "sinusoidal"):
    """Built once per configuration: hypothesis calls the tests many times."""
    return build(kind, seed=7, norm_first=norm_first, positional=positional)


def token_rows(rows: int, min_len: int, max_len: int):
    """`rows` rows of non-pad ids, all of one drawn length."""
    return st.integers(min_len, max_len).flatmap(
        lambda length: st.lists(
            st.lists(st.integers(1, VOCAB - 1), min_size=length, max_size=length),
            min_size=rows, max_size=rows,
        )
    )


@st.composite
def padded_batch(draw, max_len: int = 8, min_real: int = 1):
    """(B, S) ids where row b has a drawn number of real tokens (>= min_real) then padding."""
    batch = draw(st.integers(1, 3))
    tokens = torch.tensor(draw(token_rows(batch, min_real, max_len)))
    lengths = draw(st.lists(st.integers(min_real, tokens.size(1)), min_size=batch, max_size=batch))
    return pad_to_lengths(tokens, lengths)


# ------------------------------------------------------------ padding invariance
@PROPERTY
@given(src=padded_batch(), tgt_len=st.integers(1, 6), extra=st.integers(1, 5), data=st.data())
@pytest.mark.parametrize("norm_first", [False, True], ids=["post_ln", "pre_ln"])
def test_appending_source_padding_changes_nothing(norm_first, src, tgt_len, extra, data) -> None:
    net = model("transformer", norm_first)
    tgt_in = torch.tensor(data.draw(token_rows(src.size(0), tgt_len, tgt_len)))
    longer = torch.cat([src, torch.zeros(src.size(0), extra, dtype=torch.long)], dim=1)
    with torch.no_grad():
        logits, more_logits = net(src, tgt_in), net(longer, tgt_in)
        memory, more_memory = net.encode(src), net.encode(longer)
    torch.testing.assert_close(more_logits, logits, atol=ATOL, rtol=0)
    at_tokens = (src != 0)[..., None].expand_as(memory)  # (B, S, D): the source padding mask
    torch.testing.assert_close(more_memory[:, : src.size(1)][at_tokens], memory[at_tokens], atol=ATOL, rtol=0)


@PROPERTY
@given(tokens=padded_batch(), extra=st.integers(1, 5))
def test_appending_padding_leaves_classification_unchanged(tokens, extra) -> None:
    net = model("encoder")
    longer = torch.cat([tokens, torch.zeros(tokens.size(0), extra, dtype=torch.long)], dim=1)
    with torch.no_grad():
        torch.testing.assert_close(net(longer), net(tokens), atol=ATOL, rtol=0)


# -------------------------------------------------------------------- causality
@st.composite
def changed_target(draw, max_len: int = 7):
    """A target row batch, a position t and a different token for it (pad allowed past 0)."""
    target = torch.tensor(draw(token_rows(draw(st.integers(1, 3)), 1, max_len)))
    t = draw(st.integers(0, target.size(1) - 1))
    row = draw(st.integers(0, target.size(0) - 1))
    token = draw(st.integers(0 if t > 0 else 1, VOCAB - 1))
    assume(token != int(target[row, t]))
    changed = target.clone()
    changed[row, t] = token
    return target, changed, t


@PROPERTY
@given(case=changed_target(), src=padded_batch())
@pytest.mark.parametrize("norm_first", [False, True], ids=["post_ln", "pre_ln"])
def test_transformer_never_looks_ahead(norm_first, case, src) -> None:
    target, changed, t = case
    batch = target.size(0)
    src = src[:1].expand(batch, -1)
    net = model("transformer", norm_first)
    with torch.no_grad():
        before, after = net(src, target), net(src, changed)
    torch.testing.assert_close(after[:, :t], before[:, :t], atol=ATOL, rtol=0)
    assert (after[:, t] - before[:, t]).abs().max() > 1e-4  # position t does see token t


@PROPERTY
@given(case=changed_target())
@pytest.mark.parametrize("norm_first", [False, True], ids=["post_ln", "pre_ln"])
def test_decoder_only_never_looks_ahead(norm_first, case) -> None:
    tokens, changed, t = case
    net = model("lm", norm_first)
    with torch.no_grad():
        before, after = net(tokens), net(changed)
    torch.testing.assert_close(after[:, :t], before[:, :t], atol=ATOL, rtol=0)
    assert (after[:, t] - before[:, t]).abs().max() > 1e-4


# -------------------------------------------------------------------- gradients
def assert_every_parameter_learns(net: torch.nn.Module) -> None:
    named = list(net.named_parameters())
    assert named
    for name, parameter in named:
        assert parameter.grad is not None, f"{name} got no gradient"
        assert torch.isfinite(parameter.grad).all(), f"{name} has a non-finite gradient"
        assert parameter.grad.abs().max() > 0, f"{name} has an all-zero gradient"


@settings(max_examples=5, deadline=None)
@given(src=padded_batch(min_real=2), tgt=padded_batch(min_real=2), seed=st.integers(0, 1000))
@pytest.mark.parametrize(("norm_first", "positional"), CONFIGS)
def test_every_parameter_gets_a_gradient(norm_first, positional, src, tgt, seed) -> None:
    """Training mode with dropout on: the loss reaches every parameter of all three models.

    Sequences hold >= 2 real tokens: over a single key, attention ignores its query, so the
    pre-LN norm in front of cross-attention would rightly get a zero gradient.
    """
    torch.manual_seed(seed)
    batch = min(src.size(0), tgt.size(0))
    src, tgt = src[:batch], tgt[:batch]
    overrides = dict(norm_first=norm_first, positional=positional, dropout=0.1, attention_dropout=0.1)
    for kind in ("transformer", "lm", "encoder"):
        net = build(kind, seed=seed, **overrides).train()
        if kind == "transformer":
            output = net(src, tgt)
        elif kind == "lm":
            output = net(tgt)
        else:
            output = net(src)
        weights = torch.randn(output.shape)
        (output * weights).sum().backward()
        assert_every_parameter_learns(net)
