"""Start a run from a trained model (`--init-from SOURCE`, `train.init_from`): fine-tuning.

SOURCE is an aiayn model directory (a finished run directory is one), a Hugging Face
Transformers directory (`MarianMTModel`, `GPT2LMHeadModel`; imported into the run directory's
`init_from/` first, `aiayn.formats.hf_format`) or a Hub name (downloaded; offline, a one-line
error). From SOURCE come:

- the weights, and the model settings: a `model.*` key of the run's config that contradicts
  the source's value is a `ConfigError` naming the key (the dropouts alone may change: they
  are a training setting, not part of the weights);
- the tokenizer: the data is encoded with it, so the vocabulary is the model's as-is, never
  resized; a `data.tokenizer` file other than the source's is a `ConfigError` (a trained kind,
  `char` or `bpe`, is not used and the log says so).

The optimizer, the schedule, the step counter and the best score start fresh (it is a new run,
not `--resume`). The model's `config.json` keeps the source in `extra.init_from`, and
`results.json` in `init_from`.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torch import nn

from aiayn.core.errors import CheckpointError, ConfigError
from aiayn.data.special_tokens import SpecialTokens
from aiayn.data.tokenizer_spec import is_trained_kind
from aiayn.formats import ModelDirectory, is_model_dir, load_weights, read_model_dir
from aiayn.model.config import ModelConfig

log = logging.getLogger(__name__)

IMPORT_DIR = "init_from"
"""Where a Transformers SOURCE is imported, inside the run directory."""

TRAINING_KEYS = ("dropout", "attention_dropout", "activation_dropout")
"""`model.*` keys a fine-tuning run may set differently from its source."""


@dataclass
class InitSource:
    """A resolved `--init-from`: the aiayn model directory the run starts from."""

    source: str
    record: ModelDirectory
    """The source directory as the one reader read it (`aiayn.formats.read_model_dir`)."""

    @property
    def directory(self) -> Path:
        return self.record.path

    @property
    def model_json(self) -> dict[str, Any]:
        return self.record.model_json

    @property
    def config(self) -> ModelConfig:
        return self.record.config

    @property
    def model_type(self) -> str:
        return self.record.model_type

    @property
    def specials(self) -> SpecialTokens:
        return SpecialTokens.of(self.config)

    @classmethod
    def resolve(cls, source: str, run_dir: Path) -> InitSource:
        """Read SOURCE; a Transformers directory or Hub name is imported into `run_dir`."""
        path = Path(source)
        if path.is_dir() and is_model_dir(path):
            directory = path
        else:  # a Transformers checkpoint, imported by the code of `aiayn import huggingface`
            from aiayn.formats.hf_format import hf_model_type, import_huggingface, resolve_source

            if path.exists() and not (path.is_dir() and hf_model_type(path)):
                raise ConfigError(
                    f"--init-from {source}: not a model directory (no aiayn or Transformers config.json)"
                )
            resolve_source(source, "--init-from")  # an offline Hub name fails here, in one line
            directory = import_huggingface(source, run_dir / IMPORT_DIR, overwrite=True)
        try:
            record = read_model_dir(directory)
        except CheckpointError as error:
            raise ConfigError(f"--init-from {source}: {error}") from None
        return cls(str(source), record)

    # ---------------------------------------------------------------- checks
    def check_task(self, model_type: str, command: str) -> None:
        if self.model_type != model_type:
            raise ConfigError(
                f"--init-from {self.source} holds a {self.model_type!r} model; `{command}` trains "
                f"{model_type!r} models"
            )

    def check_data_tokenizer(self, spec: str) -> None:
        """`data.tokenizer` may name only the source's tokenizer (or a kind, then unused)."""
        if is_trained_kind(spec):
            log.info("data.tokenizer %r not used: the tokenizer comes from --init-from %s", spec, self.source)
            return
        if Path(spec).resolve() not in (self.directory.resolve(), *self.directory.resolve().iterdir()):
            raise ConfigError(
                f"data.tokenizer {spec} contradicts --init-from {self.source}: the tokenizer comes from the "
                "source model; drop data.tokenizer"
            )

    def check_tokenizer(self, tokenizer: Any) -> None:
        """The source's tokenizer(s) must fit its embeddings (`DataError` naming the file)."""
        source, target = (tokenizer.source, tokenizer.target) if hasattr(tokenizer, "source") else (
            tokenizer, tokenizer)
        if self.model_type == "transformer":
            source.check_fits(self.config.src_vocab_size, f"the source embedding of {self.source}")
        target.check_fits(self.config.tgt_vocab_size, f"the embedding of {self.source}")

    def check_labels(self, labels: list[str] | None) -> None:
        """A classifier's labels must be its source's, in the same order (one output each)."""
        source_labels = self.config.extra.get("labels")
        if labels is not None and source_labels is not None and list(labels) != list(source_labels):
            raise ConfigError(
                f"the data's labels {list(labels)} are not those of --init-from {self.source} "
                f"({list(source_labels)}); a classifier keeps its output layer"
            )

    def model_config(self, overrides: dict[str, Any]) -> ModelConfig:
        """The source's settings; a `model.*` key of the run config that contradicts one is a
        `ConfigError` naming it (the dropouts may change)."""
        changes: dict[str, Any] = {}
        for key, value in overrides.items():
            if key == "extra":
                continue
            if key in TRAINING_KEYS:
                changes[key] = value
                continue
            names = ("src_vocab_size", "tgt_vocab_size") if key == "vocab_size" else (key,)
            for name in names:
                if not hasattr(self.config, name):
                    raise ConfigError(f"model.{key}: unknown ModelConfig field")
                if getattr(self.config, name) != value:
                    raise ConfigError(
                        f"model.{key}={value!r} contradicts --init-from {self.source} ({name}="
                        f"{getattr(self.config, name)!r}); drop model.{key} from the config"
                    )
        extra = {**self.config.extra, "init_from": self.source}
        return dataclasses.replace(self.config, **changes, extra=extra)

    # ---------------------------------------------------------------- the model
    def build(self, model_class: type[nn.Module], overrides: dict[str, Any]) -> nn.Module:
        """The source's model with its weights, settings as `model_config` gives them."""
        model = model_class(self.model_config(overrides), **self.record.extra)
        if not next(model.parameters()).is_meta:  # a layout (`meta_model`) needs no weights
            load_weights(model, self.record.weights_path, self.record.weights)
        return model


