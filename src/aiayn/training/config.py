"""Training configuration: YAML files validated into dataclasses.

A config has three sections, `data`, `model` and `train`. An unknown key anywhere is a
`ConfigError` listing the valid keys; any field can be overridden on the command line with
a dotted path (`--set train.max_steps=200`, the value parsed as YAML; a string field takes the
text as written). Each field is declared once, with `aiayn.core.settings.setting`: its type, default,
range or choices and help text side by side (the module docstring of `aiayn.core.settings` says how to
add one); the dataclasses check themselves, so an error names the field and what it allows
(`train.lr must be a finite number > 0, got nan`). The `model` section's overrides are
`ModelConfig` fields, declared and checked the same way in `aiayn.model.config`.

The `data` section's fields depend on the task: this module builds a config from the task's
settings class (a `DataSettings` subclass, `aiayn.training.data_settings`) that it is given;
`aiayn.tasks` finds that class for a `data.task` name, and its `load_config` is what the
commands call.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from aiayn.core.errors import ConfigError
from aiayn.core.progress_display import PROGRESS_MODES
from aiayn.core.ranges import NON_NEGATIVE, NON_NEGATIVE_INT, POSITIVE, POSITIVE_INT, PROBABILITY, Range
from aiayn.core.settings import check_settings, setting, text_value, validate
from aiayn.data.special_tokens import check_special_token_names
from aiayn.model.config import PRESETS, ModelConfig
from aiayn.training.data_settings import DataSettings

log = logging.getLogger(__name__)


@dataclass
class ModelSection:
    """`preset` plus any `ModelConfig` field to override.

    Vocabulary sizes come from the tokenizer; `vocab_size` is never set here.
    """

    preset: str = setting(
        "small", choices=(*PRESETS, "auto"),
        help="the sizes to start from (Table 3); 'auto': by the corpus and the tokens the run will see",
    )
    overrides: dict[str, Any] = setting(default_factory=dict, help="ModelConfig fields, checked by it")

    def __post_init__(self) -> None:
        validate(self, "model")


@dataclass
class TrainConfig:
    """Optimisation, budgets, validation and checkpointing.

    With `max_minutes` set and `schedule_follows_budget` (the default), the learning-rate decay
    follows the clock as well as the steps, progress = max(step / max_steps, elapsed / budget),
    so that it ends inside the budget on a slow machine too (`aiayn.training.schedule`); the
    learning rate then depends on wall-clock time, and runs are no longer bit-reproducible
    (see `aiayn.training.trainer`). `precision: auto` measures fp32 against bf16 at start-up
    (`aiayn.training.precision`). `warmup` and `eval_every` are steps, or a share of the run
    such as '6%' (`aiayn.training.progress`; declared with `share=True`).
    """

    max_steps: int | None = setting(None, range=POSITIVE_INT, help="stop after this many steps")
    max_epochs: int | None = setting(None, range=POSITIVE_INT, help="stop after this many epochs")
    max_minutes: float | None = setting(None, range=POSITIVE, help="stop after this much wall-clock time")
    schedule_follows_budget: bool = setting(True, help="the learning-rate decay follows the clock too")
    batch_tokens: int | str = setting(
        4096, range=POSITIVE_INT, auto=True,
        help="padded positions per batch, at most; 'auto': 3000 or 1500 by the updates the budget allows "
        "(on a CUDA GPU: the largest of 3000..65536 that fits in memory and still gives enough updates)",
    )
    accumulate: int = setting(1, range=POSITIVE_INT, help="batches per optimiser step")
    schedule: str = setting(
        "noam", choices=("noam", "inverse_sqrt", "cosine", "constant"), help="learning-rate schedule"
    )
    lr_scale: float = setting(1.0, range=POSITIVE, help="factor on the noam schedule (Sec. 5.3)")
    lr: float = setting(1e-3, range=POSITIVE, help="peak learning rate of inverse_sqrt, cosine, constant")
    min_lr: float = setting(0.0, range=NON_NEGATIVE, help="learning rate at the end of the decay")
    warmup: int | str = setting(
        4000, range=NON_NEGATIVE_INT, share=True, auto=True,
        help="warmup steps ('noam' needs >= 1), or a share of the run such as '6%' (needs max_steps); "
        "'auto': by the updates the run will reach",
    )
    label_smoothing: float = setting(0.1, range=PROBABILITY, help="epsilon_ls (Sec. 5.4)")
    adam_beta1: float = setting(0.9, range=PROBABILITY, help="Adam beta_1 (Sec. 5.3)")
    adam_beta2: float = setting(0.98, range=PROBABILITY, help="Adam beta_2 (Sec. 5.3)")
    adam_eps: float = setting(1e-9, range=POSITIVE, help="Adam epsilon (Sec. 5.3)")
    weight_decay: float = setting(0.0, range=NON_NEGATIVE, help="AdamW weight decay")
    clip_grad_norm: float | None = setting(1.0, range=POSITIVE, help="gradient norm clip (None: off)")
    precision: str = setting(
        "auto", choices=("auto", "fp32", "bf16", "tf32", "fp16"),
        help="'bf16'/'fp16': autocast (fp16 with a gradient scaler; CUDA only), 'tf32': fp32 tensors, TF32 "
        "matmuls (CUDA only); 'auto': the fastest this device offers, measured at start-up "
        "(aiayn.training.precision)"
    )
    compile: str = setting(
        "auto", choices=("auto", "true", "false"),
        help="forward, loss and backward under torch.compile; 'auto': on a GPU, where a start-up timing says "
        "it pays over the run's budget, compile time included; eager on a CPU (aiayn.training.compiled_step)",
    )
    device: str = setting(
        "auto", help="'cpu', 'cuda', 'cuda:1', 'mps'...; 'auto' is CUDA when available, else the CPU"
    )
    dist_backend: str = setting(
        "auto", choices=("auto", "gloo", "nccl"), help="under torchrun: 'auto' is nccl on CUDA, else gloo"
    )
    threads: int | None = setting(None, range=POSITIVE_INT, help="CPU threads (None: PyTorch's choice)")
    seed: int = setting(1, range=NON_NEGATIVE_INT, help="seed of initialisation, dropout and batch order")
    log_every: int = setting(50, range=POSITIVE_INT, help="steps between log lines")
    eval_every: int | str = setting(
        500, range=POSITIVE_INT, share=True, auto=True,
        help="steps between validations and checkpoints, or a share of the run such as '6%'; 'auto': by "
        "the updates the run will reach",
    )
    keep_checkpoints: int = setting(5, range=POSITIVE_INT, help="checkpoints kept (for averaging, Sec. 6.1)")
    early_stopping_patience: int | None = setting(
        None, range=POSITIVE_INT, help="validations without improvement before stopping (None: never)"
    )
    validation_metric: str = setting(
        "loss", help="the metric that picks the best model (checked against the task's metrics)"
    )
    bleu_max_sentences: int | str | None = setting(
        500, range=NON_NEGATIVE_INT, auto=True,
        help="validation sentences decoded for BLEU (None: all; 'auto': by the time a validation may take)",
    )
    bleu_beam: int = setting(1, range=POSITIVE_INT, help="beam size of validation decoding")
    bleu_time_share: float | None = setting(
        0.1, range=Range(low=0, high=1, low_open=True),
        help="validations may take this share of the training time, all together: BLEU decoding stops "
        "early (after 200 sentences) where it would pass it, and says so (None: no cap; "
        "aiayn.translation.validation)",
    )
    bleu_max_len_extra: int | str = setting(
        "auto", range=NON_NEGATIVE_INT, auto=True,
        help="validation outputs stop at source + this many tokens; 'auto': by the references' lengths "
        "(99th percentile of reference - source, + 5, at most 50: aiayn.translation.validation)",
    )
    test_max_sentences: int | None = setting(
        None, range=NON_NEGATIVE_INT, help="test sentences decoded at the end (None: all)"
    )
    test_beam: int = setting(4, range=POSITIVE_INT, help="beam size of the final test (Sec. 6.1)")
    test_alpha: float = setting(0.6, range=Range(low=0, high=10), help="length penalty alpha (Sec. 6.1)")
    max_bad_steps: int = setting(10, range=POSITIVE_INT, help="consecutive non-finite steps before stopping")
    progress: str = setting(
        "auto", choices=PROGRESS_MODES,
        help="progress on stderr: 'bar' (redrawn in place), 'plain' (a line every progress_every_s "
        "seconds, no carriage returns: for log files), 'none'; 'auto': a bar on a terminal, else plain "
        "(aiayn.core.progress_display; the old key progress_bar: true/false still works, with a warning)",
    )
    progress_every_s: float = setting(
        30.0, range=POSITIVE, help="seconds between two lines of plain progress (train.progress: plain)"
    )
    init_from: str | None = setting(
        None, help="start from this model's weights, settings and tokenizer (--init-from): an aiayn model "
        "directory, a Transformers directory or a Hub name; optimizer, schedule and step start fresh"
    )
    freeze: list[str] = setting(
        default_factory=list, help="parameter groups trained with no gradient and no optimizer state: "
        "embeddings, encoder, decoder, encoder.layers.0-2, ..."
    )
    implementation: str = setting(
        "engine", choices=("engine", "paper"),
        help="what trains a translation model: 'engine' (aiayn.model) or 'paper' (aiayn.paper's forward, "
        "loss and greedy decoding, through aiayn.translation.paper_adapter); the model directory is the same",
    )
    report_to: list[str] = setting(
        default_factory=list, help="run trackers besides metrics.jsonl: tensorboard, wandb"
    )

    def __post_init__(self) -> None:
        if isinstance(self.compile, bool):  # YAML's `compile: true`
            self.compile = "true" if self.compile else "false"
        validate(self, "train")
        for key in ("freeze", "report_to"):
            value = getattr(self, key)
            if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
                raise ConfigError(f"train.{key} must be a list of names, got {value!r}")
        unknown = [name for name in self.report_to if name not in REPORT_TO]
        if unknown:
            choices = ", ".join(REPORT_TO)
            raise ConfigError(f"train.report_to: unknown tracker {unknown[0]!r}; choose from {choices}")
        if self.schedule == "noam" and isinstance(self.warmup, int) and self.warmup < 1:
            raise ConfigError(f"train.warmup must be >= 1 for the noam schedule, got {self.warmup}")
        if isinstance(self.warmup, str) and self.warmup != "auto" and self.max_steps is None:
            raise ConfigError(f"train.warmup {self.warmup} is a share of the run: set train.max_steps")
        if self.eval_every != "auto" and isinstance(self.eval_every, str) and self.max_steps is None \
                and self.max_minutes is None:
            raise ConfigError(
                f"train.eval_every {self.eval_every} is a share of the run: set train.max_minutes"
            )


REPORT_TO = ("tensorboard", "wandb")
"""The run trackers `train.report_to` can name."""


@dataclass
class RunConfig:
    """The whole training configuration, as written to `train_config.yaml` (the `data` section:
    the fields of the task's settings class)."""

    data: DataSettings
    model: ModelSection = field(default_factory=ModelSection)
    train: TrainConfig = field(default_factory=TrainConfig)

    def to_dict(self) -> dict[str, Any]:
        model = {"preset": self.model.preset, **self.model.overrides}
        return {
            "data": dataclasses.asdict(self.data),
            "model": model,
            "train": dataclasses.asdict(self.train),
        }

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False)


