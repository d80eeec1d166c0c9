"""`aiayn train --set train.implementation=paper` learns the dates task on `aiayn.paper` alone
(the engine's attention raises if called), and writes a model directory the engine opens."""

from __future__ import annotations

import json

import pytest
import torch

import aiayn
from aiayn.formats import CONFIG_FILE, load_model
from aiayn.model.multi_head_attention import MultiHeadAttention
from shared_dates import splits, train_dates_run


def test_the_paper_trains_dates_without_the_engine(tmp_path, monkeypatch) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError("the engine's MultiHeadAttention ran")

    with monkeypatch.context() as patch:
        patch.setattr(MultiHeadAttention, "forward", refuse)
        run = train_dates_run(tmp_path, "train.implementation=paper")
        engine = load_model(run)
        ids = torch.tensor([[engine.config.eos_id]])
        with pytest.raises(AssertionError, match="engine's MultiHeadAttention ran"):  # the patch held
            engine(ids, torch.tensor([[engine.config.bos_id]]))

    results = json.loads((run / "results.json").read_text())
    assert results["test"]["implementation"] == "paper" and results["test"]["sentences"] == 400
    assert results["test"]["exact_match"] >= 99.0
    assert "implementation" not in (run / CONFIG_FILE).read_text()  # no model directory gains a key

    held_out = splits()["test"][:100]
    outputs = aiayn.load(run, device="cpu", task="translation").translate([s for s, _ in held_out], beam=1)
    assert sum(o == t for o, (_, t) in zip(outputs, held_out, strict=True)) >= 99


def test_the_references_schedule_is_the_engines() -> None:
    """Sec. 5.3, Eq. 3: `aiayn.paper.rate` equals the engine's `noam_lr` across warmup and decay,
    and the reference's optimizer follows it with the paper's Adam settings."""
    from aiayn import paper
    from aiayn.training.schedule import noam_lr

    steps = [1, 2, 10, 400, 3999, 4000, 4001, 8000, 50_000, 100_000]
    for step in steps:
        assert paper.rate(step, 512, 4000) == pytest.approx(noam_lr(step, 512, 4000), rel=1e-12)
    assert paper.rate(4000) > paper.rate(3000) and paper.rate(4000) > paper.rate(5000)  # the peak
    adam, schedule = paper.optimizer(torch.nn.Linear(2, 2), d_model=512, warmup=4000)
    assert adam.defaults["betas"] == (0.9, 0.98) and adam.defaults["eps"] == 1e-9
    seen = []
    for _ in range(3):
        seen.append(adam.param_groups[0]["lr"])
        adam.step()
        schedule.step()
    assert seen == pytest.approx([noam_lr(s, 512, 4000) for s in (1, 2, 3)], rel=1e-12)
