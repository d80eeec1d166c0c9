"""Multi-process training (DDP over gloo, on CPU): gradients equal those of one process on
the union batch; `torchrun ... -m aiayn train` writes checkpoints once and resumes."""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch
import yaml

from aiayn.core.errors import ConfigError
from aiayn.tasks import config_from_dict
from aiayn.training import distributed
from aiayn.training.checkpoint import list_checkpoints, load_training_state
from aiayn.training.distributed import (
    DistContext,
    _settle,
    convert_position,
    init_distributed,
    rank_device,
    resolve_backend,
    torchrun_environment,
)

WORKER = Path(__file__).with_name("ddp_worker.py")
CLOCK_WORKER = Path(__file__).with_name("clock_worker.py")
TORCHRUN_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in TORCHRUN_VARIABLES}
    # PYTHONFAULTHANDLER: a worker killed by a signal prints where it was.
    return env | {"OMP_NUM_THREADS": "1", "PYTHONFAULTHANDLER": "1"} | extra


def torchrun(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """`python -m torch.distributed.run --nproc_per_node=2 ... -m aiayn ARGS` on a free port."""
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node=2",
        "--master_addr=127.0.0.1",
        f"--master_port={free_port()}",
        "-m",
        "aiayn",
        *args,
    ]
    result = subprocess.run(command, cwd=cwd, env=clean_env(), capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, f"rc {result.returncode}\n{result.stdout}\n{result.stderr[-4000:]}"
    return result


# ------------------------------------------------------------------ helpers, in process
def test_torchrun_environment(monkeypatch):
    for name in TORCHRUN_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    assert torchrun_environment() is None
    assert init_distributed("cpu") == DistContext()  # a single process: nothing initialised
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert torchrun_environment() == (1, 2, 1)
    monkeypatch.setenv("RANK", "2")
    with pytest.raises(ConfigError, match="RANK=2"):
        torchrun_environment()
    monkeypatch.setenv("WORLD_SIZE", "two")
    with pytest.raises(ConfigError, match="integers"):
        torchrun_environment()


def test_backend_choice_and_device():
    assert resolve_backend("auto", "cpu") == "gloo"
    assert resolve_backend("auto", "cuda") == "nccl"
    assert resolve_backend("gloo", "cuda") == "gloo"
    with pytest.raises(ConfigError, match="dist_backend"):
        resolve_backend("mpi", "cpu")
    with pytest.raises(ConfigError, match="dist_backend"):
        config_from_dict({"train": {"dist_backend": "mpi"}})
    ranked = DistContext(rank=3, world_size=4, local_rank=1, backend="nccl")
    assert rank_device(torch.device("cuda"), ranked) == torch.device("cuda", 1)
    assert rank_device(torch.device("cpu"), ranked) == torch.device("cpu")
    assert rank_device(torch.device("cuda"), DistContext()) == torch.device("cuda")


def test_data_position_converts_between_world_sizes():
    assert convert_position(7, 2, 2) == 7
    assert convert_position(6, 2, 4) == 3  # 12 batches of the epoch plan done
    assert convert_position(5, 2, 4) == 3  # 10 done: round up, never repeat a batch
    assert convert_position(3, 4, 1) == 12


def test_settle_waits_until_python_alone_holds_the_tensors():
    """`_settle` returns only once nothing but Python holds the tensors (as after a gloo
    worker thread lets go of a finished collective's), and does not wait for other backends."""
    tensor = torch.ones(2, requires_grad=True)
    holder = {"graph": (tensor * tensor).sum()}  # autograd saves `tensor`: a second holder
    _settle(DistContext(rank=0, world_size=2, backend="nccl"), tensor)
    assert holder and tensor._use_count() > 1  # NCCL: back at once, the holder untouched
    release = threading.Timer(0.3, holder.clear)
    release.start()
    _settle(DistContext(rank=0, world_size=2, backend="gloo"), tensor)
    assert not holder and tensor._use_count() == 1  # gloo: back only after the release
    release.join()


def test_settle_gives_up_with_a_warning_after_its_deadline(monkeypatch, caplog):
    monkeypatch.setattr(distributed, "SETTLE_SECONDS", 0.2)
    tensor = torch.ones(2, requires_grad=True)
    graph = (tensor * tensor).sum()  # holds `tensor` throughout
    start = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="aiayn"):
        _settle(DistContext(rank=0, world_size=2, backend="gloo"), tensor)
    assert time.monotonic() - start >= 0.2  # it waited out its deadline, then went on
    assert "still held" in caplog.text
    assert tensor._use_count() > 1
    del graph