AUTO_MODEL_KEYS = {"dropout": "by the epochs the run will reach (`aiayn.training.auto_rules.DROPOUT_RULE`)"}
"""`model` settings that may be 'auto' -> what 'auto' chooses: chosen at start-up from the corpus and
the machine's speed (`aiayn.training.auto_settings`); a number wins. `ModelConfig` itself takes
numbers only; the `train` section's say `auto=True`."""

TOKENIZER_IDS = ("pad_id", "bos_id", "eos_id", "unk_id")
"""`ModelConfig` fields that the tokenizer sets (`data.special_tokens` names them instead)."""


def _check_keys(data: dict[Any, Any], where: str) -> None:
    """Every key of a config mapping must be a name (YAML also allows numbers, null, lists...)."""
    for key in data:
        if not isinstance(key, str):
            raise ConfigError(f"{where}: key {key!r} is not a name (keys must be strings)")


def _build(cls: type, data: Any, where: str) -> Any:
    """`cls` from one section's mapping: unknown keys are an error listing the valid ones; the
    values are checked by the dataclass itself (`aiayn.core.settings.validate`)."""
    if not isinstance(data, dict):
        raise ConfigError(f"{where} must be a mapping, got {data!r}")
    _check_keys(data, where)
    names = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(data) - set(names))
    if unknown:
        raise ConfigError(
            f"unknown key(s) {', '.join(where + '.' + k for k in unknown)}; "
            f"valid keys in {where}: {', '.join(names)}"
        )
    return cls(**data)


