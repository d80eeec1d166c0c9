"""Interrupted runs lose nothing: SIGINT/SIGTERM checkpoint and explain how to resume;
SIGKILL (even in the middle of a checkpoint save) leaves the last complete checkpoint; every
resumed run ends with exactly the weights of an uninterrupted run."""

from __future__ import annotations

import random
import signal
import time
from pathlib import Path

import pytest

from aiayn.cli.main import main
from aiayn.data.tokenizer import TokenizerPair
from aiayn.formats import load_model
from aiayn.tasks import load_config
from aiayn.training.checkpoint import CHECKPOINTS, list_checkpoints, load_training_state

from .conftest import (
    REFERENCE_STEPS,
    TrainProcess,
    assert_same_weights,
    checkpoint_step,
    final_weights,
    train_steps,
    write_config,
)

LONG = 400  # max_steps of the runs that get interrupted: they must still be running


def resume_in_process(run_dir: Path, steps: int = REFERENCE_STEPS) -> None:
    assert main(["train", "--resume", str(run_dir), "--set", f"train.max_steps={steps}"]) == 0


def leftovers(run_dir: Path) -> list[str]:
    root = run_dir / CHECKPOINTS
    return sorted(p.name for p in root.iterdir() if p.name.startswith(".")) if root.is_dir() else []


def assert_run_dir_consistent(run_dir: Path) -> list[Path]:
    """Everything a resume reads is complete: every listed checkpoint loads, and so do the
    tokenizer and the config."""
    checkpoints = list_checkpoints(run_dir)
    for checkpoint in checkpoints:
        state = load_training_state(checkpoint)
        assert state["train_state"]["step"] == checkpoint_step(checkpoint)
        load_model(checkpoint)
    TokenizerPair.load(run_dir)
    load_config(run_dir / "train_config.yaml")
    return checkpoints


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_signal_writes_checkpoint_and_resume_matches_uninterrupted_run(signum, tmp_path, reference_run):
    # eval_every 7: validations (and their checkpoints) happen in this run but not in the
    # reference run, so this also shows that validation does not disturb the RNG stream.
    config = write_config(tmp_path / "config.yaml", max_steps=LONG, eval_every=7)
    run_dir = tmp_path / "run"
    process = TrainProcess([str(config), "--out", str(run_dir)], tmp_path / "logs")
    process.wait_until(lambda: train_steps(run_dir), "the first train record")

    code = process.send(signum)

    output = process.output()
    assert code == 130, output
    assert f"Interrupted by {signal.Signals(signum).name}" in output
    assert f"Resume with:\n  aiayn train --resume {run_dir}" in output
    assert "Traceback" not in output
    checkpoints = assert_run_dir_consistent(run_dir)
    interrupted_at = checkpoint_step(checkpoints[-1])
    assert 1 <= interrupted_at < REFERENCE_STEPS, "the run went too far before the signal arrived"
    assert max(train_steps(run_dir)) == interrupted_at  # the step in progress was finished

    resume_in_process(run_dir)
    assert checkpoint_step(list_checkpoints(run_dir)[-1]) == REFERENCE_STEPS
    assert_same_weights(final_weights(run_dir), final_weights(reference_run))


def test_sigkill_inside_a_checkpoint_save_keeps_the_previous_checkpoint(tmp_path, reference_run):
    config = write_config(tmp_path / "config.yaml", max_steps=LONG, eval_every=4)
    run_dir = tmp_path / "run"
    process = TrainProcess([str(config), "--out", str(run_dir)], tmp_path / "logs", pause_in_save=1.5)
    pending = run_dir / CHECKPOINTS / f".step_000008.tmp-{process.process.pid}"
    # The first save (step 4) completes; the second (step 8) is killed after its temporary
    # directory is complete, just before the rename that would publish it.
    process.wait_until(lambda: (pending / "training_state.pt").is_file(), "the second save")

    process.send(signal.SIGKILL)

    assert [c.name for c in assert_run_dir_consistent(run_dir)] == ["step_000004"]
    assert leftovers(run_dir) == [pending.name]  # complete, but never listed as a checkpoint
    resume_in_process(run_dir)
    assert leftovers(run_dir) == []  # cleaned up by the next save
    assert_same_weights(final_weights(run_dir), final_weights(reference_run))


def test_sigkill_at_random_moments_always_leaves_a_resumable_run(tmp_path, reference_run):
    rng = random.Random(20240601)
    config = write_config(tmp_path / "config.yaml", max_steps=LONG, eval_every=3, keep_checkpoints=2)
    run_dir = tmp_path / "run"
    args = [str(config), "--out", str(run_dir)]
    reached = 0
    for round_number in range(2):
        process = TrainProcess(args, tmp_path / f"logs{round_number}")
        # Wait until this process has trained past the checkpoint it started from, then kill
        # it at a random moment: mid-step, mid-validation or mid-save.
        process.wait_until(
            lambda start=reached: (
                list_checkpoints(run_dir) and checkpoint_step(list_checkpoints(run_dir)[-1]) > start
            ),
            "a new checkpoint",
        )
        time.sleep(rng.uniform(0.0, 0.2))
        process.send(signal.SIGKILL)
        checkpoints = assert_run_dir_consistent(run_dir)
        assert checkpoints, "a complete checkpoint was lost"
        reached = checkpoint_step(checkpoints[-1])
        assert reached < REFERENCE_STEPS, "the run went too far before the kill"
        args = ["--resume", str(run_dir)]

    resume_in_process(run_dir)
    assert leftovers(run_dir) == []
    assert_same_weights(final_weights(run_dir), final_weights(reference_run))


def test_ctrl_c_outside_the_training_loop_exits_130_without_traceback(monkeypatch, capsys):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("aiayn.inference.load", interrupted)
    assert main(["translate", "--model", "unused", "--text", "x"]) == 130
    err = capsys.readouterr().err
    assert err.strip() == "aiayn translate: interrupted"
