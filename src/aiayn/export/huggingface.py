"""Export to Hugging Face Transformers.

    export_huggingface("runs/multi30k", "runs/multi30k-hf")
    # then: AutoModelForSeq2SeqLM.from_pretrained(OUT), AutoTokenizer.from_pretrained(OUT)

The paper's model (post-LN, sinusoidal positions, embeddings scaled by sqrt(d_model) and
tied to the output projection) is `MarianMTModel`, with one difference of layout: Marian's
position table holds the sin features in its first half and the cos features in its second
half, where Sec. 3.5 (and aiayn) interleaves them. Permuting the feature axis (d_model) of
every weight the same way, even features first, makes Marian's table ours; every other
operation is position-wise, per feature (LayerNorm) or a matrix product over that axis, so
the network computes the same function on the permuted features, and the logits, whose
axis is the vocabulary, are unchanged.

Language models: post-LN + sinusoidal -> `MarianForCausalLM` (the same permutation);
pre-LN -> `GPT2LMHeadModel` (learned positions; our sinusoidal table, if any, becomes its
position embedding, and the sqrt(d_model) embedding scale is folded into its token
embedding, which is then untied from the output projection).

What a target cannot represent is refused with the field named, never approximated.
The directory also gets a fast tokenizer (`tokenizer(text)` appends `<eos>` to a source,
as aiayn's translator does) and a `generation_config.json` with aiayn's defaults.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import torch

from aiayn.core.errors import ConfigError, first_line
from aiayn.core.optional import require
from aiayn.decoding.common import never_generated
from aiayn.export.common import ExportSource, load_source, output_directory, refuse_other_head_dim
from aiayn.export.hf_tokenizer import save_hf_tokenizers
from aiayn.formats.hf_format import quiet_transformers as _quiet_transformers
from aiayn.formats.hf_mapping import (
    feature_order,
    gpt2_rules,
    marian_language_rules,
    marian_translation_rules,
    to_theirs,
)
from aiayn.formats.model_card import card_fields, write_model_card
from aiayn.model.config import ModelConfig
from aiayn.model.positional_encoding import sinusoidal_table

log = logging.getLogger(__name__)

MARIAN_LAYER_NORM_EPS = 1e-5  # nn.LayerNorm's default, which Marian and GPT-2's modules use
MARIAN_ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "gelu_new": "gelu_new", "swish": "swish"}
GPT2_ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "gelu_new": "gelu_new", "swish": "silu"}
"""Our `ModelConfig.activation` -> the `activation_function` each names the same function."""


def export_huggingface(model_dir: str | Path, out: str | Path, overwrite: bool = False) -> Path:
    """Convert the model directory `model_dir` into a Hugging Face model directory `out`."""
    require("transformers", "aiayn export huggingface")
    source = load_source(model_dir)
    config = source.config
    refuse_other_head_dim(config, "Transformers")
    with _quiet_transformers():
        if source.model_type == "transformer":
            model, generation = marian_translation_model(source)
        elif not config.norm_first:
            model, generation = marian_language_model(source)
        else:
            model, generation = gpt2_language_model(source)
        with output_directory(out, overwrite) as tmp:
            model.generation_config = generation
            model.save_pretrained(tmp)
            save_hf_tokenizers(source, tmp)
            # the source's card, with the Hub's metadata header (language, tags, metrics)
            write_model_card(tmp, hub=True, fields=card_fields(source.directory), name=Path(out).name)
    log.info("wrote %s (%s)", out, type(model).__name__)
    return Path(out)


def push_to_hub(directory: str | Path, repo_id: str, private: bool = False) -> str:
    """Upload an exported directory to the Hugging Face Hub as `repo_id` (created if needed);
    its URL. Without network (or a token), a `ConfigError` of one line."""
    require("huggingface_hub", "--push-to-hub")
    from huggingface_hub import HfApi

    api = HfApi()
    try:
        api.create_repo(repo_id, private=private, exist_ok=True)
        commit = api.upload_folder(folder_path=str(directory), repo_id=repo_id,
                                   commit_message="Upload aiayn model (aiayn export huggingface)")
    except Exception as error:  # offline, no token, no permission: one line
        detail = first_line(error)
        raise ConfigError(
            f"--push-to-hub {repo_id}: the upload failed ({type(error).__name__}: {detail[:200]}); "
            f"the model is in {directory}"
        ) from None
    return str(getattr(commit, "repo_url", None) or f"https://huggingface.co/{repo_id}")



# ------------------------------------------------------------------ checks
def _refuse(config: ModelConfig, target: str, **required: Any) -> None:
    """Raise `ConfigError` for the first ModelConfig field whose value `target` cannot represent."""
    for name, expected in required.items():
        value = getattr(config, name)
        if value != expected:
            raise ConfigError(
                f"{target} cannot represent ModelConfig.{name}={value!r} (it needs {expected!r}); "
                "this model can be exported to CTranslate2 instead (aiayn export ctranslate2)"
            )


def _common_fields(config: ModelConfig) -> dict[str, Any]:
    return {
        "pad_token_id": config.pad_id,
        "bos_token_id": config.bos_id,
        "eos_token_id": config.eos_id,
    }


def _generation_config(config: ModelConfig, num_beams: int, **fields: Any):
    """aiayn's decoding defaults, as far as `GenerationConfig` can say them."""
    from transformers import GenerationConfig

    forbidden = never_generated(config.pad_id, config.bos_id, config.eos_id)
    return GenerationConfig(
        num_beams=num_beams,
        # HF divides by |Y|^length_penalty (|Y| with <eos>), aiayn by ((5 + |Y|) / 6)^alpha.
        length_penalty=0.6 if num_beams > 1 else 1.0,
        max_length=config.max_len + 1,  # + the start token: every position of the table usable
        suppress_tokens=forbidden or None,  # -inf after the log-softmax, as aiayn does
        **_common_fields(config),
        **fields,
    )


