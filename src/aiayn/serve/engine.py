"""Decoding engines: what the service asks of a model, behind one small interface.

The service talks to an `Engine` only: it counts tokens (for the length limits and the
batching bound), translates a batch of sentences, generates a continuation, and draws
attention. `load_engine(directory)` picks the engine for a model directory: aiayn's own
PyTorch decoder (`TranslationEngine.load`, `LMEngine`) for a directory written by
`save_pretrained`. Another engine plugs in by implementing the same methods and being returned
by `load_engine`; a translator with aiayn's `Translator` interface (as CTranslate2's for an
exported directory, recognised by its `model.bin`) only needs wrapping in `TranslationEngine`.

Engines are not thread-safe: the service calls the decoding methods from its one worker
thread only (`aiayn.serve.batching`). `count_tokens` and `info` only read the tokenizers
and may be called from any thread.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import torch

from aiayn.errors import CheckpointError, ConfigError
from aiayn.model.config import ModelConfig

TASKS = ("translation", "lm")


class EngineUnsupported(ConfigError):
    """The engine cannot do what was asked (e.g. attention maps from CTranslate2)."""


class Engine(Protocol):
    """The interface between the service and a model.

    Attributes:
        name: the engine, as /v1/model and /health report it ('aiayn', 'ctranslate2').
        task: 'translation' (source sentences -> n-best translations) or 'lm' (a prompt
            -> a sampled continuation).
        max_input_tokens: the most tokens `count_tokens` may give for one text.
    """

    name: str
    task: str
    max_input_tokens: int

    def info(self) -> dict[str, Any]:
        """What /v1/model reports: task, languages, sizes, parameters, special tokens."""
        ...

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Tokens the model reads for each text (a source with its `<eos>`, or a prompt)."""
        ...

    def translate(
        self, texts: Sequence[str], beam: int, alpha: float, nbest: int, batch_tokens: int
    ) -> list[list[tuple[str, float]]]:
        """For each text up to `nbest` (translation, score) pairs, best first; `batch_tokens`
        bounds the padded source tokens of one decoding pass."""
        ...

    def generate(
        self,
        prompt: str,
        max_new_tokens: int,
        temperature: float,
        top_k: int | None,
        top_p: float | None,
        seed: int | None,
    ) -> str:
        """The continuation of `prompt` (without the prompt)."""
        ...

    def attention(self, text: str, beam: int = 4) -> dict[str, Any]:
        """One `aiayn.explorer.sentence_entry` for `text` (its translation with beam size
        `beam`, for a translation model), as the attention view draws it."""
        ...


def special_tokens(config: ModelConfig, id_to_token) -> dict[str, dict[str, Any] | None]:
    """The special-token ids of the model config, with their token strings."""
    ids = {"pad": config.pad_id, "bos": config.bos_id, "eos": config.eos_id, "unk": config.unk_id}
    return {name: None if i is None else {"id": i, "token": id_to_token(i)} for name, i in ids.items()}


def model_sizes(config: ModelConfig) -> dict[str, Any]:
    """The sizes /v1/model reports."""
    return {
        "d_model": config.d_model,
        "num_heads": config.num_heads,
        "num_encoder_layers": config.num_encoder_layers,
        "num_decoder_layers": config.num_decoder_layers,
        "d_ff": config.d_ff,
        "max_len": config.max_len,
        "src_vocab_size": config.src_vocab_size,
        "tgt_vocab_size": config.tgt_vocab_size,
    }


def read_languages(directory: Path) -> dict[str, str] | None:
    """Source and target language of a translation model when its training config names them
    (`train_config.yaml` beside the model: data.src_lang / data.tgt_lang of a Multi30k run)."""
    import yaml

    path = directory / "train_config.yaml"
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    section = data.get("data") if isinstance(data, dict) else None
    if not isinstance(section, dict) or section.get("task") != "multi30k":
        return None
    source, target = section.get("src_lang"), section.get("tgt_lang")
    if isinstance(source, str) and isinstance(target, str):
        return {"source": source, "target": target}
    return None


