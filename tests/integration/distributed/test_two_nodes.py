"""Two "machines" on one: two torchrun launchers (one process each) meet through torchrun's own
c10d rendezvous, each with its own token-store cache (each node's local rank 0 prepares the
store, trains the same tokenizer and memory-maps it), and train 20 steps; the weights equal a
single-process run of the same global batch (two micro-batches per step) within the DDP
test's tolerance."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml
from safetensors.torch import load_file

from .test_ddp import TINY, clean_env, free_port

STEPS = 20
CONFIG = {
    "data": TINY["data"] | {"num_train": 1500, "tokenizer": "bpe", "vocab_size": 300},
    "model": TINY["model"] | {"dropout": 0.0},
    "train": TINY["train"]
    | {"max_steps": STEPS, "eval_every": STEPS // 2, "precision": "fp32", "schedule": "constant", "lr": 1e-3},
}


def launch(node: Path, port: int) -> subprocess.Popen:
    command = [
        sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--nproc-per-node", "1",
        "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", "aiayn-test",
        "-m", "aiayn", "train", "tiny.yaml", "--out", "run",
    ]  # fmt: skip
    env = clean_env(AIAYN_CACHE=str(node / "cache"))
    return subprocess.Popen(
        command, cwd=node, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def test_two_nodes_with_their_own_caches_train_like_one_process(tmp_path):
    nodes = [tmp_path / "node0", tmp_path / "node1"]
    for node in nodes:
        node.mkdir()
        (node / "tiny.yaml").write_text(yaml.safe_dump(CONFIG))
    port = free_port()
    launchers = [launch(node, port) for node in nodes]
    try:
        outputs = [launcher.communicate(timeout=300)[0] for launcher in launchers]
    finally:
        for launcher in launchers:
            launcher.kill()
    assert [launcher.returncode for launcher in launchers] == [0, 0], "\n".join(o[-3000:] for o in outputs)
    for node in nodes:  # each machine prepared its own store
        assert len([p for p in (node / "cache").iterdir() if not p.name.startswith(".")]) == 1
    runs = [node / "run" for node in nodes if (node / "run" / "checkpoints").is_dir()]
    assert len(runs) == 1  # global rank 0 alone writes the run directory
    single = tmp_path / "single"
    single.mkdir()
    config = CONFIG | {"train": CONFIG["train"] | {"accumulate": 2}}
    (single / "tiny.yaml").write_text(yaml.safe_dump(config))
    env = clean_env(AIAYN_CACHE=str(single / "cache"))
    command = [sys.executable, "-m", "aiayn", "train", "tiny.yaml", "--out", "run"]
    result = subprocess.run(command, cwd=single, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    name = f"checkpoints/step_{STEPS:06d}/model.safetensors"
    two, one = load_file(runs[0] / name), load_file(single / "run" / name)
    assert two.keys() == one.keys()
    assert max(float((two[k] - one[k]).abs().max()) for k in one) < 1e-5
    first = load_file(runs[0] / "checkpoints" / f"step_{STEPS // 2:06d}" / "model.safetensors")
    assert max(float((two[k] - first[k]).abs().max()) for k in one) > 1e-3  # the weights did move
    log = (runs[0] / "train.log").read_text()
    assert "effective batch: 2 process(es) x 1 micro-batch(es)" in log


def test_a_failed_preparation_stops_every_rank_with_its_error(tmp_path):
    """Local rank 0 cannot prepare the store (misaligned files): the other rank stops with the
    same error instead of waiting for a store that never comes."""
    (tmp_path / "train.src").write_text("a\nb\n")
    (tmp_path / "train.tgt").write_text("a\n")
    config = CONFIG | {"data": {"task": "files", "train_src": "train.src", "train_tgt": "train.tgt"}}
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(config))
    command = [
        sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--master_addr=127.0.0.1",
        f"--master_port={free_port()}", "-m", "aiayn", "train", "bad.yaml", "--out", "run",
    ]  # fmt: skip
    env = clean_env(AIAYN_CACHE=str(tmp_path / "cache"))
    result = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180)
    assert result.returncode != 0
    assert result.stderr.count("parallel files differ in length") == 2  # both ranks, one line each
