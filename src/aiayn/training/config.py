"""Training configuration: YAML files validated into dataclasses.

A config has three sections, `data`, `model` and `train`. An unknown key anywhere is a
`ConfigError` listing the valid keys; any field can be overridden on the command line with
a dotted path (`--set train.max_steps=200`, the value parsed as YAML). Every number is checked
against its `RANGES` entry (finite, within bounds), the error naming the field (`train.lr`).
"""

from __future__ import annotations

import dataclasses
import logging
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from aiayn.data.special_tokens import check_special_token_names
from aiayn.errors import ConfigError
from aiayn.training.config_ranges import RANGES
from aiayn.training.progress import parse_share

log = logging.getLogger(__name__)


@dataclass
class DataConfig:
    """Where the sentence pairs come from and how they are tokenized.

    `task` is a built-in synthetic task ('copy', 'reverse', 'dates'), 'multi30k' (read from
    `multi30k/` under the data root), or 'files' (the `train_src`/`train_tgt`/... paths).
    `aiayn lm` uses task 'text' (`text_file`, `block_size`, `stride`, `valid_fraction`; see
    `aiayn.lm`); `aiayn classify` uses 'brackets' or 'tsv' (`train_tsv`, `valid_tsv`,
    `valid_fraction`; see `aiayn.classify`). A relative `text_file`/`*_tsv`/`*_src`/`*_tgt` path
    that does not exist under the working directory is looked up under the data root.

    `max_sentence_tokens` bounds one example in tokens: translation drops pairs with a longer
    source or target, the classifier cuts longer texts (and it is the length limit of the
    brackets task). It is not `model.max_len`, the length of the positional table.

    `tokenizer` is a kind to train ('bpe', 'char', 'byte_bpe'), a Hugging Face `tokenizer.json`
    (or a directory holding one), or a Hugging Face Hub name such as 'gpt2' (see
    `aiayn.data.tokenizer_spec`); `special_tokens` names the pad/bos/eos/unk tokens of a loaded
    one (see `aiayn.data.special_tokens`).
    """

    task: str = "dates"
    seed: int = 1
    num_train: int = 50000
    num_valid: int = 1000
    num_test: int = 1000
    src_lang: str = "de"
    tgt_lang: str = "en"
    download: bool = False
    train_src: str | None = None
    train_tgt: str | None = None
    valid_src: str | None = None
    valid_tgt: str | None = None
    test_src: str | None = None
    test_tgt: str | None = None
    tokenizer: str = "bpe"
    special_tokens: dict[str, str | None] | None = None
    vocab_size: int = 8000
    joint_vocab: bool = True
    max_sentence_tokens: int = 128
    text_file: str | None = None
    block_size: int = 256
    stride: int | None = None
    valid_fraction: float = 0.1
    train_tsv: str | None = None
    valid_tsv: str | None = None


@dataclass
class ModelSection:
    """`preset` ('tiny', 'small', 'base', 'big') plus any `ModelConfig` field to override.

    Vocabulary sizes come from the tokenizer; `vocab_size` is never set here.
    """

    preset: str = "small"
    overrides: dict[str, Any] = field(default_factory=dict)


@dataclass
class TrainConfig:
    """Optimisation, budgets, validation and checkpointing.

    With `max_minutes` set and `schedule_follows_budget` (the default), the learning-rate decay
    follows the clock as well as the steps, progress = max(step / max_steps, elapsed / budget),
    so that it ends inside the budget on a slow machine too (`aiayn.training.schedule`); the
    learning rate then depends on wall-clock time, and runs are no longer bit-reproducible
    (see `aiayn.training.trainer`). `precision: auto` measures fp32 against bf16 at start-up
    (`aiayn.training.precision`). `warmup` and `eval_every` are steps, or a share of the run
    such as '6%' (`aiayn.training.progress`; listed in `SHARES`).
    """

    max_steps: int | None = None
    max_epochs: int | None = None
    max_minutes: float | None = None
    schedule_follows_budget: bool = True
    batch_tokens: int = 4096
    accumulate: int = 1
    schedule: str = "noam"
    lr_scale: float = 1.0
    lr: float = 1e-3
    min_lr: float = 0.0
    warmup: int | str = 4000
    label_smoothing: float = 0.1
    adam_beta1: float = 0.9
    adam_beta2: float = 0.98
    adam_eps: float = 1e-9
    weight_decay: float = 0.0
    clip_grad_norm: float | None = 1.0
    precision: str = "auto"
    device: str = "auto"
    dist_backend: str = "auto"  # under torchrun: 'nccl' on CUDA, 'gloo' on CPU ('auto'), or forced
    threads: int | None = None
    seed: int = 1
    log_every: int = 50
    eval_every: int | str = 500
    keep_checkpoints: int = 5
    early_stopping_patience: int | None = None
    validation_metric: str = "loss"
    bleu_max_sentences: int | None = 500
    bleu_beam: int = 1
    test_max_sentences: int | None = None
    test_beam: int = 4
    test_alpha: float = 0.6
    max_bad_steps: int = 10
    progress_bar: bool = True


