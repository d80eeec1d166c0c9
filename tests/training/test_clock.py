"""The training clock: elapsed time across sessions, the budget, checkpoints, resume."""

from __future__ import annotations

import pytest
import torch

from aiayn.model import Transformer
from aiayn.training.checkpoint import STATE_FILE, list_checkpoints, load_training_state
from aiayn.training.clock import TrainClock, validation_allowance
from aiayn.training.loss import translation_loss
from aiayn.training.run_dir import prepare_run_dir
from aiayn.training.trainer import Trainer
from aiayn.translation.data import prepare_data
from aiayn.translation.task import build_model_config


class FakeTime:
    """A time source that moves only when a test (or a fake training step) moves it."""

    def __init__(self) -> None:
        self.now = 100.0  # only differences count

    def __call__(self) -> float:
        return self.now


def test_the_clock_counts_only_while_running_and_keeps_earlier_sessions():
    time = FakeTime()
    clock = TrainClock(budget_s=60.0, timer=time)
    time.now += 5
    assert clock.elapsed_s() == 0.0 and not clock.running  # not started: nothing counts
    clock.start()
    time.now += 10
    assert clock.elapsed_s() == 10.0
    clock.stop()
    time.now += 100  # e.g. the final evaluation after training
    assert clock.elapsed_s() == 10.0
    clock.start()
    time.now += 2.5
    assert clock.elapsed_s() == 12.5
    assert clock.budget_share() == pytest.approx(12.5 / 60)
    assert not clock.out_of_time()
    time.now += 50
    assert clock.out_of_time() and clock.budget_share() == 1.0  # the share stops at the budget


def test_state_dict_round_trip_continues_from_the_recorded_time():
    time = FakeTime()
    first = TrainClock(budget_s=60.0, timer=time)
    first.start()
    time.now += 20
    saved = first.state_dict()
    assert saved == {"elapsed_s": 20.0, "budget_s": 60.0}
    resumed = TrainClock(budget_s=120.0, timer=time)  # a longer budget on resume: this run's counts
    resumed.load_state_dict(saved)
    resumed.start()
    time.now += 1
    assert resumed.elapsed_s() == 21.0 and resumed.budget_s == 120.0
    assert TrainClock().budget_share() is None and not TrainClock().out_of_time(1e9)
    with pytest.raises(ValueError, match="elapsed_s"):
        resumed.load_state_dict({"elapsed_s": -1.0})


def clocked_trainer(config, run_dir, time: FakeTime, resume: bool = False) -> Trainer:
    prepare_run_dir(run_dir, resume=resume, overwrite=False)
    torch.manual_seed(config.train.seed)
    data = prepare_data(config.data)
    model = Transformer(build_model_config(config, data.tokenizers))

    def two_second_steps(model, batch, smoothing):
        if model.training:
            time.now += 2.0
        return translation_loss(model, batch, smoothing)

    return Trainer(config, model, data.train, data.valid, run_dir, loss_fn=two_second_steps, timer=time)


def test_checkpoints_record_the_clock_and_the_stop_check_is_a_query(tmp_path, make_config, one_thread):
    time = FakeTime()
    trainer = clocked_trainer(make_config(max_steps=6, eval_every=3, max_minutes=1.0), tmp_path / "run", time)
    trainer.fit()
    states = [load_training_state(path) for path in list_checkpoints(tmp_path / "run")]
    # Validation takes no fake time: each checkpoint holds the time of its steps.
    assert [s["clock"]["elapsed_s"] for s in states] == [6.0, 12.0]
    assert all("elapsed_s" not in s["train_state"] for s in states)
    assert trainer.clock.elapsed_s() == 12.0 and not trainer.clock.running
    # Asking twice changes nothing: the answer depends only on the state and the time given.
    assert trainer.stop_reason(10.0) == trainer.stop_reason(10.0) == "reached train.max_steps=6"
    trainer.state.step = 0
    assert trainer.stop_reason(59.9) is None
    assert trainer.stop_reason(60.0) == "reached train.max_minutes=1.0"
    assert trainer.clock.elapsed_s() == 12.0


def test_a_checkpoint_written_before_the_clock_still_resumes(tmp_path, make_config, one_thread):
    """Older checkpoints kept the training time as `train_state.elapsed_s`, with no `clock`."""
    time = FakeTime()
    run_dir = tmp_path / "run"
    clocked_trainer(make_config(max_steps=3, eval_every=3, max_minutes=1.0), run_dir, time).fit()
    (checkpoint,) = list_checkpoints(run_dir)
    state = load_training_state(checkpoint)
    state["train_state"]["elapsed_s"] = state.pop("clock")["elapsed_s"] + 30.0  # the old layout
    torch.save(state, checkpoint / STATE_FILE)
    resumed = clocked_trainer(make_config(max_steps=6, eval_every=3, max_minutes=1.0), run_dir, time, True)
    assert resumed.resume()
    assert resumed.state.step == 3 and resumed.clock.elapsed_s() == 36.0
    resumed.fit()
    assert resumed.state.step == 6 and resumed.clock.elapsed_s() == 42.0
    assert load_training_state(list_checkpoints(run_dir)[-1])["clock"]["elapsed_s"] == 42.0


def test_the_validations_share_of_the_training_time_carries_over():
    # 100 s in, nothing validated yet: 10% of it; 5 s spent before: 10% of the 95 s trained, less the 5.
    assert validation_allowance(0.1, 100.0, 0.0) == pytest.approx(10.0)
    assert validation_allowance(0.1, 100.0, 5.0) == pytest.approx(4.5)
    assert validation_allowance(0.1, 100.0, 5.0, this_far_s=1.0) == pytest.approx(3.4)  # its loss
    assert validation_allowance(0.1, 20.0, 15.0) == 0.0  # overspent: nothing, never negative


def test_the_trainer_gives_each_validation_what_is_left_of_its_share(tmp_path, make_config, one_thread):
    time = FakeTime()
    config = make_config(max_steps=4, eval_every=2, bleu_time_share=0.25, compile="false")
    trainer = clocked_trainer(config, tmp_path / "run", time)
    given = []

    def half_second_metrics(model, allowance_s=None):
        given.append(allowance_s)
        time.now += 0.5
        return {}

    trainer.evaluate = half_second_metrics
    trainer.fit()
    # Step 2 at 4 s: 25% of 4 s; step 4 at 8.5 s, 8 s of it trained: 2 s, less the 0.5 s spent.
    assert given == pytest.approx([1.0, 1.5])
    assert trainer.state.validation_s == pytest.approx(1.0)
    assert load_training_state(list_checkpoints(tmp_path / "run")[-1])["train_state"]["validation_s"] == 1.0
