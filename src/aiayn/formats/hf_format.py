"""Import from Hugging Face Transformers: the reverse of `aiayn export huggingface`.

    import_huggingface("Helsinki-NLP/opus-mt-en-de", "models/en-de")   # or a local directory

A `MarianMTModel` (OPUS-MT) becomes our `Transformer`, a `GPT2LMHeadModel` our pre-LN
`DecoderOnlyLM`, through the same weight mapping the export uses (`aiayn.formats.hf_mapping`),
applied backwards. Their settings become `ModelConfig` fields: Marian's SiLU ("swish"), its
`final_logits_bias` (`output_bias`), its decoder that starts with `<pad>` (`bos_id = pad_id`),
GPT-2's tanh GELU ("gelu_new"), its unscaled embeddings (`scale_embedding: false`) and learned
positions. A setting our model cannot represent is refused with the field named; nothing is
approximated. The tokenizers come along: OPUS-MT's `source.spm` / `target.spm` + `vocab.json`
(`aiayn.data.sentencepiece_tokenizer`), or a fast tokenizer's `tokenizer.json`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from torch import nn

from aiayn.core.errors import ConfigError, first_line
from aiayn.core.files import output_directory
from aiayn.core.optional import require
from aiayn.data.special_tokens import SpecialTokens
from aiayn.data.tokenizer import Tokenizer, TokenizerPair
from aiayn.formats.hf_mapping import (
    Rule,
    feature_order,
    gpt2_rules,
    marian_translation_rules,
    to_ours,
)
from aiayn.formats.model_dir import is_model_dir, save_pretrained
from aiayn.model.config import ModelConfig
from aiayn.model.positional_encoding import sinusoidal_table

log = logging.getLogger(__name__)

HUB_NAME = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")
SUPPORTED = ("marian", "gpt2")
TARGET_SUBFOLDER = "target_tokenizer"
"""Where an exported or imported Marian directory keeps its target-side fast tokenizer."""
"""The `model_type`s of a Hugging Face `config.json` that can be imported."""

_ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "gelu_new": "gelu_new", "gelu_pytorch_tanh": "gelu_new",
                "swish": "swish", "silu": "swish"}


def hf_model_type(path: Path) -> str | None:
    """The `model_type` of a Hugging Face model directory, or None when `path` is not one."""
    try:
        data = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data.get("model_type") if isinstance(data, dict) and "config" not in data else None


def resolve_source(source: str | Path, argument: str = "SOURCE") -> Path:
    """A local directory, or a Hub name downloaded (offline: `ConfigError`, one line)."""
    path = Path(source)
    if path.exists():
        if not path.is_dir():
            raise ConfigError(f"{argument} {source}: not a directory")
        return path
    if not HUB_NAME.match(str(source)):
        raise ConfigError(f"{argument} {source}: no such directory, and not a Hugging Face Hub name")
    require("huggingface_hub", f"{argument} {source} (a Hugging Face Hub name)")
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(str(source)))
    except Exception as error:  # offline, unknown repository, no permission: one line
        detail = first_line(error)
        raise ConfigError(
            f"{argument} {source}: not a local directory, and it cannot be downloaded from the Hugging Face "
            f"Hub ({type(error).__name__}: {detail[:200]})"
        ) from None


# ------------------------------------------------------------------ configs
def _same(hf_config: Any, first: str, second: str) -> Any:
    a, b = getattr(hf_config, first), getattr(hf_config, second)
    if a != b:
        raise ConfigError(
            f"aiayn cannot represent {first}={a!r} != {second}={b!r} (one value for both stacks)"
        )
    return a


def _activation(name: str, field: str) -> str:
    if name not in _ACTIVATIONS:
        raise ConfigError(f"aiayn cannot represent {field}={name!r}; supported: {', '.join(_ACTIVATIONS)}")
    return _ACTIVATIONS[name]


def _refuse_unless(hf_config: Any, **expected: Any) -> None:
    for field, value in expected.items():
        actual = getattr(hf_config, field, value)
        if actual != value:
            raise ConfigError(f"aiayn cannot represent {field}={actual!r} (it needs {value!r})")


def marian_config(hf_config: Any, unk_id: int | None) -> ModelConfig:
    """Our `ModelConfig` for a `MarianConfig` (fields we cannot represent are refused); whether
    it has a logits bias (`output_bias`) is up to its weights (`final_logits_bias` not zero)."""
    if hf_config.d_model % 2:
        raise ConfigError(
            f"aiayn cannot represent an odd d_model={hf_config.d_model} with sinusoidal positions"
        )
    _refuse_unless(hf_config, normalize_before=False, add_final_layer_norm=False, normalize_embedding=False)
    if hf_config.decoder_start_token_id is None:
        raise ConfigError("the Marian config has no decoder_start_token_id")
    vocab_size = hf_config.vocab_size
    return ModelConfig(
        src_vocab_size=vocab_size,
        tgt_vocab_size=hf_config.decoder_vocab_size or vocab_size,
        d_model=hf_config.d_model,
        num_heads=_same(hf_config, "encoder_attention_heads", "decoder_attention_heads"),
        num_encoder_layers=hf_config.encoder_layers,
        num_decoder_layers=hf_config.decoder_layers,
        d_ff=_same(hf_config, "encoder_ffn_dim", "decoder_ffn_dim"),
        dropout=hf_config.dropout,
        attention_dropout=hf_config.attention_dropout,
        activation_dropout=hf_config.activation_dropout,
        max_len=hf_config.max_position_embeddings,
        norm_first=False,
        positional="sinusoidal",
        activation=_activation(hf_config.activation_function, "activation_function"),
        scale_embedding=bool(hf_config.scale_embedding),
        share_embeddings=bool(getattr(hf_config, "share_encoder_decoder_embeddings", True)),
        tie_output=bool(getattr(hf_config, "tie_word_embeddings", True)),
        pad_id=hf_config.pad_token_id,
        bos_id=hf_config.decoder_start_token_id,
        eos_id=hf_config.eos_token_id,
        unk_id=unk_id,
        layer_norm_eps=1e-5,
    )


def gpt2_config(hf_config: Any) -> ModelConfig:
    """Our `ModelConfig` for a `GPT2Config` (fields we cannot represent are refused)."""
    _refuse_unless(hf_config, scale_attn_weights=True, scale_attn_by_inverse_layer_idx=False,
                   add_cross_attention=False)
    if hf_config.embd_pdrop != hf_config.resid_pdrop:
        raise ConfigError(
            f"aiayn cannot represent embd_pdrop={hf_config.embd_pdrop} != resid_pdrop={hf_config.resid_pdrop}"
        )
    eos = hf_config.eos_token_id
    if eos is None:
        raise ConfigError("the GPT-2 config has no eos_token_id")
    vocab_size = hf_config.vocab_size
    return ModelConfig(
        src_vocab_size=vocab_size,
        tgt_vocab_size=vocab_size,
        d_model=hf_config.n_embd,
        num_heads=hf_config.n_head,
        num_encoder_layers=0,
        num_decoder_layers=hf_config.n_layer,
        d_ff=hf_config.n_inner or 4 * hf_config.n_embd,
        dropout=hf_config.resid_pdrop,
        attention_dropout=hf_config.attn_pdrop,
        max_len=hf_config.n_positions,
        norm_first=True,
        positional="learned",
        activation=_activation(hf_config.activation_function, "activation_function"),
        scale_embedding=False,
        output_bias=False,
        tie_output=bool(getattr(hf_config, "tie_word_embeddings", True)),
        # GPT-2 has no padding token: <|endoftext|> pads (language-model windows hold no padding)
        pad_id=hf_config.pad_token_id if hf_config.pad_token_id is not None else eos,
        bos_id=hf_config.bos_token_id if hf_config.bos_token_id is not None else eos,
        eos_id=eos,
        unk_id=None,
        layer_norm_eps=hf_config.layer_norm_epsilon,
    )


# ------------------------------------------------------------------ weights
def load_mapped(model: nn.Module, rules: list[Rule], theirs: dict[str, torch.Tensor],
                order: torch.Tensor | None, ignored: tuple[str, ...]) -> None:
    """Fill `model` from their tensors by `rules`; every tensor of ours must be given, and every
    tensor of theirs used (except names ending with one of `ignored`, computed ones)."""
    shapes = {name: tensor.shape for name, tensor in model.state_dict().items()}
    try:
        state = to_ours(rules, theirs, shapes, order)
    except ValueError as error:
        raise ConfigError(f"aiayn cannot represent this model: {error}") from None
    used = {rule.theirs for rule in rules}
    unused = [n for n in theirs if n not in used and not n.endswith(ignored)]
    if unused:
        raise ConfigError(f"aiayn cannot represent the tensor {unused[0]!r} (no counterpart in its model)")
    covered = {id(p) for name, p in model.state_dict(keep_vars=True).items() if name in state}
    buffers = {name for name, _ in model.named_buffers()}
    for name, tensor in model.state_dict(keep_vars=True).items():
        if id(tensor) not in covered and name not in buffers:
            raise RuntimeError(f"internal mapping error: {name} is not given by the mapping")
    with torch.no_grad():
        params = dict(model.state_dict(keep_vars=True))
        for name, tensor in state.items():
            if torch.isnan(tensor).any():
                raise RuntimeError(f"internal mapping error: {name} is only partly given")
            params[name].copy_(tensor)


def import_huggingface(source: str | Path, out: str | Path, overwrite: bool = False) -> Path:
    """Write the aiayn model directory `out` from a Marian or GPT-2 checkpoint `source` (a
    Transformers directory or a Hub name); its model card names the source."""
    require("transformers", "aiayn import huggingface")
    directory = resolve_source(source)
    model_type = hf_model_type(directory)
    if is_model_dir(directory):
        raise ConfigError(f"SOURCE {source} is already an aiayn model directory")
    if model_type not in SUPPORTED:
        raise ConfigError(
            f"SOURCE {source}: model_type {model_type!r} cannot be imported; "
            f"supported: {', '.join(SUPPORTED)} "
            "(MarianMTModel, GPT2LMHeadModel)"
        )
    model, tokenizers = (_import_marian if model_type == "marian" else _import_gpt2)(directory)
    model.config.extra["imported_from"] = str(source)
    from aiayn.formats.model_card import write_model_card

    with output_directory(out, overwrite) as tmp:
        save_pretrained(model, tmp)
        tokenizers.save(tmp)
        write_model_card(tmp, source=str(source), name=Path(out).name)
    log.info("wrote %s (%s from %s)", out, type(model).__name__, source)
    return Path(out)


@contextlib.contextmanager
def quiet_transformers() -> Iterator[None]:
    """No progress bars or notices from transformers while it builds and saves the model."""
    from transformers.utils import logging as hf_logging

    verbosity, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()


def _import_marian(directory: Path) -> tuple[nn.Module, TokenizerPair]:
    from transformers import MarianConfig, MarianMTModel

    from aiayn.data.sentencepiece_tokenizer import MARIAN_VOCAB, has_marian_pair, read_vocab
    from aiayn.model.transformer import Transformer

    if (directory / "target_vocab.json").is_file():
        raise ConfigError(
            f"{directory}: aiayn cannot represent separate_vocabs (target_vocab.json): its "
            "SentencePiece pair shares one vocab.json"
        )
    spm = has_marian_pair(directory)
    if not spm and not (directory / "tokenizer.json").is_file():
        raise ConfigError(
            f"{directory}: a Marian model needs its tokenizer: source.spm, target.spm and {MARIAN_VOCAB} "
            "(OPUS-MT), or a tokenizer.json (aiayn export huggingface)"
        )
    hf_config = MarianConfig.from_pretrained(directory)
    with quiet_transformers():
        fast = None if spm else _fast_tokenizers(directory)
    unk = read_vocab(directory / MARIAN_VOCAB).get("<unk>") if spm else fast[0].unk_token_id
    config = marian_config(hf_config, unk)  # refuses what aiayn cannot represent before any loading
    with quiet_transformers():
        hf_model = MarianMTModel.from_pretrained(directory).eval()
    theirs = hf_model.state_dict()
    config = dataclasses.replace(config, output_bias=bool(theirs["final_logits_bias"].any()))
    model = Transformer(config).eval()
    order = feature_order(config.d_model)
    _check_positions(theirs, sinusoidal_table(config.max_len, config.d_model)[:, order])
    load_mapped(model, marian_translation_rules(config), theirs, order,
                ignored=("embed_positions.weight", "final_logits_bias"))
    specials = SpecialTokens.of(config)
    if spm:
        tokenizers = TokenizerPair.load(directory, specials)
    else:
        origin = f"{directory} tokenizer"
        source, target = (Tokenizer(t.backend_tokenizer, specials, origin=origin) for t in fast)
        tokenizers = TokenizerPair(source, source if fast[0] is fast[1] else target)
    tokenizers.source.check_fits(config.src_vocab_size, "the model's source embedding")
    tokenizers.target.check_fits(config.tgt_vocab_size, "the model's target embedding")
    return model, tokenizers


def _check_positions(theirs: dict[str, torch.Tensor], table: torch.Tensor) -> None:
    """Marian's position tables must be the sinusoidal table our model computes."""
    for name, tensor in theirs.items():
        if name.endswith("embed_positions.weight") and not torch.allclose(tensor.float(), table, atol=1e-5):
            raise ConfigError(f"aiayn cannot represent {name}: it is not the sinusoidal table of Sec. 3.5")


