"""`train.precision: auto`: fp32 or bf16 chosen by timing the training step, with a fake clock."""

from __future__ import annotations

import logging

import pytest
import torch

from aiayn.core.errors import ConfigError
from aiayn.data.batching import make_batch
from aiayn.data.special_tokens import TRAINED_SPECIALS
from aiayn.model import ModelConfig, Transformer
from aiayn.runtime.cpu import parse_cpuinfo
from aiayn.tasks import config_from_dict
from aiayn.training import device as device_module
from aiayn.training import precision as precision_module
from aiayn.training.distributed import DistContext
from aiayn.training.loss import translation_loss
from aiayn.training.precision import choose_precision, measure_precision, pick_fastest, time_precisions
from aiayn.training.trainer import Trainer

from .conftest import tiny_config


class FakeClock:
    """Seconds that pass only when a (fake) training step says so."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def costed_step(clock: FakeClock, seconds_per_token: dict[str, float], calls: list):
    """A `run_step` that costs `seconds_per_token[precision]` per target token on `clock`."""

    def run_step(precision: str, round_: int) -> int:
        calls.append((precision, round_))
        tokens = 1000 + 100 * round_
        clock.now += seconds_per_token[precision] * tokens
        return tokens

    return run_step


def test_fp32_faster_picks_fp32_as_on_an_avx512_bf16_xeon():
    # The Xeon of issue 18: our step ran 2,635 tok/s in fp32 and 1,666 in bf16.
    clock, calls = FakeClock(), []
    totals = time_precisions(
        costed_step(clock, {"fp32": 1 / 2635, "bf16": 1 / 1666}, calls), ["fp32", "bf16"], 3, timer=clock
    )
    assert totals["fp32"][1] == totals["bf16"][1] == 1100 + 1200 + 1300  # same batches for both
    assert totals["fp32"][1] / totals["fp32"][0] == pytest.approx(2635)
    assert totals["bf16"][1] / totals["bf16"][0] == pytest.approx(1666)
    assert pick_fastest(totals) == "fp32"
    # A warm-up round (untimed), then the order alternates round to round.
    assert calls == [
        ("fp32", 0), ("bf16", 0), ("fp32", 1), ("bf16", 1), ("bf16", 2), ("fp32", 2), ("fp32", 3), ("bf16", 3)
    ]


def test_bf16_faster_picks_bf16_and_a_near_tie_goes_to_fp32():
    clock = FakeClock()
    step = costed_step(clock, {"fp32": 2e-3, "bf16": 1e-3}, [])
    totals = time_precisions(step, ["fp32", "bf16"], 2, timer=clock)
    assert pick_fastest(totals) == "bf16"
    assert pick_fastest({"fp32": (1.0, 1000), "bf16": (1.0, 1030)}) == "fp32"  # 3% is within the margin
    assert pick_fastest({"fp32": (1.0, 1000), "bf16": (1.0, 1060)}) == "bf16"


def test_the_rounds_stop_at_the_time_budget():
    clock, calls = FakeClock(), []
    step = costed_step(clock, {"fp32": 1e-3, "bf16": 1e-3}, calls)
    time_precisions(step, ["fp32", "bf16"], 10, timer=clock, budget_s=5.0)
    timed_rounds = {round_ for _, round_ in calls if round_ > 0}
    assert timed_rounds == {1, 2, 3}  # 2.2, 2.4, 2.6 s: past the 5 s budget after the third


def tiny_model_and_batches() -> tuple[Transformer, list]:
    torch.manual_seed(0)
    model = Transformer(ModelConfig.preset("tiny", vocab_size=20, max_len=32, dropout=0.1))
    batches = [
        make_batch([[5, 6, 7, 8]] * 3, [[9, 10, 11]] * 3, specials=TRAINED_SPECIALS),
        make_batch([[5, 6]] * 4, [[7, 8, 9, 10]] * 4, specials=TRAINED_SPECIALS),
    ]
    return model, batches


def clocked_loss(clock: FakeClock, seconds: dict[str, float]):
    """translation_loss that also advances `clock` by the cost of the precision it runs in."""

    def loss_fn(model, batch, smoothing):
        clock.now += seconds["bf16" if torch.is_autocast_enabled("cpu") else "fp32"]
        return translation_loss(model, batch, smoothing)

    return loss_fn


@pytest.mark.parametrize(("seconds", "expected"), [({"fp32": 0.5, "bf16": 0.8}, "fp32"),
                                                   ({"fp32": 0.5, "bf16": 0.2}, "bf16")])
def test_measure_precision_times_the_real_step_and_logs_both_rates(
    monkeypatch, caplog, one_thread, seconds, expected
):
    monkeypatch.setattr(precision_module, "bf16_worth_measuring", lambda device: True)
    model, batches = tiny_model_and_batches()
    weights = {k: v.clone() for k, v in model.state_dict().items()}
    rng = torch.get_rng_state()
    clock = FakeClock()
    with caplog.at_level(logging.INFO, logger="aiayn"):
        choice = measure_precision(
            model, batches, clocked_loss(clock, seconds), 0.1, torch.device("cpu"), timer=clock
        )
    assert choice == expected
    # Both figures are logged: target tokens per second over the 3 timed rounds, which train on
    # batches 1, 0, 1 (20 + 12 + 20 target tokens, <eos> included).
    message = next(r.getMessage() for r in caplog.records if "train.precision auto" in r.getMessage())
    assert f"fp32 {52 / (3 * seconds['fp32']):,.0f} target tokens/s" in message
    assert f"bf16 {52 / (3 * seconds['bf16']):,.0f} target tokens/s" in message
    assert message.endswith(f"using {expected}")
    # Nothing of training's state moved: weights, gradients, the RNG (dropout ran 8 times).
    assert all(torch.equal(weights[k], v) for k, v in model.state_dict().items())
    assert all(p.grad is None for p in model.parameters())
    assert torch.equal(torch.get_rng_state(), rng)


def test_no_bf16_instructions_means_fp32_unmeasured(monkeypatch):
    monkeypatch.setattr(device_module, "cpu_has_bf16_instructions", lambda: False)
    model, batches = tiny_model_and_batches()

    def never(*args):
        raise AssertionError("nothing should be timed")

    assert measure_precision(model, batches, never, 0.1, torch.device("cpu")) == "fp32"


def test_a_set_precision_or_a_resumed_choice_is_not_measured(monkeypatch):
    monkeypatch.setattr(precision_module, "measure_precision", lambda *a, **k: pytest.fail("measured"))
    model, _ = tiny_model_and_batches()
    args = (model, None, translation_loss, torch.device("cpu"), DistContext())
    for precision in ("fp32", "bf16"):
        cfg = config_from_dict(tiny_config(precision=precision)).train
        assert choose_precision(cfg, "", *args) == precision
    auto = config_from_dict(tiny_config(precision="auto")).train
    assert choose_precision(auto, "bf16", *args) == "bf16"  # what the run measured when it started


def test_cpu_flags_decide_only_whether_bf16_is_worth_measuring(monkeypatch):
    def cpu_with(text: str) -> None:
        monkeypatch.setattr(device_module, "cpu_flags", lambda: parse_cpuinfo(text).flags)

    cpu_with("processor\t: 0\nflags\t\t: fpu sse avx2 avx512f avx512_bf16 avx512_vnni\n\nprocessor\t: 1\n")
    assert device_module.bf16_worth_measuring(torch.device("cpu"))
    cpu_with("flags\t\t: fpu sse avx2 avx512f avx512_vnni\n")  # AVX-512 without BF16
    assert not device_module.bf16_worth_measuring(torch.device("cpu"))
    cpu_with("Features\t: fp asimd bf16 sve\n")  # Arm
    assert device_module.bf16_worth_measuring(torch.device("cpu"))


# ------------------------------------------------------------------ the whole step is timed
class TimedData:
    """A dataset whose first batch costs 1 s (an epoch's shuffle), the others 0.1 s each."""

    def __init__(self, clock: FakeClock, batches: list) -> None:
        self.clock, self.items = clock, batches

    def batches(self, batch_tokens, shuffle, seed, epoch):
        for i, batch in enumerate(self.items):
            self.clock.now += 1.0 if i == 0 else 0.1
            yield batch


def test_the_timing_covers_the_update_and_the_batches_drawing(monkeypatch, one_thread):
    model, batches = tiny_model_and_batches()
    clock = FakeClock()
    data = TimedData(clock, batches * 3)
    drawn, draw_s = precision_module.timed_probe_batches(data, 400, 1, 4, timer=clock)
    assert len(drawn) == 4 and draw_s == pytest.approx(0.1)  # the epoch's set-up counts once
    adam_step = torch.optim.Adam.step

    def quarter_second_update(self, *args, **kwargs):
        clock.now += 0.25
        return adam_step(self, *args, **kwargs)

    monkeypatch.setattr(torch.optim.Adam, "step", quarter_second_update)
    weights = {k: v.clone() for k, v in model.state_dict().items()}
    totals = precision_module.measure_training_steps(
        model, batches, clocked_loss(clock, {"fp32": 0.5, "bf16": 0.5}), 0.1, torch.device("cpu"), ["fp32"],
        timer=clock, overhead_s=draw_s,
    )
    # Three timed rounds of forward/backward (0.5 s), an update (0.25 s) and drawing a batch (0.1 s).
    assert totals["fp32"] == (pytest.approx(3 * 0.85), 52)
    assert all(torch.equal(weights[k], v) for k, v in model.state_dict().items())
    assert all(p.grad is None for p in model.parameters())


# ------------------------------------------------------------------ precisions of a CUDA GPU
CUDA = torch.device("cuda")  # a device object only: nothing runs on it here


@pytest.mark.parametrize("precision", ["fp16", "tf32"])
def test_cuda_only_precisions_are_refused_on_a_cpu_naming_the_fix(tmp_path, precision):
    refused = f"train.precision={precision} needs a CUDA GPU.*set train.precision"
    with pytest.raises(ConfigError, match=refused):
        precision_module.check_precision(precision, torch.device("cpu"))
    precision_module.check_precision(precision, CUDA)
    model, _ = tiny_model_and_batches()
    config = config_from_dict(tiny_config(precision=precision))
    with pytest.raises(ConfigError, match="needs a CUDA GPU"):
        Trainer(config, model, None, None, tmp_path, loss_fn=translation_loss)


def test_auto_times_what_the_device_offers_and_picks_the_fastest():
    assert precision_module.precision_candidates(CUDA, True) == ["fp32", "tf32", "bf16"]
    assert precision_module.precision_candidates(CUDA, False) == ["fp32", "tf32", "fp16"]
    assert precision_module.precision_candidates(torch.device("cpu"), True) == ["fp32", "bf16"]
    assert precision_module.precision_candidates(torch.device("cpu"), False) == ["fp32"]
    three = {"fp32": (1.0, 1000), "tf32": (1.0, 3000), "bf16": (1.0, 5000)}
    assert pick_fastest(three) == "bf16"
    assert pick_fastest(three | {"bf16": (1.0, 2000)}) == "tf32"
    assert pick_fastest({"fp32": (1.0, 1000), "tf32": (1.0, 1040), "bf16": (1.0, 900)}) == "fp32"


def test_tf32_sets_the_matmul_precision_for_the_step_and_restores_it():
    before = torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32
    with precision_module.precision_context("tf32", CUDA):
        assert torch.get_float32_matmul_precision() == "high" and torch.backends.cudnn.allow_tf32
    assert (torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32) == before
    with pytest.raises(RuntimeError), precision_module.precision_context("tf32", CUDA):
        raise RuntimeError("a failed step")
    assert (torch.get_float32_matmul_precision(), torch.backends.cudnn.allow_tf32) == before
    for precision, device in (("bf16", CUDA), ("tf32", torch.device("cpu"))):
        with precision_module.precision_context(precision, device):
            assert torch.get_float32_matmul_precision() == before[0]


def test_fp16_autocasts_and_scales_and_attention_kernels_are_chosen_on_cuda_only():
    with device_module.autocast("fp16", torch.device("cpu")):
        assert torch.get_autocast_dtype("cpu") == torch.float16 and torch.is_autocast_enabled("cpu")
    with device_module.autocast("tf32", torch.device("cpu")):
        assert not torch.is_autocast_enabled("cpu")
    assert precision_module.grad_scaler("fp16", torch.device("cpu")) is None
    assert precision_module.grad_scaler("bf16", CUDA) is None
    assert precision_module.attention_backends(torch.device("cpu")) is None
    names = [backend.name for backend in precision_module.attention_backends(CUDA)]
    assert names == ["FLASH_ATTENTION", "EFFICIENT_ATTENTION", "MATH"]  # no cuDNN


def test_a_cuda_run_holds_attention_to_the_flash_and_memory_efficient_kernels():
    before = torch.backends.cuda.cudnn_sdp_enabled()
    with precision_module.attention_context(CUDA):
        assert not torch.backends.cuda.cudnn_sdp_enabled()
        assert torch.backends.cuda.flash_sdp_enabled() and torch.backends.cuda.mem_efficient_sdp_enabled()
    assert torch.backends.cuda.cudnn_sdp_enabled() == before