# ------------------------------------------------------------------ two processes
def run_two_ranks(worker: Path, out: Path) -> None:
    """`worker OUT` as ranks 0 and 1 of a process group (started the way torchrun starts them)."""
    port = str(free_port())
    workers = [
        subprocess.Popen(
            [sys.executable, str(worker), str(out)],
            env=clean_env(
                RANK=str(rank),
                WORLD_SIZE="2",
                LOCAL_RANK=str(rank),
                MASTER_ADDR="127.0.0.1",
                MASTER_PORT=port,
            ),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for rank in range(2)
    ]
    try:
        outputs = [w.communicate(timeout=120)[0] for w in workers]
    finally:
        for w in workers:
            w.kill()
    assert [w.returncode for w in workers] == [0, 0], "\n".join(o[-3000:] for o in outputs)


def test_gradients_and_sgd_steps_equal_single_process_on_union_batch(tmp_path):
    """Two ranks train through the real Trainer; each also runs a single-process Trainer on
    the union of both ranks' micro-batches."""
    run_two_ranks(WORKER, tmp_path)
    reports = [json.loads((tmp_path / f"rank_{r}.json").read_text()) for r in range(2)]
    for report in reports:
        assert report["backend"] == "gloo" and report["world_size"] == 2
        assert report["shards_disjoint"]
        # Loss sums and token counts are global: the same as one process on the union.
        assert report["loss_sum"][0] == pytest.approx(report["loss_sum"][1], rel=1e-6)
        assert all(len(set(counts)) == 1 for counts in report["tokens"])
        # Gradients after backward: equal to fp32 rounding (they are of order 0.1-1).
        assert report["grad_scale"] > 0.01
        assert report["grad_diff"][0] < 1e-6
        # 5 SGD steps at lr 0.5: parameters move by ~0.5 and still agree to fp32 rounding.
        assert report["moved"][0] > 0.05
        assert max(report["param_diff"]) < 1e-5
        assert max(report["loss_diff"]) < 1e-5
        assert report["steps"] == 5
    # The session's end stops gloo's threads (and rank 0's store server): none of them may
    # outlive the group and run while the interpreter exits.
    for rank in range(2):
        threads = json.loads((tmp_path / f"threads_rank_{rank}.json").read_text())
        group_threads = [name for name in threads["in_session"] if "gloo" in name or "tcpstore" in name]
        assert group_threads, threads  # the check can see them while the group exists
        assert [name for name in threads["after"] if name in group_threads] == [], threads


def test_time_following_schedule_uses_rank_0_clock_on_every_rank(tmp_path):
    """The ranks' clocks disagree (30 s vs 5 s of a 60 s budget): both use rank 0's, so the
    learning rate is the same everywhere (and DDP keeps the replicas equal)."""
    run_two_ranks(CLOCK_WORKER, tmp_path)
    reports = [json.loads((tmp_path / f"clock_rank_{r}.json").read_text()) for r in range(2)]
    assert [r["own_elapsed_s"] for r in reports] == [30.0, 5.0]
    assert [r["elapsed_s"] for r in reports] == [30.0, 30.0]
    assert reports[0]["lr"] == reports[1]["lr"]
    assert reports[0]["stop"] is None and reports[1]["stop"] is None
    # The object collectives (values of different lengths, so padding is exercised).
    for report in reports:
        assert report["gathered"] == [{"rank": 0, "text": ""}, {"rank": 1, "text": "xxx"}]
        assert report["broadcast"] == {"from": 1, "items": [0, 1, 2, 3, 4]}


TINY = {
    "data": {
        "task": "copy",
        "seed": 3,
        "num_train": 400,
        "num_valid": 20,
        "num_test": 10,
        "tokenizer": "char",
    },
    "model": {"preset": "tiny", "dropout": 0.1, "max_len": 64},
    "train": {
        "max_steps": 6,
        "batch_tokens": 300,
        "schedule": "inverse_sqrt",
        "lr": 0.003,
        "warmup": 5,
        "eval_every": 3,
        "log_every": 1,
        "progress_bar": False,
        "bleu_max_sentences": 5,
        "test_beam": 1,
        "threads": 1,
        "device": "cpu",
    },
}


def metric_steps(run_dir: Path, split: str) -> list[int]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [r["step"] for r in map(json.loads, lines) if r["split"] == split]



@pytest.fixture(scope="module")
def two_process_run(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    root = tmp_path_factory.mktemp("ddp_cli")
    (root / "tiny.yaml").write_text(yaml.safe_dump(TINY))
    result = torchrun("train", "tiny.yaml", "--out", "run", cwd=root)
    return root / "run", result


def test_two_process_cli_run_writes_once_from_rank_0(two_process_run):
    run_dir, result = two_process_run
    assert result.stdout.count("trained 6 steps") == 1  # only rank 0 prints the results
    assert "held-out exact match" in result.stdout
    assert [p.name for p in list_checkpoints(run_dir)] == ["step_000003", "step_000006"]
    assert metric_steps(run_dir, "train") == [1, 2, 3, 4, 5, 6]  # once each: rank 0 alone writes
    assert metric_steps(run_dir, "val") == [3, 6]
    assert result.stderr.count("distributed: 2 process(es), backend gloo") == 1  # rank 0 logs
    log = (run_dir / "train.log").read_text()
    assert "effective batch: 2 process(es) x 1 micro-batch(es) of up to 300 tokens" in log
    state = load_training_state(list_checkpoints(run_dir)[-1])
    assert state["train_state"]["world_size"] == 2
    assert len(state["rng_ranks"]) == 2  # each rank's RNG, for an exact resume
    assert not torch.equal(state["rng_ranks"][0]["rng_cpu"], state["rng_ranks"][1]["rng_cpu"])
    assert json.loads((run_dir / "results.json").read_text())["steps"] == 6


def test_two_process_cli_run_resumes_from_its_checkpoint(two_process_run):
    run_dir, _ = two_process_run
    result = torchrun("train", "--resume", str(run_dir), "--set", "train.max_steps=10", cwd=run_dir.parent)
    assert result.stdout.count("trained 10 steps") == 1
    assert "resumed from" in result.stderr and "step 6" in result.stderr
    assert [p.name for p in list_checkpoints(run_dir)][-2:] == ["step_000009", "step_000010"]
    assert metric_steps(run_dir, "train") == list(range(1, 11))
    assert metric_steps(run_dir, "val") == [3, 6, 9, 10]
    assert json.loads((run_dir / "results.json").read_text())["steps"] == 10


def test_two_process_language_model_run_and_resume(tmp_path):
    text = tmp_path / "book.txt"
    text.write_text("To be, or not to be, that is the question.\n" * 60)
    common = [
        "--set",
        "train.progress_bar=false",
        "--set",
        "train.eval_every=4",
        "--set",
        "model.preset=tiny",
        "--set",
        "data.block_size=16",
        "--set",
        "train.batch_tokens=128",
        "--set",
        "train.threads=1",
    ]
    run = tmp_path / "lm"
    torchrun(
        "lm",
        "train",
        "--text",
        str(text),
        "--out",
        str(run),
        "--set",
        "train.max_steps=4",
        *common,
        cwd=tmp_path,
    )
    assert [p.name for p in list_checkpoints(run)] == ["step_000004"]
    assert load_training_state(list_checkpoints(run)[-1])["train_state"]["world_size"] == 2
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    keys = [(r["step"], r["split"]) for r in records]
    assert len(keys) == len(set(keys)), "rank 0 alone writes metrics, each record once"
    torchrun("lm", "train", "--resume", str(run), "--set", "train.max_steps=8", cwd=tmp_path)
    assert list_checkpoints(run)[-1].name == "step_000008"
    assert json.loads((run / "results.json").read_text())["steps"] == 8


def test_two_process_classifier_run_and_resume(tmp_path):
    """`aiayn classify train` under torchrun: each rank reads its own batches, rank 0 alone
    writes (each record once); the checkpoint holds both ranks' RNG states; a 2-process
    resume continues it."""
    from aiayn.classify.run import prepare_classify_data
    from aiayn.data.tokenizer import Tokenizer
    from aiayn.tasks import load_config

    fields = {
        "model.preset": "tiny", "model.d_model": 32, "model.d_ff": 64, "model.num_encoder_layers": 1,
        "data.num_train": 200, "data.num_valid": 20, "data.num_test": 20, "data.max_sentence_tokens": 12,
        "train.batch_tokens": 128, "train.eval_every": 2, "train.warmup": 2, "train.log_every": 1,
        "train.progress_bar": "false", "train.threads": 1, "train.max_steps": 4,
    }  # fmt: skip
    overrides = [arg for key, value in fields.items() for arg in ("--set", f"{key}={value}")]
    run = tmp_path / "classify"
    result = torchrun("classify", "train", "--out", str(run), *overrides, cwd=tmp_path)
    assert result.stdout.count("held-out test accuracy:") == 1  # rank 0 alone reports
    assert result.stderr.count("distributed: 2 process(es), backend gloo") == 1
    assert [p.name for p in list_checkpoints(run)] == ["step_000002", "step_000004"]
    state = load_training_state(list_checkpoints(run)[-1])
    assert state["train_state"]["world_size"] == 2 and len(state["rng_ranks"]) == 2
    assert not torch.equal(state["rng_ranks"][0]["rng_cpu"], state["rng_ranks"][1]["rng_cpu"])
    assert metric_steps(run, "train") == [1, 2, 3, 4]  # once each: rank 0 alone writes
    assert metric_steps(run, "val") == [2, 4]
    # A step covers both ranks' batches: rank 0 reads batch 0 of the epoch plan, rank 1 batch 1.
    config = load_config(run / "train_config.yaml")
    data = prepare_classify_data(config.data, Tokenizer.load(run / "tokenizer.json"))
    plan = list(data.train.batches(config.train.batch_tokens, seed=config.train.seed, epoch=0))
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    first = next(r for r in records if r["split"] == "train" and r["step"] == 1)
    assert first["step_tgt_tokens"] == len(plan[0]) + len(plan[1])
    results = json.loads((run / "results.json").read_text())
    assert results["steps"] == 4 and results["labels"] == ["balanced", "unbalanced"]
    assert results["target_examples"] == state["train_state"]["target_tokens"]

    result = torchrun("classify", "train", "--resume", str(run), "--set", "train.max_steps=6", cwd=tmp_path)
    assert "resumed from" in result.stderr and "step 4" in result.stderr
    assert list_checkpoints(run)[-1].name == "step_000006"
    assert metric_steps(run, "train") == list(range(1, 7))
    assert metric_steps(run, "val") == [2, 4, 6]
    assert json.loads((run / "results.json").read_text())["steps"] == 6