@dataclass
class RunConfig:
    """The whole training configuration, as written to `train_config.yaml`."""

    data: DataConfig = field(default_factory=DataConfig)
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


CHOICES = {
    ("train", "schedule"): ("noam", "inverse_sqrt", "cosine", "constant"),
    ("train", "precision"): ("auto", "fp32", "bf16"),
    ("train", "dist_backend"): ("auto", "gloo", "nccl"),
}
# `train.validation_metric` is checked against the task's metrics (`aiayn.training.task`).

SHARES = {("train", "warmup"), ("train", "eval_every")}
"""Step counts that may also be a share of the run, '6%' (see `aiayn.training.progress`)."""
AUTO_KEYS = {("model", "dropout")}
"""Settings that may be 'auto': chosen at start-up from the machine's speed
(`aiayn.training.regularisation`)."""

TOKENIZER_IDS = ("pad_id", "bos_id", "eos_id", "unk_id")
"""`ModelConfig` fields that the tokenizer sets (`data.special_tokens` names them instead)."""

DEPRECATED_KEYS = {("data", "max_len"): "max_sentence_tokens"}
"""Old spellings of renamed keys, (section, old key) -> new key: still read, with a warning."""


def _current_key(section: str, key: str) -> str:
    """`key`, or its new name when it is a deprecated spelling (logging a warning)."""
    new = DEPRECATED_KEYS.get((section, key))
    if new is None:
        return key
    log.warning("config key %s.%s is deprecated; it is now called %s.%s", section, key, section, new)
    return new


def _rename_deprecated(data: dict[str, Any], section: str) -> dict[str, Any]:
    """`data` (one section) with deprecated keys under their new names; both given is an error."""
    renamed: dict[str, Any] = {}
    for key, value in data.items():
        current = _current_key(section, key) if isinstance(key, str) else key
        if current != key and current in data:
            raise ConfigError(
                f"{section}.{key} and {section}.{current} are the same setting ({section}.{key} is "
                f"its deprecated name); give only {section}.{current}"
            )
        renamed[current] = value
    return renamed


def _check_range(section: str, name: str, value: Any) -> None:
    allowed = RANGES.get((section, name))
    if allowed is not None and value is not None:
        allowed.check(f"{section}.{name}", value)