def _check_marian(config: ModelConfig, target: str) -> None:
    _refuse(config, target, norm_first=False, positional="sinusoidal", layer_norm_eps=MARIAN_LAYER_NORM_EPS)
    if config.d_model % 2:
        raise ConfigError(f"{target} cannot represent an odd ModelConfig.d_model ({config.d_model})")


def _weights(source: ExportSource) -> dict[str, torch.Tensor]:
    return {name: t.detach().float() for name, t in source.model.state_dict().items()}


def _load_exactly(model, state: dict[str, torch.Tensor]) -> None:
    """Load `state` into a transformers model; every tensor it has must be covered, except
    the position tables Marian computes itself and its zero logits bias."""
    missing, unexpected = model.load_state_dict(state, strict=False)
    computed = ("embed_positions.weight", "final_logits_bias")
    missing = [m for m in missing if not m.endswith(computed) and m not in _tied_names(model)]
    if missing or unexpected:
        raise RuntimeError(f"internal mapping error: missing {missing}, unexpected {unexpected}")


def _tied_names(model) -> set[str]:
    return set(getattr(model, "_tied_weights_keys", None) or ())


# ------------------------------------------------------------------ models
def _marian_fields(config: ModelConfig) -> dict[str, Any]:
    """`MarianConfig` fields both Marian exports share: widths, heads, dropouts, and the
    scaled embeddings of Sec. 3.4 (`scale_embedding`), besides `_common_fields`."""
    return dict(
        d_model=config.d_model,
        encoder_attention_heads=config.num_heads,
        decoder_attention_heads=config.num_heads,
        encoder_ffn_dim=config.d_ff,
        decoder_ffn_dim=config.d_ff,
        activation_function=MARIAN_ACTIVATIONS[config.activation],
        max_position_embeddings=config.max_len,
        scale_embedding=config.scale_embedding,
        dropout=config.dropout,
        attention_dropout=config.attention_dropout,
        activation_dropout=config.activation_dropout,
        decoder_start_token_id=config.bos_id,
        forced_eos_token_id=None,
        **_common_fields(config),
    )


def marian_translation_model(source: ExportSource):
    """`MarianMTModel` holding our encoder-decoder model, and its generation config."""
    from transformers import MarianConfig, MarianMTModel

    config = source.config
    _check_marian(config, "MarianMTModel")
    hf_config = MarianConfig(
        vocab_size=config.src_vocab_size,
        decoder_vocab_size=config.tgt_vocab_size,
        share_encoder_decoder_embeddings=config.share_embeddings,
        tie_word_embeddings=config.tie_output,
        encoder_layers=config.num_encoder_layers,
        decoder_layers=config.num_decoder_layers,
        architectures=["MarianMTModel"],
        **_marian_fields(config),
    )
    state = to_theirs(marian_translation_rules(config), _weights(source), feature_order(config.d_model))
    model = MarianMTModel(hf_config).eval()
    _load_exactly(model, state)
    generation = _generation_config(config, num_beams=4, decoder_start_token_id=config.bos_id)
    return model, generation


def marian_language_model(source: ExportSource):
    """`MarianForCausalLM` holding our post-LN, sinusoidal language model."""
    from transformers import MarianConfig, MarianForCausalLM

    config = source.config
    _check_marian(config, "MarianForCausalLM")
    hf_config = MarianConfig(
        vocab_size=config.tgt_vocab_size,
        tie_word_embeddings=config.tie_output,
        encoder_layers=0,
        decoder_layers=config.num_decoder_layers,
        is_decoder=True,
        is_encoder_decoder=False,
        add_cross_attention=False,
        architectures=["MarianForCausalLM"],
        **_marian_fields(config),
    )
    state = to_theirs(marian_language_rules(config), _weights(source), feature_order(config.d_model))
    model = MarianForCausalLM(hf_config).eval()
    for name, tensor in model.state_dict().items():
        # Marian's decoder layer always has cross-attention, unused without an encoder.
        if ".encoder_attn" in name:
            state[name] = torch.zeros_like(tensor)
    _load_exactly(model, state)
    return model, _generation_config(config, num_beams=1)


def gpt2_language_model(source: ExportSource):
    """`GPT2LMHeadModel` holding our pre-LN language model."""
    from transformers import GPT2Config, GPT2LMHeadModel

    config = source.config
    _refuse(config, "GPT2LMHeadModel", output_bias=False)
    d = config.d_model
    hf_config = GPT2Config(
        vocab_size=config.tgt_vocab_size,
        n_positions=config.max_len,
        n_embd=d,
        n_layer=config.num_decoder_layers,
        n_head=config.num_heads,
        n_inner=config.d_ff,
        activation_function=GPT2_ACTIVATIONS[config.activation],
        resid_pdrop=config.dropout,
        embd_pdrop=config.dropout,
        attn_pdrop=config.attention_dropout,
        layer_norm_epsilon=config.layer_norm_eps,
        scale_attn_weights=True,
        # a scaled token embedding carries sqrt(d_model) into wte, untied from the projection
        tie_word_embeddings=config.tie_output and not config.scale_embedding,
        architectures=["GPT2LMHeadModel"],
        **_common_fields(config),
    )
    state = to_theirs(gpt2_rules(config), _weights(source), None)
    if config.positional == "sinusoidal":
        state["transformer.wpe.weight"] = sinusoidal_table(config.max_len, d).contiguous()
    model = GPT2LMHeadModel(hf_config).eval()
    _load_exactly(model, state)
    return model, _generation_config(config, num_beams=1)
