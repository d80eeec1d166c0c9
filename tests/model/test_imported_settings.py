"""The settings that imported models need (issue 26), each changing what the model computes:
SiLU ("swish") and tanh-GELU ("gelu_new") activations, unscaled embeddings, a logits bias, and a
decoder start token equal to the padding token (position 0 stays real)."""

from __future__ import annotations

import math

import pytest
import torch

from aiayn.data.batching import Batch
from aiayn.model import ModelConfig, Transformer
from aiayn.model.feed_forward import PositionwiseFeedForward
from aiayn.model.masks import target_padding_mask
from aiayn.training.loss import label_smoothed_nll, translation_loss


@pytest.mark.parametrize("name, reference", [
    ("swish", lambda x: x / (1 + torch.exp(-x))),
    ("gelu_new", lambda x: 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))),
    ("gelu", lambda x: 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))),
])
def test_activation_is_the_named_function(name, reference):
    x = torch.linspace(-4, 4, 101, dtype=torch.float64)
    activation = PositionwiseFeedForward(2, 2, activation=name).activation
    assert torch.allclose(activation(x), reference(x), atol=1e-7)
    assert not torch.allclose(PositionwiseFeedForward(2, 2, activation="relu").activation(x), reference(x))


def test_unknown_activation_is_refused_naming_the_key():
    with pytest.raises(ValueError, match="ModelConfig.activation"):
        ModelConfig.tiny(activation="tanh")


def test_scale_embedding_off_skips_sqrt_d_model():
    torch.manual_seed(0)
    scaled = Transformer(ModelConfig.tiny(vocab_size=20))
    plain = Transformer(ModelConfig.tiny(vocab_size=20, scale_embedding=False))
    plain.load_state_dict(scaled.state_dict())
    ids = torch.tensor([[4, 5, 6]])
    assert torch.allclose(scaled.src_embedding(ids), plain.src_embedding(ids) * math.sqrt(64))


def test_output_bias_adds_to_logits_and_to_the_training_loss():
    torch.manual_seed(0)
    model = Transformer(ModelConfig.tiny(vocab_size=20, output_bias=True)).eval()
    src, tgt_in = torch.tensor([[4, 5, 2]]), torch.tensor([[1, 6, 7]])
    before = model(src, tgt_in)
    with torch.no_grad():
        model.output_projection.bias[6] = 3.0
    assert torch.allclose(model(src, tgt_in)[..., 6], before[..., 6] + 3.0, atol=1e-5)
    labels = torch.tensor([[6, 7, 2]])
    batch = Batch(src=src, tgt_in=tgt_in, labels=labels, num_src_tokens=3, num_targets=3, indices=[0],
                  pad_id=0)
    loss, _ = translation_loss(model, batch, 0.0)
    assert torch.allclose(loss, label_smoothed_nll(model(src, tgt_in), labels, 0.0, 0), atol=1e-4)


def test_start_token_equal_to_pad_is_a_real_position():
    """Marian starts decoding with <pad>: masks come from lengths, so position 0 is real and the
    first output does not depend on whether the start token's id is also the padding id."""
    tgt_in = torch.tensor([[0, 5, 6, 0], [0, 7, 0, 0]])
    assert target_padding_mask(tgt_in, 0).tolist() == [[True, True, True, False], [True, True, False, False]]
    torch.manual_seed(0)
    config = ModelConfig.tiny(vocab_size=20, pad_id=0, bos_id=0)
    model = Transformer(config).eval()
    src = torch.tensor([[4, 5, 2], [6, 2, 0]])
    full = model(src, tgt_in)
    alone = model(src[:1, :], tgt_in[:1, :1])
    assert torch.isfinite(full).all()
    assert torch.allclose(full[0, 0], alone[0, 0], atol=1e-5)