def _model_section(data: Any) -> ModelSection:
    """The `model` section: a preset and `ModelConfig` overrides, checked as the model will see
    them (the vocabulary sizes and special-token ids come from the tokenizer later)."""
    if not isinstance(data, dict):
        raise ConfigError(f"model must be a mapping, got {data!r}")
    model = dict(data)
    _check_keys(model, "model")
    preset = model.pop("preset", "small")
    valid = {f.name for f in dataclasses.fields(ModelConfig)} - {"src_vocab_size", "tgt_vocab_size"}
    from_tokenizer = sorted(set(model) & set(TOKENIZER_IDS))
    if from_tokenizer:
        raise ConfigError(
            f"{', '.join('model.' + k for k in from_tokenizer)}: the special-token ids come from the "
            "tokenizer; name the tokens in data.special_tokens instead"
        )
    valid -= set(TOKENIZER_IDS)
    bad = sorted(set(model) - valid)
    if bad:
        raise ConfigError(
            f"unknown key(s) {', '.join('model.' + k for k in bad)}; valid keys in model: "
            f"preset, {', '.join(sorted(valid))}"
        )
    auto = {name for name, value in model.items() if name in AUTO_MODEL_KEYS and value == "auto"}
    numbers = check_settings(ModelConfig, {k: v for k, v in model.items() if k not in auto}, "model")
    section = ModelSection(preset=preset, overrides={**numbers, **dict.fromkeys(sorted(auto), "auto")})
    try:  # what relates two fields (d_model divisible by num_heads); 'auto' is checked as the size it times
        ModelConfig.preset("small" if section.preset == "auto" else section.preset, **numbers)
    except (TypeError, ValueError) as error:
        raise ConfigError(f"model: {error}") from None
    return section