def _fast_tokenizers(directory: Path) -> tuple[Any, Any]:
    """The source and target fast tokenizers of an `aiayn export huggingface` directory."""
    from transformers import AutoTokenizer

    source = AutoTokenizer.from_pretrained(directory)
    target = source
    if (directory / TARGET_SUBFOLDER).is_dir():
        target = AutoTokenizer.from_pretrained(directory, subfolder=TARGET_SUBFOLDER)
    return source, target


def _import_gpt2(directory: Path) -> tuple[nn.Module, TokenizerPair]:
    from transformers import AutoTokenizer, GPT2Config, GPT2LMHeadModel

    from aiayn.model.decoder_only import DecoderOnlyLM

    hf_config = GPT2Config.from_pretrained(directory)
    config = gpt2_config(hf_config)
    with quiet_transformers():
        hf_model = GPT2LMHeadModel.from_pretrained(directory).eval()
        try:
            fast = AutoTokenizer.from_pretrained(directory)
        except (OSError, ValueError, TypeError) as error:
            detail = str(error).splitlines()[0][:200] if str(error) else type(error).__name__
            raise ConfigError(f"{directory}: no readable tokenizer ({detail})") from None
    model = DecoderOnlyLM(config).eval()
    load_mapped(model, gpt2_rules(config), hf_model.state_dict(), None,
                ignored=(".attn.bias", ".masked_bias"))
    if not getattr(fast, "is_fast", False):
        raise ConfigError(f"{directory}: the GPT-2 tokenizer has no fast (tokenizer.json) form")
    tokenizer = Tokenizer(fast.backend_tokenizer, SpecialTokens.of(config), origin=f"{directory} tokenizer")
    tokenizer.check_fits(config.tgt_vocab_size, "the model's embedding")
    return model, TokenizerPair(tokenizer, tokenizer)