class TranslationEngine:
    """A translation engine on any translator with aiayn's `Translator` interface
    (`translate_hypotheses`, `tokenizers`): aiayn's own (`TranslationEngine.load`), or another
    engine's translator of the same interface (e.g. CTranslate2's, with `name='ctranslate2'`).

    Args:
        translator: the translator.
        config: the model's `ModelConfig` (max_len, sizes, special-token ids).
        name: the engine's name.
        parameters: the number of model parameters (None when unknown).
        directory: the model directory (for the languages of its training config).
        device: where it runs, as /v1/model reports it.
    """

    task = "translation"

    def __init__(
        self, translator: Any, config: ModelConfig, name: str, parameters: int | None, directory: Path,
        device: str,
    ) -> None:
        self.translator = translator
        self.name = name
        self.max_input_tokens = config.max_len  # the sentence's tokens + <eos>
        self._info = {
            "engine": name,
            "task": self.task,
            "languages": read_languages(directory),
            "sizes": model_sizes(config),
            "parameters": parameters,
            "special_tokens": special_tokens(config, translator.tokenizers.target.id_to_token),
            "device": device,
        }

    @classmethod
    def load(cls, directory: str | Path, device: str | torch.device | None = None) -> TranslationEngine:
        """aiayn's own beam/greedy search (`aiayn.translator.Translator`) on a model directory."""
        from aiayn.translator import Translator

        translator = Translator.load(directory, device)
        parameters = sum(p.numel() for p in translator.model.parameters())
        config, where = translator.model.config, str(translator.device)
        return cls(translator, config, "aiayn", parameters, Path(directory), where)

    def info(self) -> dict[str, Any]:
        return self._info

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        if not texts:
            return []
        encoded = self.translator.tokenizers.source.encode_batch(list(texts))
        return [len(ids) + 1 if text.strip() else 0 for text, ids in zip(texts, encoded, strict=True)]

    def translate(
        self, texts: Sequence[str], beam: int, alpha: float, nbest: int, batch_tokens: int
    ) -> list[list[tuple[str, float]]]:
        hypotheses = self.translator.translate_hypotheses(
            texts, beam=beam, alpha=alpha, nbest=nbest, batch_tokens=batch_tokens, on_long_line="error"
        )
        decode = self.translator.tokenizers.target.decode_batch
        flat = iter(decode([h.tokens for hyps in hypotheses for h in hyps]))
        return [[(next(flat), float(h.score)) for h in hyps] for hyps in hypotheses]

    def generate(self, prompt, max_new_tokens, temperature, top_k, top_p, seed) -> str:
        raise EngineUnsupported("this is a translation model; /v1/generate needs a language model")

    def attention(self, text: str, beam: int = 4) -> dict[str, Any]:
        from aiayn.explorer import sentence_entry
        from aiayn.plots.attention_data import attention_examples
        from aiayn.translator import Translator

        if not isinstance(self.translator, Translator):
            raise EngineUnsupported(f"the {self.name} engine gives no attention weights; serve the "
                                    "aiayn model directory to see them")
        example = attention_examples(self.translator, [text], beam=beam, where=["text"])[0]
        return sentence_entry(example)


class LMEngine:
    """aiayn's own sampling (`aiayn.lm.generate`) for a decoder-only model directory."""

    name = "aiayn"
    task = "lm"

    def __init__(self, directory: str | Path, device: str | torch.device | None = None) -> None:
        from aiayn.data.special_tokens import SpecialTokens
        from aiayn.data.tokenizer import JOINT_FILE, Tokenizer
        from aiayn.model.decoder_only import DecoderOnlyLM

        self.directory = Path(directory)
        if device is None:
            device = "cuda" if torch.cuda.is_available() else "cpu"
        self.model = DecoderOnlyLM.from_pretrained(directory, device=device)
        self.tokenizer = Tokenizer.load(self.directory / JOINT_FILE, SpecialTokens.of(self.model.config))
        config = self.model.config
        self.max_input_tokens = config.max_len
        self._info = {
            "engine": self.name,
            "task": self.task,
            "languages": None,
            "sizes": model_sizes(config),
            "parameters": sum(p.numel() for p in self.model.parameters()),
            "special_tokens": special_tokens(config, self.tokenizer.id_to_token),
            "device": str(device),
        }

    def info(self) -> dict[str, Any]:
        return self._info

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return [len(ids) for ids in self.tokenizer.encode_batch(list(texts))] if texts else []

    def translate(self, texts, beam, alpha, nbest, batch_tokens) -> list[list[tuple[str, float]]]:
        raise EngineUnsupported("this is a language model; /v1/translate needs a translation model")

    def generate(
        self,
        prompt: str,
        max_new_tokens: int,
        temperature: float,
        top_k: int | None,
        top_p: float | None,
        seed: int | None,
    ) -> str:
        from aiayn.lm.generate import generate

        config = self.model.config
        prompt_ids = self.tokenizer.encode(prompt) or [config.bos_id]
        ids = generate(
            self.model, prompt_ids, max_new_tokens, temperature, top_k, top_p, seed, stop_ids=(config.eos_id,)
        )
        if ids and ids[-1] == config.eos_id:
            ids = ids[:-1]
        return self.tokenizer.decode(ids)

    def attention(self, text: str, beam: int = 4) -> dict[str, Any]:
        """The attention over `text` itself (`beam` plays no part: nothing is decoded)."""
        from aiayn.explorer import sentence_entry
        from aiayn.plots.attention_data import lm_attention_example

        return sentence_entry(lm_attention_example(self.model, self.tokenizer, text))


def load_engine(directory: str | Path, device: str | torch.device | None = None) -> Engine:
    """The engine for a model directory (`device` None: CUDA when available)."""
    from aiayn.model_dir import read_model_json

    directory = Path(directory)
    if not directory.is_dir():
        raise CheckpointError(f"--model {directory}: not a directory")
    if (directory / "model.bin").is_file():  # written by `aiayn export ctranslate2`
        from aiayn.export.engine import CTranslate2Translator

        translator = CTranslate2Translator(directory, str(device or "auto"))
        return TranslationEngine(
            translator, translator.config, "ctranslate2", None, directory, translator.device
        )
    model_type = read_model_json(directory)["model_type"]
    if model_type == "transformer":
        return TranslationEngine.load(directory, device)
    if model_type == "decoder_only":
        return LMEngine(directory, device)
    raise CheckpointError(
        f"{directory} holds a {model_type!r} model; the service serves translation models "
        "('transformer') and language models ('decoder_only')"
    )
