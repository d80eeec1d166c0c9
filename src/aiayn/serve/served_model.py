"""What the service needs to know of the model it serves, beside the inference interface.

The service decodes through `aiayn.inference` directly (`Translator.translate_nbest`,
`Generator.generate`, from its one worker thread: `aiayn.serve.batching`). `ServedModel`
adds what only the service asks: the task, the token counts behind its length limits, what
/v1/model reports, and the attention maps of the page's attention view.

`count_tokens` and `info` only read the tokenizers and may be called from any thread.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aiayn.core.errors import ConfigError
from aiayn.inference.interface import Generator, Translator
from aiayn.model.config import ModelConfig


class Unsupported(ConfigError):
    """The model cannot do what was asked (e.g. attention maps from CTranslate2)."""


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


EXAMPLE_INPUTS = {"translation": "Hello, world.", "lm": "Once upon a time"}
"""The page's input when the model directory gives no example of its own, by task."""


def example_input(task: str, directory: Path | None) -> str:
    """A text to fill the page's input box with: the first test example of the run that trained
    the model (`results.json`'s `examples`, written by `aiayn train`), else one for its task."""
    if directory is not None:
        try:
            examples = json.loads((directory / "results.json").read_text(encoding="utf-8")).get("examples")
            source = examples[0]["source"]
        except (OSError, ValueError, AttributeError, LookupError, TypeError):
            source = None
        if isinstance(source, str) and source.strip():
            return source
    return EXAMPLE_INPUTS[task]


class ServedModel:
    """A `Translator` or a `Generator` (from `aiayn.load`) as the service sees it.

    Attributes:
        model: the translator or generator; the service decodes with it directly.
        name: its runtime, as /v1/model and /health report it ('aiayn', 'ctranslate2').
        task: 'translation' (source sentences -> n-best translations) or 'lm' (a prompt
            -> a sampled continuation).
        max_input_tokens: the most tokens `count_tokens` may give for one text.
    """

    def __init__(self, model: Translator | Generator) -> None:
        self.model = model
        self.name = model.engine
        self.task = "translation" if isinstance(model, Translator) else "lm"
        config = model.config
        self.max_input_tokens = config.max_len  # a source's tokens + <eos>, or the whole prompt
        if isinstance(model, Translator):
            id_to_token = model.tokenizers.target.id_to_token
            languages = read_languages(model.directory) if model.directory is not None else None
        else:
            id_to_token, languages = model.tokenizer.id_to_token, None
        self._info = {
            "engine": self.name,
            "task": self.task,
            "languages": languages,
            "sizes": model_sizes(config),
            "parameters": model.parameters,
            "special_tokens": special_tokens(config, id_to_token),
            "device": str(model.device),
            "example": example_input(self.task, model.directory),
        }

    def info(self) -> dict[str, Any]:
        """What /v1/model reports: task, languages, sizes, parameters, special tokens, and an
        example input (the page starts with it)."""
        return self._info

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Tokens the model reads for each text (a source with its `<eos>`, or a prompt)."""
        if isinstance(self.model, Translator):
            return self.model.count_tokens(texts)
        return [len(ids) for ids in self.model.tokenizer.encode_batch(list(texts))] if texts else []

    def attention(self, text: str, beam: int = 4) -> dict[str, Any]:
        """One `aiayn.explorer.sentence_entry` for `text` (its translation with beam size
        `beam`, for a translation model; the attention over `text` itself for a language
        model), as the attention view draws it. Only aiayn's PyTorch models show attention."""
        from aiayn.explorer import sentence_entry
        from aiayn.inference import TorchGenerator, TorchTranslator
        from aiayn.plots.attention_data import attention_examples, lm_attention_example

        if isinstance(self.model, TorchTranslator):
            return sentence_entry(attention_examples(self.model, [text], beam=beam, where=["text"])[0])
        if isinstance(self.model, TorchGenerator):
            return sentence_entry(lm_attention_example(self.model.model, self.model.tokenizer, text))
        raise Unsupported(f"the {self.name} engine gives no attention weights; serve the aiayn model "
                          "directory to see them")
