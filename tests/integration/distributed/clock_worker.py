"""Run under torchrun-style environment by `test_ddp.py`: a time-following schedule uses rank 0's
clock on every rank.

Each rank's trainer gets a fake clock that disagrees with the other rank's (rank 0 says 30 s of
the 60 s budget have passed, rank 1 says 5 s); the shared reading must be rank 0's time on every
rank, and so the same learning rate. It also gathers and broadcasts an object of each rank's.
Each rank writes what it holds to OUT/clock_rank_R.json.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

from aiayn.model import Transformer
from aiayn.tasks import config_from_dict
from aiayn.training.distributed import all_gather_object, broadcast_object, distributed_session
from aiayn.training.loss import translation_loss
from aiayn.training.trainer import Trainer
from aiayn.translation.data import prepare_data
from aiayn.translation.task import build_model_config

CONFIG = {
    "data": {"task": "copy", "seed": 3, "num_train": 100, "num_valid": 10, "num_test": 10,
             "tokenizer": "char"},
    "model": {"preset": "tiny", "dropout": 0.0, "max_len": 64},
    "train": {
        "batch_tokens": 160, "schedule": "cosine", "warmup": 0, "lr": 0.01, "max_steps": 1000,
        "max_minutes": 1.0, "precision": "fp32", "device": "cpu", "progress_bar": False, "threads": 1,
    },
}
SECONDS = {0: 30.0, 1: 5.0}  # each rank's own idea of the training time so far


def main(out: Path) -> None:
    config = config_from_dict(CONFIG)
    torch.set_num_threads(1)
    with distributed_session("cpu", "auto") as dist:
        data = prepare_data(config.data)
        model = Transformer(build_model_config(config, data.tokenizers))
        now = SECONDS[dist.rank]
        run_dir = out / "run"
        trainer = Trainer(config, model, data.train, None, run_dir, loss_fn=translation_loss, dist=dist)
        trainer.clock.load_state_dict({"elapsed_s": now})  # the clock stands, at `now`
        elapsed, reason = trainer._shared_reading()
        report = {
            "rank": dist.rank,
            "own_elapsed_s": trainer.clock.elapsed_s(),
            "stop": reason,
            "elapsed_s": elapsed,
            "lr": trainer.learning_rate(100, elapsed),
            "gathered": all_gather_object({"rank": dist.rank, "text": "x" * 3 * dist.rank}, dist),
            "broadcast": broadcast_object(
                {"from": dist.rank, "items": list(range(5 * dist.rank))}, dist, src=1
            ),
        }
        (out / f"clock_rank_{dist.rank}.json").write_text(json.dumps(report))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
