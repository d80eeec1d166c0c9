"""Run under torchrun by `test_ddp.py`: DDP gradients and SGD updates vs one process.

Each rank trains through the real `Trainer` (DDP over gloo) on its own shard of the batches;
a second, single-process `Trainer` with the same initial weights trains on the union of both
ranks' micro-batches. Each rank writes the largest differences it sees to OUT/rank_R.json,
and the names of its threads inside the session and after it to OUT/threads_rank_R.json (the
process group's communication threads must be gone once the session has ended).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import torch

from aiayn.model import Transformer
from aiayn.tasks import config_from_dict
from aiayn.training.distributed import distributed_session
from aiayn.training.loss import translation_loss
from aiayn.training.trainer import Trainer
from aiayn.translation.data import prepare_data
from aiayn.translation.task import build_model_config

CONFIG = {
    "data": {
        "task": "copy",
        "seed": 3,
        "num_train": 200,
        "num_valid": 10,
        "num_test": 10,
        "tokenizer": "char",
    },
    "model": {"preset": "tiny", "dropout": 0.0, "max_len": 64},
    "train": {
        "batch_tokens": 160,
        "accumulate": 2,
        "schedule": "constant",
        "warmup": 0,
        "lr": 0.5,  # large, so that any mismatch would grow over the steps
        "clip_grad_norm": None,
        "precision": "fp32",
        "device": "cpu",
        "progress_bar": False,
        "threads": 1,
    },
}
STEPS = 5


def max_difference(a: list[torch.Tensor], b: list[torch.Tensor]) -> float:
    return max(float((x - y).abs().max()) for x, y in zip(a, b, strict=True))


def thread_names() -> list[str]:
    """The names of this process's threads, C++ ones included (Linux: /proc)."""
    tasks = Path(f"/proc/{os.getpid()}/task")
    return sorted((task / "comm").read_text().strip() for task in tasks.iterdir())


def main(out: Path) -> list[str]:
    config = config_from_dict(CONFIG)
    torch.set_num_threads(1)
    with distributed_session("cpu", "auto") as dist:
        data = prepare_data(config.data)  # char tokenizer: the same on every rank

        def fresh_model() -> Transformer:
            torch.manual_seed(0)
            return Transformer(build_model_config(config, data.tokenizers))

        trainer = Trainer(
            config, fresh_model(), data.train, None, out / "ddp", loss_fn=translation_loss, dist=dist
        )
        reference = Trainer(  # one process
            config, fresh_model(), data.train, None, out / "single", loss_fn=translation_loss
        )
        for opt_owner in (trainer, reference):  # plain SGD: the update is lr * gradient
            opt_owner.optimizer = torch.optim.SGD(opt_owner.model.parameters(), lr=0.0)
        accumulate, budget = config.train.accumulate, config.train.batch_tokens
        plans = [
            list(data.train.batches(budget, shuffle=True, seed=config.train.seed, rank=r, world_size=2))
            for r in range(2)
        ]
        mine = trainer._batches()  # this rank's shard, as training reads it
        report: dict[str, object] = {
            "rank": dist.rank,
            "world_size": dist.world_size,
            "backend": dist.backend,
        }
        report["shards_disjoint"] = not {i for b in plans[0] for i in b.indices} & {
            i for b in plans[1] for i in b.indices
        }
        grad_diffs, param_diffs, loss_diffs, token_counts, moved = [], [], [], [], []
        start = [p.detach().clone() for p in reference.model.parameters()]
        for step in range(STEPS):
            group = [next(mine) for _ in range(accumulate)]
            expected = plans[dist.rank][step * accumulate : (step + 1) * accumulate]
            assert [b.indices for b in group] == [b.indices for b in expected], "shard mismatch"
            union = [b for r in range(2) for b in plans[r][step * accumulate : (step + 1) * accumulate]]
            if step == 0:  # the gradients themselves, after backward (before any update)
                total, tokens = trainer.accumulate_gradients(group)
                ref_total, ref_tokens = reference.accumulate_gradients(union)
                grads = [p.grad for p in trainer.model.parameters()]
                ref_grads = [p.grad for p in reference.model.parameters()]
                grad_diffs.append(max_difference(grads, ref_grads))
                report["grad_scale"] = max(float(g.abs().max()) for g in ref_grads)
                report["loss_sum"] = [total, ref_total]
                token_counts.append([tokens, ref_tokens, sum(b.num_targets for b in union)])
                for owner in (trainer, reference):
                    owner.optimizer.zero_grad(set_to_none=True)
            loss = trainer.train_step(group)
            ref_loss = reference.train_step(union)
            loss_diffs.append(abs(loss - ref_loss))
            token_counts.append([trainer.last_step_tokens, reference.last_step_tokens])
            params = [p.detach() for p in trainer.model.parameters()]
            ref_params = [p.detach() for p in reference.model.parameters()]
            param_diffs.append(max_difference(params, ref_params))
        moved.append(max_difference(ref_params, start))
        report |= {
            "grad_diff": grad_diffs,
            "param_diff": param_diffs,
            "loss_diff": loss_diffs,
            "tokens": token_counts,
            "moved": moved,
            "steps": trainer.state.step,
        }
        (out / f"rank_{dist.rank}.json").write_text(json.dumps(report))
        return thread_names()


if __name__ == "__main__":
    threads_in_session = main(Path(sys.argv[1]))
    threads = {"in_session": threads_in_session, "after": thread_names()}
    (Path(sys.argv[1]) / f"threads_rank_{os.environ['RANK']}.json").write_text(json.dumps(threads))