def _transformer() -> type[nn.Module]:
    from aiayn.model.transformer import Transformer

    return Transformer


def _decoder_only() -> type[nn.Module]:
    from aiayn.model.decoder_only import DecoderOnlyLM

    return DecoderOnlyLM


def _encoder_only() -> type[nn.Module]:
    from aiayn.model.encoder_only import EncoderOnly

    return EncoderOnly


MODEL_CLASSES = {"transformer": _transformer, "decoder_only": _decoder_only, "encoder_only": _encoder_only}
"""model_type -> (a function giving) the model class."""


# ------------------------------------------------------------------ freezing
GROUP_HELP = "embeddings, encoder, decoder, encoder.layers.0-2, decoder.layers.5, output_projection, ..."


def _prefixes(group: str) -> list[str]:
    """The parameter-name prefixes a freeze group stands for."""
    if group == "embeddings":
        return ["src_embedding.", "tgt_embedding.", "embedding.", "src_positional.", "tgt_positional.",
                "positional."]
    stack, _, layers = group.partition(".layers.")
    if layers:
        first, _, last = layers.partition("-")
        if not (first.isdigit() and (not last or last.isdigit())):
            return []
        return [f"{stack}.layers.{i}." for i in range(int(first), int(last or first) + 1)]
    return [f"{group}."]


def freeze(model: nn.Module, groups: list[str]) -> tuple[int, int]:
    """Turn off the gradient of every parameter in `groups` (`train.freeze`); returns
    (trainable, total) parameter counts. A group that names no parameter is a `ConfigError`.

    Layer ranges are inclusive (`encoder.layers.0-2`: layers 0, 1 and 2); every layer of a range
    must exist. A parameter tied to a frozen one (the output projection tied to the target
    embedding) is frozen with it: it is one tensor.
    """
    named = dict(model.named_parameters(remove_duplicate=False))
    names = list(named)
    for group in groups:
        prefixes = _prefixes(group)
        missing = [p for p in prefixes if ".layers." in p and not any(n.startswith(p) for n in names)]
        matched = [n for n in names if any(n.startswith(p) for p in prefixes)]
        if not matched or (missing and ".layers." in group):
            raise ConfigError(
                f"train.freeze: no parameter group {group!r} in this model; groups: {GROUP_HELP}"
            )
        for name in matched:
            named[name].requires_grad_(False)
    unique = {id(p): p for p in model.parameters()}.values()
    trainable = sum(p.numel() for p in unique if p.requires_grad)
    total = sum(p.numel() for p in unique)
    return trainable, total