def check_sections(data: Any) -> dict[str, Any]:
    """A config mapping (as read from YAML; None is empty) whose keys are known section names."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"a config must be a mapping with data/model/train sections, got {data!r}")
    _check_keys(data, "config")
    unknown = sorted(set(data) - {"data", "model", "train"})
    if unknown:
        raise ConfigError(f"unknown section(s) {', '.join(unknown)}; valid sections: data, model, train")
    return data


def data_section(data: dict[str, Any]) -> dict[str, Any]:
    """The `data` mapping of a checked config mapping (empty when absent), its keys names."""
    section = data.get("data") or {}
    if not isinstance(section, dict):
        raise ConfigError(f"data must be a mapping, got {section!r}")
    _check_keys(section, "data")
    return section


def build_config(data: Any, data_settings: type[DataSettings]) -> RunConfig:
    """Validate a nested dict (as read from YAML) into a `RunConfig` whose `data` section is
    `data_settings` (the task's class: `aiayn.tasks.config_from_dict` finds it)."""
    data = check_sections(data)
    config = RunConfig(
        data=_build(data_settings, data_section(data), "data"),
        model=_model_section(data.get("model") or {}),
        train=_build(TrainConfig, renamed_train_keys(data.get("train") or {}), "train"),
    )
    config.data.special_tokens = check_special_token_names(config.data.special_tokens) or None
    return config


def renamed_train_keys(train: Any) -> Any:
    """The `train` mapping with its old keys read as their new ones, with a warning each:
    `progress_bar: true/false` is `progress: auto/none`."""
    if not isinstance(train, dict) or "progress_bar" not in train:
        return train
    train = dict(train)
    old = train.pop("progress_bar")
    if not isinstance(old, bool):
        raise ConfigError(f"train.progress_bar must be bool, got {old!r} (it is now train.progress)")
    if "progress" in train:
        raise ConfigError("give train.progress or the old train.progress_bar, not both")
    train["progress"] = "auto" if old else "none"
    log.warning(
        "train.progress_bar is now train.progress (auto|bar|plain|none): read as train.progress=%s",
        train["progress"],
    )
    return train


def apply_overrides(
    data: dict[str, Any], overrides: list[str], data_settings: type[DataSettings] = DataSettings
) -> dict[str, Any]:
    """Apply `section.key=value` overrides to a nested dict: the value is read as YAML, except
    that a string field (of `data_settings` for the `data` section) takes the text as written
    (`data.src_lang=no`)."""
    sections: dict[str, type] = {"data": data_settings, "model": ModelConfig, "train": TrainConfig}
    for section, value in (data or {}).items():
        if value is not None and not isinstance(value, dict):
            raise ConfigError(f"section {section!r} must be a mapping of keys to values, got {value!r}")
    data = {k: dict(v or {}) for k, v in (data or {}).items()}
    for item in overrides:
        section, key, raw, value = parse_override(item)
        cls = ModelSection if (section, key) == ("model", "preset") else sections.get(section)
        data.setdefault(section, {})[key] = text_value(cls, key, raw, value) if cls else value
    return data


def parse_override(item: str) -> tuple[str, str, str, Any]:
    """`section.key=value` as (section, key, the value's text, the value read as YAML)."""
    if "=" not in item:
        raise ConfigError(f"--set expects section.key=value, got {item!r}")
    path, raw = item.split("=", 1)
    parts = path.strip().split(".")
    if len(parts) != 2:
        raise ConfigError(f"--set expects a dotted path section.key, got {path!r}")
    try:
        value = yaml.safe_load(raw)
    except yaml.YAMLError as error:
        raise ConfigError(f"--set {item!r}: value is not valid YAML ({error})") from None
    return parts[0], parts[1], raw, value


def read_yaml(path: str | Path) -> dict[str, Any]:
    """Read a YAML config file; errors name the file."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file {path} does not exist")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (ValueError, yaml.YAMLError, RecursionError) as error:  # ValueError: bad UTF-8, bad dates
        raise ConfigError(f"{path}: not a valid YAML file ({error})") from None
    except OSError as error:
        raise ConfigError(f"cannot read config file {path}: {error}") from None
    if data is not None and not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping with data/model/train sections")
    return data or {}
