import math

import pytest
import torch
import torch.nn.functional as F

from aiayn.training import loss as loss_module
from aiayn.training.loss import label_smoothed_nll, projected_label_smoothed_nll
from aiayn.training.schedule import learning_rate, noam_lr


def test_label_smoothing_matches_the_definition():
    torch.manual_seed(0)
    logits = torch.randn(5, 7)
    labels = torch.tensor([1, 4, 0, 6, 2])  # one pad (0) position
    eps = 0.1
    log_probs = logits.log_softmax(-1)
    expected = 0.0
    for row, label in enumerate(labels.tolist()):
        if label == 0:
            continue
        target = torch.full((7,), eps / 7)
        target[label] += 1 - eps
        expected += float(-(target * log_probs[row]).sum())
    assert float(label_smoothed_nll(logits, labels, eps, pad_id=0)) == pytest.approx(expected, rel=1e-5)


def test_padding_is_ignored_and_no_smoothing_is_nll():
    logits = torch.randn(2, 3, 5)
    labels = torch.tensor([[1, 2, 0], [3, 0, 0]])
    loss = label_smoothed_nll(logits, labels, 0.0, pad_id=0)
    nll = -logits.log_softmax(-1)[[0, 0, 1], [0, 1, 0], [1, 2, 3]].sum()
    assert float(loss) == pytest.approx(float(nll), rel=1e-5)


def test_noam_schedule_is_the_papers_formula():
    d_model, warmup = 512, 4000
    for step in (1, 100, 4000, 10000):
        expected = d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)
        assert noam_lr(step, d_model, warmup) == pytest.approx(expected)
    peak = max(range(1, 20000, 50), key=lambda s: noam_lr(s, d_model, warmup))
    assert abs(peak - warmup) <= 50
    assert noam_lr(4000, d_model, warmup, scale=2.0) == pytest.approx(2 * noam_lr(4000, d_model, warmup))


def test_alternative_schedules():
    kwargs = dict(d_model=64, warmup=10, lr=1e-3, total_steps=100)
    assert learning_rate(5, "inverse_sqrt", **kwargs) == pytest.approx(5e-4)
    assert learning_rate(40, "inverse_sqrt", **kwargs) == pytest.approx(1e-3 * math.sqrt(10 / 40))
    assert learning_rate(10, "cosine", **kwargs) == pytest.approx(1e-3)
    assert learning_rate(100, "cosine", **kwargs) == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(ValueError, match="unknown schedule"):
        learning_rate(1, "linear", **kwargs)


@pytest.mark.parametrize("rows_per_slice", [1, 3, 100])
def test_projected_loss_equals_the_loss_of_the_whole_logits(monkeypatch, rows_per_slice):
    monkeypatch.setattr(loss_module, "LOGITS_PER_SLICE", 11 * rows_per_slice)  # vocabulary 11
    torch.manual_seed(0)
    hidden = torch.randn(7, 5, requires_grad=True)
    weight = torch.randn(11, 5, requires_grad=True)
    labels = torch.tensor([1, 4, 0, 10, 2, 2, 7])
    expected = label_smoothed_nll(hidden @ weight.t(), labels, 0.1, pad_id=-1)
    expected.backward()
    expected_grads = hidden.grad.clone(), weight.grad.clone()
    hidden.grad = weight.grad = None
    loss = projected_label_smoothed_nll(hidden, weight, labels, 0.1)
    (2.5 * loss).backward()  # the gradients worked out in the forward pass are scaled here
    assert float(loss.detach()) == pytest.approx(float(expected.detach()), rel=1e-5)
    assert torch.allclose(hidden.grad, 2.5 * expected_grads[0], atol=1e-5)
    assert torch.allclose(weight.grad, 2.5 * expected_grads[1], atol=1e-5)


def test_projected_loss_under_bf16_autocast_and_without_gradients():
    torch.manual_seed(0)
    hidden = torch.randn(6, 8, requires_grad=True)
    weight = torch.randn(13, 8, requires_grad=True)
    labels = torch.randint(0, 13, (6,))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        expected = label_smoothed_nll(F.linear(hidden, weight), labels, 0.1, pad_id=-1)
        loss = projected_label_smoothed_nll(hidden, weight, labels, 0.1)
    assert loss.dtype == torch.float32
    assert float(loss.detach()) == pytest.approx(float(expected.detach()), rel=1e-3)
    expected.backward()
    grads = hidden.grad.clone(), weight.grad.clone()
    hidden.grad = weight.grad = None
    loss.backward()
    assert hidden.grad.dtype == weight.grad.dtype == torch.float32
    assert torch.allclose(hidden.grad, grads[0], rtol=0.02, atol=0.02)
    assert torch.allclose(weight.grad, grads[1], rtol=0.02, atol=0.02)
    with torch.no_grad():  # validation: the loss alone
        assert float(projected_label_smoothed_nll(hidden, weight, labels, 0.0)) == pytest.approx(
            float(label_smoothed_nll(hidden @ weight.t(), labels, 0.0, pad_id=-1)), rel=1e-5
        )