def _check_type(where: str, value: Any, annotation: Any) -> Any:
    """Check (and gently coerce int -> float) one value against a field annotation."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(annotation)
        if value is None and type(None) in options:
            return None
        annotation = next(a for a in options if a is not type(None))
    if annotation is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if annotation is float and isinstance(value, str):
        try:  # PyYAML reads "5e-4" (no dot) as a string
            return float(value)
        except ValueError:
            pass
    basic = annotation in (int, float, str, bool)
    if basic and (not isinstance(value, annotation) or (annotation is int and isinstance(value, bool))):
        raise ConfigError(f"{where} must be {annotation.__name__}, got {value!r}")
    return value


def _check_keys(data: dict[Any, Any], where: str) -> None:
    """Every key of a config mapping must be a name (YAML also allows numbers, null, lists...)."""
    for key in data:
        if not isinstance(key, str):
            raise ConfigError(f"{where}: key {key!r} is not a name (keys must be strings)")


def _build(cls: type, data: Any, where: str) -> Any:
    if not isinstance(data, dict):
        raise ConfigError(f"{where or 'config'} must be a mapping, got {data!r}")
    _check_keys(data, where or "config")
    data = _rename_deprecated(data, where)
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(data) - set(names))
    if unknown:
        raise ConfigError(
            f"unknown key(s) {', '.join(where + '.' + k if where else k for k in unknown)}; "
            f"valid keys{' in ' + where if where else ''}: {', '.join(names)}"
        )
    kwargs = {}
    for name, value in data.items():
        path = f"{where}.{name}" if where else name
        if (where, name) in SHARES and parse_share(path, value) is not None:
            kwargs[name] = value.strip()
            continue
        kwargs[name] = _check_type(path, value, hints[name])
        _check_range(where, name, kwargs[name])
        choices = CHOICES.get((where, name))
        if choices and kwargs[name] not in choices:
            raise ConfigError(f"{path} must be one of {', '.join(choices)}; got {value!r}")
    return cls(**kwargs)


def config_from_dict(data: dict[str, Any]) -> RunConfig:
    """Validate a nested dict (as read from YAML) into a `RunConfig`."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"a config must be a mapping with data/model/train sections, got {data!r}")
    _check_keys(data, "config")
    unknown = sorted(set(data) - {"data", "model", "train"})
    if unknown:
        raise ConfigError(f"unknown section(s) {', '.join(unknown)}; valid sections: data, model, train")
    if not isinstance(data.get("model") or {}, dict):
        raise ConfigError(f"model must be a mapping, got {data['model']!r}")
    model = dict(data.get("model") or {})
    _check_keys(model, "model")
    preset = model.pop("preset", "small")
    from aiayn.model import ModelConfig  # the valid override names are ModelConfig's fields

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
    hints = typing.get_type_hints(ModelConfig)
    for name, value in model.items():  # "1e-6" (a YAML string) -> 1e-6, then the range
        if ("model", name) in AUTO_KEYS and value == "auto":
            continue
        model[name] = _check_type(f"model.{name}", value, hints[name])
        _check_range("model", name, model[name])
    numbers = {k: v for k, v in model.items() if v != "auto" or ("model", k) not in AUTO_KEYS}
    try:  # types and ranges, as the model will see them (vocabulary sizes come later)
        ModelConfig.preset(preset, **numbers)
    except (TypeError, ValueError) as error:
        raise ConfigError(f"model: {error}") from None
    config = RunConfig(
        data=_build(DataConfig, data.get("data") or {}, "data"),
        model=ModelSection(preset=preset, overrides=model),
        train=_build(TrainConfig, data.get("train") or {}, "train"),
    )
    train = config.train
    if train.schedule == "noam" and isinstance(train.warmup, int) and train.warmup < 1:
        raise ConfigError(f"train.warmup must be >= 1 for the noam schedule, got {train.warmup}")
    if isinstance(train.warmup, str) and train.max_steps is None:
        raise ConfigError(f"train.warmup {train.warmup} is a share of the run: set train.max_steps")
    if isinstance(train.eval_every, str) and train.max_steps is None and train.max_minutes is None:
        raise ConfigError(f"train.eval_every {train.eval_every} is a share of the run: set train.max_minutes")
    if not config.data.tokenizer.strip():
        raise ConfigError("data.tokenizer must be bpe, char, byte_bpe, a tokenizer.json path or a Hub name")
    config.data.special_tokens = check_special_token_names(config.data.special_tokens) or None
    return config


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply `section.key=value` overrides (value parsed as YAML) to a nested dict."""
    for section, value in (data or {}).items():
        if value is not None and not isinstance(value, dict):
            raise ConfigError(f"section {section!r} must be a mapping of keys to values, got {value!r}")
    data = {k: _rename_deprecated(dict(v or {}), k) for k, v in (data or {}).items()}
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"--set expects section.key=value, got {item!r}")
        path, raw = item.split("=", 1)
        parts = path.strip().split(".")
        if len(parts) != 2:
            raise ConfigError(f"--set expects a dotted path section.key, got {path!r}")
        section, key = parts[0], _current_key(*parts)
        try:
            value = yaml.safe_load(raw)
        except yaml.YAMLError as error:
            raise ConfigError(f"--set {item!r}: value is not valid YAML ({error})") from None
        data.setdefault(section, {})[key] = value
    return data


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


def load_config(path: str | Path | None, overrides: list[str] = ()) -> RunConfig:
    """Read `path` (the built-in `dates` config when None), apply overrides, validate."""
    data = read_yaml(path) if path is not None else read_yaml(default_config_path())
    try:
        return config_from_dict(apply_overrides(data, list(overrides)))
    except ConfigError as error:
        raise ConfigError(f"{path or default_config_path()}: {error}") from None


def default_config_path() -> Path:
    """The embedded default config: the built-in `dates` task."""
    return Path(__file__).resolve().parent.parent / "configs" / "dates.yaml"
