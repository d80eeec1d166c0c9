"""Model cards: the `README.md` of every model directory.

Written at the end of training (`aiayn train`, `aiayn lm train`, `aiayn classify train`) and
rewritten by `aiayn average` and `aiayn import huggingface`; `aiayn export huggingface` writes
it with the Hub's metadata header (`hub=True`: language, tags, metrics). Everything it says is
read from the directory itself, so it can never disagree with it:

- `config.json`: the task (model type), the model settings and where the weights came from
  (`config.extra["imported_from"]` / `["init_from"]`);
- `model.safetensors`: the parameter count (from its header);
- `train_config.yaml`: the languages, the data, the tokenizer setting;
- `results.json`: the results (with the sacreBLEU signature), pair counts, the hardware
  (`cpu_model`, `gpu`), the training time and the exact command.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import yaml

from aiayn.core.files import atomic_write_text

CARD_FILE = "README.md"
TASKS = {
    "transformer": "translation", "decoder_only": "language model", "encoder_only": "text classification",
}
HUB_TAGS = {
    "transformer": "translation", "decoder_only": "text-generation", "encoder_only": "text-classification",
}
DATA_KEYS = (
    "task", "train", "train_src", "train_tgt", "valid_src", "valid_tgt", "test_src", "test_tgt", "text_file",
)
LANGUAGE_TASKS = ("multi30k",)
"""The tasks whose `data.src_lang` / `data.tgt_lang` name the languages. The built-in tasks (dates,
copy, ...) have none, and `files` would show the settings' defaults (de, en) whatever the files
hold: its card names the files instead."""
TOKENIZER_FILES = ("tokenizer.json", "src_tokenizer.json", "tgt_tokenizer.json", "tokenizer.model",
                   "source.spm", "target.spm", "vocab.json")


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return {}
    return data if isinstance(data, dict) else {}


def parameter_count(directory: Path) -> int | None:
    """Number of stored parameters (tied ones once), from the safetensors header."""
    from aiayn.core.errors import CheckpointError
    from aiayn.formats import WEIGHTS_FILE, read_weights_header

    try:
        header = read_weights_header(directory / WEIGHTS_FILE)
    except CheckpointError:
        return None
    return sum(math.prod(t.shape) for t in header.values())


def card_fields(directory: str | Path, source: str | None = None) -> dict[str, Any]:
    """What the card says, as a dict (the tests check it against the files)."""
    directory = Path(directory)
    model_json = _read_json(directory / "config.json")
    config = model_json.get("config", {})
    extra = config.get("extra") or {}
    results = _read_json(directory / "results.json")
    train = _read_yaml(directory / "train_config.yaml")
    data = train.get("data") or {}
    model_type = model_json.get("model_type", "")
    files = [name for name in TOKENIZER_FILES if (directory / name).is_file()]
    test = results.get("test") or {}
    return {
        "task": TASKS.get(model_type, model_type),
        "model_type": model_type,
        "languages": [lang for lang in (data.get("src_lang"), data.get("tgt_lang")) if lang]
        if data.get("task") in LANGUAGE_TASKS else [],
        "data": {k: data[k] for k in DATA_KEYS if data.get(k)},
        "pairs": {k: v for k, v in results.items() if k.endswith("_pairs") or k.startswith("num_")},
        "tokenizer": data.get("tokenizer") or ", ".join(files),
        "tokenizer_files": files,
        "model_settings": {k: v for k, v in config.items() if k != "extra"},
        "parameters": parameter_count(directory),
        "results": {k: v for k, v in results.items() if k in ("val_loss", "best_metric", "accuracy")} | (
            {f"test_{k}": v for k, v in test.items() if isinstance(v, int | float | str)} if test else {}
        ),
        "sacrebleu_signature": test.get("signature"),
        "cpu_model": results.get("cpu_model"),
        "gpu": results.get("gpu"),
        "train_minutes": results.get("train_minutes"),
        "command": results.get("command"),
        "weights_from": (
            source or extra.get("averaged_from") or extra.get("init_from") or extra.get("imported_from")
            or "random initialisation"
        ),
    }


def _hub_header(fields: dict[str, Any]) -> str:
    metrics = [name for name in ("bleu", "chrf", "exact_match") if f"test_{name}" in fields["results"]]
    header = {
        "library_name": "transformers",
        "language": fields["languages"] or None,
        "tags": ["aiayn", HUB_TAGS.get(fields["model_type"], fields["task"])],
        "metrics": metrics or None,
        "pipeline_tag": HUB_TAGS.get(fields["model_type"]),
    }
    header = {k: v for k, v in header.items() if v}
    return "---\n" + yaml.safe_dump(header, sort_keys=False) + "---\n\n"


def render_card(fields: dict[str, Any], name: str, hub: bool = False) -> str:
    """The card's Markdown text."""
    lines = [f"# {name}", "", f"An aiayn {fields['task']} model (`{fields['model_type']}`).", ""]
    rows = [
        ("Task", fields["task"]),
        ("Languages", " -> ".join(fields["languages"]) or "-"),
        ("Data", json.dumps(fields["data"]) if fields["data"] else "-"),
        ("Pairs after filtering", json.dumps(fields["pairs"]) if fields["pairs"] else "-"),
        ("Tokenizer", f"{fields['tokenizer']} ({', '.join(fields['tokenizer_files'])})"),
        ("Parameters", f"{fields['parameters']:,}" if fields["parameters"] is not None else "-"),
        ("Weights from", fields["weights_from"]),
        ("Hardware", f"CPU {fields['cpu_model'] or '-'}; GPU {fields['gpu'] or 'none'}"),
        ("Training time", "-" if fields["train_minutes"] is None else f"{fields['train_minutes']:.1f} min"),
        ("Command", f"`{fields['command']}`" if fields["command"] else "-"),
    ]
    lines += ["| | |", "|---|---|", *(f"| {k} | {v} |" for k, v in rows), ""]
    if fields["results"]:
        lines += ["## Results", "", *(f"- {k}: {v}" for k, v in fields["results"].items())]
        if fields["sacrebleu_signature"]:
            lines.append(f"- sacreBLEU signature: `{fields['sacrebleu_signature']}`")
        lines.append("")
    settings = ", ".join(f"{k}={v}" for k, v in fields["model_settings"].items())
    lines += ["## Model settings", "", settings, "", "## Load it", ""]
    if fields["model_type"] == "transformer":
        lines += ["```python", "import aiayn", f"aiayn.load({name!r}).translate(['...'])", "```", "",
                  f"CTranslate2: `aiayn export ctranslate2 --model {name} --out {name}-ct2`, then "
                  "`ctranslate2.Translator`.", "",
                  f"Transformers: `aiayn export huggingface --model {name} --out {name}-hf`, then "
                  "`AutoModelForSeq2SeqLM.from_pretrained`.", ""]
    elif fields["model_type"] == "decoder_only":
        lines += [f"`aiayn lm generate --model {name} --text '...'`", "",
                  f"CTranslate2: `aiayn export ctranslate2 --model {name} --out {name}-ct2` "
                  "(`ctranslate2.Generator`); "
                  f"Transformers: `aiayn export huggingface` (`AutoModelForCausalLM`).", ""]
    else:
        lines += [f"`aiayn classify predict --model {name}`", ""]
    return (_hub_header(fields) if hub else "") + "\n".join(lines)


def write_model_card(directory: str | Path, source: str | None = None, hub: bool = False,
                     fields: dict[str, Any] | None = None, name: str | None = None) -> Path:
    """Write (atomically) `directory/README.md` from the directory's own files (or `fields`,
    those of another directory: an export's source); `name` titles it (default: the directory's)."""
    directory = Path(directory)
    fields = fields or card_fields(directory, source)
    path = directory / CARD_FILE
    atomic_write_text(path, render_card(fields, name or directory.name or "model", hub))
    return path
