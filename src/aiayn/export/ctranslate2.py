"""Export to CTranslate2, through its own specification API.

    export_ctranslate2("runs/multi30k", "runs/multi30k-ct2", quantization="int8")

A translation model becomes a `ctranslate2.specs.TransformerSpec` (run by
`ctranslate2.Translator`), a language model a `TransformerDecoderModelSpec`
(`ctranslate2.Generator`). Every aiayn weight has a place in the spec, with no
approximation:

- token embeddings, scaled by sqrt(d_model) (Sec. 3.4) as CTranslate2 does by default;
- positions: our own table (sinusoidal, Sec. 3.5, or learned) written into the spec, since
  CTranslate2's built-in sinusoid concatenates the sin and cos halves instead of
  interleaving them;
- attention: our fused [W^Q; W^K; W^V] `in_proj` is CTranslate2's fused self-attention
  projection as it is; cross-attention splits it into W^Q and [W^K; W^V];
- post-LN (the paper) or pre-LN with the final LayerNorm of each stack, and our epsilon;
- the output projection (tied or not), without bias.

Beside CTranslate2's `model.bin`, `config.json` and vocabulary files, the directory keeps
our model settings as `aiayn.json` and our tokenizer file(s) under their usual names, so
`aiayn translate --model OUT` (and `evaluate`, `score`, `lm generate`) run on CTranslate2.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import torch

from aiayn.core.decoding_choices import EXPORT_QUANTIZATIONS as QUANTIZATIONS
from aiayn.core.errors import CheckpointError, ConfigError
from aiayn.core.files import atomic_write_text
from aiayn.core.optional import require
from aiayn.decoding.common import never_generated
from aiayn.export.common import (
    ExportSource,
    load_source,
    output_directory,
    refuse_other_head_dim,
)
from aiayn.formats.ctranslate2_format import AIAYN_FILE, vocabulary
from aiayn.model.config import ModelConfig
from aiayn.model.positional_encoding import sinusoidal_table

log = logging.getLogger(__name__)



def export_ctranslate2(
    model_dir: str | Path, out: str | Path, quantization: str | None = None, overwrite: bool = False
) -> Path:
    """Convert the model directory `model_dir` into a CTranslate2 model directory `out`.

    Args:
        quantization: weight type: None (float32) or one of `QUANTIZATIONS`.
        overwrite: replace an existing `out` (only once the new directory is complete).
    """
    ctranslate2 = require("ctranslate2", "aiayn export ctranslate2")
    if quantization is not None and quantization not in QUANTIZATIONS:
        raise ConfigError(f"quantization must be one of {', '.join(QUANTIZATIONS)}, got {quantization!r}")
    source = load_source(model_dir)
    refuse_other_head_dim(source.config, "CTranslate2")
    converter_class = _converter_class(ctranslate2)
    with output_directory(out, overwrite) as tmp:
        converter_class(source).convert(str(tmp), quantization=quantization, force=True)
        atomic_write_text(tmp / AIAYN_FILE, json.dumps(source.model_json, indent=2) + "\n")
        source.tokenizers.save(tmp)
        atomic_write_text(tmp / "README.txt", readme(source, quantization))
    log.info("wrote %s (CTranslate2 %s, %s weights)", out, ctranslate2.__version__, quantization or "float32")
    return Path(out)


def _converter_class(ctranslate2):
    """`ctranslate2.converters.Converter` for an aiayn model (defined once the package is present)."""

    class AiaynConverter(ctranslate2.converters.Converter):
        """Builds the CTranslate2 spec of an aiayn model; `convert` validates and writes it."""

        def __init__(self, source: ExportSource) -> None:
            self.source = source

        def _load(self):
            if self.source.model_type == "transformer":
                return translation_spec(ctranslate2.specs, self.source)
            return language_model_spec(ctranslate2.specs, self.source)

    return AiaynConverter


# ------------------------------------------------------------------ specs
def translation_spec(specs, source: ExportSource):
    """The `TransformerSpec` of an encoder-decoder model."""
    config, weights = source.config, _weights(source)
    spec = specs.TransformerSpec.from_config(
        (config.num_encoder_layers, config.num_decoder_layers),
        config.num_heads,
        pre_norm=config.norm_first,
        activation=_activation(specs, config),
    )
    _set_stack(spec.encoder, weights, "encoder", "src", config, cross_attention=False)
    _set_stack(spec.decoder, weights, "decoder", "tgt", config, cross_attention=True)
    _set_projection(spec.decoder.projection, weights, config)

    tokenizers = source.tokenizers
    src_tokens = vocabulary(tokenizers.source, config.src_vocab_size, "source")
    tgt_tokens = vocabulary(tokenizers.target, config.tgt_vocab_size, "target")
    spec.register_source_vocabulary(src_tokens)
    spec.register_target_vocabulary(tgt_tokens)
    _set_special_tokens(spec.config, config, src_tokens, tgt_tokens)
    spec.config.decoder_start_token = tgt_tokens[config.bos_id]
    spec.config.add_source_bos = False
    spec.config.add_source_eos = True  # our translator ends every source with <eos>
    spec.config.layer_norm_epsilon = config.layer_norm_eps
    return spec


def language_model_spec(specs, source: ExportSource):
    """The `TransformerDecoderModelSpec` of a decoder-only language model."""
    config, weights = source.config, _weights(source)
    spec = specs.TransformerDecoderModelSpec.from_config(
        config.num_decoder_layers,
        config.num_heads,
        pre_norm=config.norm_first,
        activation=_activation(specs, config),
    )
    _set_stack(spec.decoder, weights, "decoder", "", config, cross_attention=False)
    _set_projection(spec.decoder.projection, weights, config)
    tokens = vocabulary(source.tokenizers.target, config.tgt_vocab_size, "language model")
    spec.register_vocabulary(tokens)
    _set_special_tokens(spec.config, config, tokens, tokens)
    spec.config.layer_norm_epsilon = config.layer_norm_eps
    return spec


def _weights(source: ExportSource) -> dict[str, torch.Tensor]:
    """Our parameters by name, float32, detached (tied weights appear under each name)."""
    return {name: t.detach().float().contiguous() for name, t in source.model.state_dict().items()}


def _activation(specs, config: ModelConfig):
    # F.gelu is the exact (erf) GELU, CTranslate2's GELU; gelu_new is its tanh approximation
    # (GELUTanh), swish is SiLU (SWISH), as Marian models use.
    Activation = specs.common_spec.Activation
    return {
        "relu": Activation.RELU, "gelu": Activation.GELU, "gelu_new": Activation.GELUTanh,
        "swish": Activation.SWISH,
    }[config.activation]


def _set_projection(projection, weights: dict[str, torch.Tensor], config: ModelConfig) -> None:
    """The pre-softmax projection, with its bias (`ModelConfig.output_bias`, Marian's) if any."""
    projection.weight = weights["output_projection.weight"]
    if config.output_bias:
        projection.bias = weights["output_projection.bias"]


def _set_special_tokens(
    spec_config, config: ModelConfig, src_tokens: list[str], tgt_tokens: list[str]
) -> None:
    """CTranslate2 names the special tokens once for both vocabularies (it appends `<eos>` to
    the source by name), so each must have the same name on both sides."""
    # A vocabulary without <unk> (byte-level BPE) never meets an unknown token: CTranslate2
    # would append one, so name <pad> instead, which is never produced either.
    unk_id = config.unk_id if config.unk_id is not None else config.pad_id
    for name, token_id in (("bos", config.bos_id), ("eos", config.eos_id), ("unk", unk_id)):
        if src_tokens[token_id] != tgt_tokens[token_id]:
            raise CheckpointError(
                f"the source and target vocabularies name the {name} token (id {token_id}) "
                f"differently ({src_tokens[token_id]!r}, {tgt_tokens[token_id]!r}); CTranslate2 "
                "needs one name"
            )
    spec_config.bos_token = tgt_tokens[config.bos_id]
    spec_config.eos_token = tgt_tokens[config.eos_id]
    spec_config.unk_token = tgt_tokens[unk_id]


def _position_table(weights: dict[str, torch.Tensor], prefix: str, config: ModelConfig) -> torch.Tensor:
    """(max_len, d_model) positions exactly as our model adds them."""
    if config.positional == "learned":
        return weights[f"{prefix}.embedding.weight"]
    return sinusoidal_table(config.max_len, config.d_model)


def _set_stack(spec, weights, stack: str, side: str, config: ModelConfig, cross_attention: bool) -> None:
    """Embeddings, positions, layers and final norm of one stack (`stack` = encoder/decoder)."""
    embedding = f"{side}_embedding" if side else "embedding"
    positional = f"{side}_positional" if side else "positional"
    embeddings = spec.embeddings[0] if isinstance(spec.embeddings, list) else spec.embeddings
    embeddings.weight = weights[f"{embedding}.embedding.weight"]
    spec.scale_embeddings = config.scale_embedding  # x sqrt(d_model), Sec. 3.4 (GPT-2 layout: off)
    spec.position_encodings.encodings = _position_table(weights, positional, config)
    if config.norm_first:
        _set_norm(spec.layer_norm, weights, f"{stack}.final_norm")
    d = config.d_model
    for i, layer in enumerate(spec.layer):
        prefix = f"{stack}.layers.{i}"
        _set_linear(layer.self_attention.linear[0], weights, f"{prefix}.self_attention.in_proj")
        _set_linear(layer.self_attention.linear[1], weights, f"{prefix}.self_attention.out_proj")
        _set_norm(layer.self_attention.layer_norm, weights,
                  f"{prefix}.{'self_' if stack == 'decoder' else ''}attention_sublayer.norm")
        if cross_attention:
            in_proj_w = weights[f"{prefix}.cross_attention.in_proj.weight"]
            in_proj_b = weights[f"{prefix}.cross_attention.in_proj.bias"]
            layer.attention.linear[0].weight = in_proj_w[:d].contiguous()  # W^Q
            layer.attention.linear[0].bias = in_proj_b[:d].contiguous()
            layer.attention.linear[1].weight = in_proj_w[d:].contiguous()  # [W^K; W^V]
            layer.attention.linear[1].bias = in_proj_b[d:].contiguous()
            _set_linear(layer.attention.linear[2], weights, f"{prefix}.cross_attention.out_proj")
            _set_norm(layer.attention.layer_norm, weights, f"{prefix}.cross_attention_sublayer.norm")
        _set_linear(layer.ffn.linear_0, weights, f"{prefix}.feed_forward.linear1")
        _set_linear(layer.ffn.linear_1, weights, f"{prefix}.feed_forward.linear2")
        _set_norm(layer.ffn.layer_norm, weights, f"{prefix}.feed_forward_sublayer.norm")


def _set_linear(spec, weights, name: str) -> None:
    spec.weight = weights[f"{name}.weight"]
    spec.bias = weights[f"{name}.bias"]


def _set_norm(spec, weights, name: str) -> None:
    spec.gamma = weights[f"{name}.weight"]
    spec.beta = weights[f"{name}.bias"]


# ------------------------------------------------------------------ README.txt
def readme(source: ExportSource, quantization: str | None) -> str:
    """The README.txt of an export: what it is, and a ready Python snippet."""
    config = source.config
    never = never_generated(config.pad_id, config.bos_id, config.eos_id)
    forbidden = ", ".join(json.dumps([source.tokenizers.target.id_to_token(i)]) for i in never)
    special_ids = sorted(source.tokenizers.specials.ids)
    head = (
        f"CTranslate2 model exported by `aiayn export ctranslate2` from {source.directory}\n"
        f"({source.model_type}, d_model {config.d_model}, {config.num_heads} heads, "
        f"{'pre-LN' if config.norm_first else 'post-LN'}, {config.positional} positions, "
        f"weights {quantization or 'float32'}).\n\n"
        "aiayn runs it like the original model directory:\n"
        "    aiayn translate --model THIS_DIR --text '...'   (also evaluate, score, lm generate)\n\n"
        "Or with CTranslate2 alone (pip install ctranslate2 tokenizers):\n\n"
    )
    if source.model_type == "transformer":
        src_file = "tokenizer.json" if source.tokenizers.is_joint else "src_tokenizer.json"
        tgt_file = "tokenizer.json" if source.tokenizers.is_joint else "tgt_tokenizer.json"
        snippet = f"""\
import ctranslate2, tokenizers

model = "THIS_DIR"
src_tok = tokenizers.Tokenizer.from_file(f"{{model}}/{src_file}")
tgt_tok = tokenizers.Tokenizer.from_file(f"{{model}}/{tgt_file}")
src_tok.encode_special_tokens = True  # as in aiayn: special tokens are never read from text
special_ids = {special_ids}  # pad, bos, eos, unk: dropped from the output text
translator = ctranslate2.Translator(model, device="cpu")  # compute_type="int8" to quantize on load

sentences = ["..."]
# CTranslate2 appends <eos> to each source itself, as aiayn's translator does.
source = [src_tok.encode(s, add_special_tokens=False).tokens for s in sentences]
results = translator.translate_batch(
    source, beam_size=4, length_penalty=0.6, max_decoding_length={config.max_len},
    min_decoding_length=0, suppress_sequences=[{forbidden}], return_scores=True)
for result in results:
    ids = [tgt_tok.token_to_id(t) for t in result.hypotheses[0]]
    print(tgt_tok.decode([i for i in ids if i not in special_ids], skip_special_tokens=False),
          result.scores[0])

# Length penalty: CTranslate2 divides the log-probability by |Y|^alpha (|Y| without
# <eos>); aiayn uses GNMT's ((5 + |Y|) / 6)^alpha, |Y| with <eos>. With length_penalty=0
# both rank by log-probability alone. aiayn's own commands rank CTranslate2's n-best list
# with GNMT's formula (see aiayn.inference.ctranslate2).
"""
    else:
        bos = json.dumps(source.tokenizers.target.id_to_token(config.bos_id))
        snippet = f"""\
import ctranslate2, tokenizers

model = "THIS_DIR"
tok = tokenizers.Tokenizer.from_file(f"{{model}}/tokenizer.json")
tok.encode_special_tokens = True  # as in aiayn: special tokens are never read from text
special_ids = {special_ids}  # pad, bos, eos, unk: dropped from the output text
generator = ctranslate2.Generator(model, device="cpu")

prompt = [{bos}]  # the start token alone, or a prompt: tok.encode(text, add_special_tokens=False).tokens
results = generator.generate_batch(  # greedy; sampling_topk=0, sampling_temperature=0.8 samples
    [prompt], max_length={max(1, config.max_len - 1)}, sampling_topk=1,
    include_prompt_in_result=False, return_end_token=True)
ids = [tok.token_to_id(t) for t in results[0].sequences[0]]
print(tok.decode([i for i in ids if i not in special_ids], skip_special_tokens=False))
# The model knows positions < {config.max_len}: prompt + generated tokens must stay within them.
"""
    return head + snippet
