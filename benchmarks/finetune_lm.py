"""`aiayn lm train --init-from` a GPT-2-layout Transformers model on tinyshakespeare (issue 26).

No GPT-2 weights can be downloaded here, so the source is made first: a character-level
language model in GPT-2's layout (pre-LN, learned positions, tanh GELU, unscaled tied
embeddings) trained briefly by aiayn and exported as a `GPT2LMHeadModel`
(`aiayn export huggingface`). Then

    aiayn lm train --text tinyshakespeare/input.txt --init-from SOURCE_HF --out FT

imports it and fine-tunes it. Reported: the run's validation loss before training
(`init_val_loss`, aiayn), the same loss computed by Transformers on the same validation windows
(must agree within 1e-3), and the validation loss after fine-tuning (must be lower).

    python benchmarks/finetune_lm.py     # writes benchmarks/results/finetune_lm.json
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dates import cpu_model

RESULTS = Path(__file__).resolve().parent / "results" / "finetune_lm.json"
TEXT = "tinyshakespeare/input.txt"
GPT2_LAYOUT = ["model.norm_first=true", "model.positional=learned", "model.activation=gelu_new",
               "model.scale_embedding=false", "model.dropout=0.0"]
COMMON = ["train.precision=fp32", "train.progress=none", "train.threads=2"]
SOURCE_STEPS, FINETUNE_STEPS = 300, 200


def aiayn(*args: str) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "aiayn", *args], check=True)
    return time.perf_counter() - started


def sets(values: list[str]) -> list[str]:
    return [arg for value in values for arg in ("--set", value)]


def transformers_loss(hf_dir: Path, run_dir: Path) -> float:
    """Transformers' mean next-token loss over the fine-tuning run's validation windows."""
    from transformers import GPT2LMHeadModel

    from aiayn.data.special_tokens import SpecialTokens
    from aiayn.data.tokenizer import Tokenizer
    from aiayn.formats import read_model_json
    from aiayn.lm.run import prepare_lm_data
    from aiayn.model.config import ModelConfig
    from aiayn.tasks import load_config

    specials = SpecialTokens.of(ModelConfig.from_dict(read_model_json(run_dir)["config"]))
    tokenizer = Tokenizer.load(run_dir / "tokenizer.json", specials)
    data = prepare_lm_data(load_config(run_dir / "train_config.yaml").data, tokenizer)
    model = GPT2LMHeadModel.from_pretrained(hf_dir).eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for batch in data.valid.batches(8192, shuffle=False):
            logits = model(batch.inputs).logits
            keep = batch.labels != batch.pad_id
            loss = torch.nn.functional.cross_entropy(logits[keep], batch.labels[keep], reduction="sum")
            total += float(loss)
            count += int(keep.sum())
    return total / count


def main() -> None:
    root = Path(tempfile.mkdtemp())
    source, source_hf, finetuned = root / "source", root / "source-hf", root / "finetuned"
    source_settings = [*GPT2_LAYOUT, *COMMON, f"train.max_steps={SOURCE_STEPS}", "train.eval_every=300"]
    source_seconds = aiayn("lm", "train", "--text", TEXT, "--out", str(source), *sets(source_settings))
    aiayn("export", "huggingface", "--model", str(source), "--out", str(source_hf))
    seconds = aiayn("lm", "train", "--text", TEXT, "--init-from", str(source_hf), "--out", str(finetuned),
                    *sets([*COMMON, f"train.max_steps={FINETUNE_STEPS}", "train.eval_every=100",
                           "train.lr=0.001", "train.warmup=20"]))
    results = json.loads((finetuned / "results.json").read_text())
    reference = transformers_loss(source_hf, finetuned)
    report = {
        "command": f"aiayn lm train --text {TEXT} --init-from SOURCE_HF --out FT "
                   f"--set train.max_steps={FINETUNE_STEPS} ...",
        "source": f"aiayn lm train, GPT-2 layout ({', '.join(GPT2_LAYOUT)}), {SOURCE_STEPS} steps, "
                  "exported with aiayn export huggingface (GPT2LMHeadModel)",
        "source_train_seconds": round(source_seconds, 1),
        "init_val_loss": round(results["init_val_loss"], 5),
        "transformers_val_loss": round(reference, 5),
        "difference": abs(results["init_val_loss"] - reference),
        "final_val_loss": round(results["val_loss"], 5),
        "steps": results["steps"],
        "train_minutes": round(results["train_minutes"], 2),
        "command_seconds": round(seconds, 1),
        "params": results["params"],
        "cpu_model": cpu_model(),
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
