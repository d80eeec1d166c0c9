"""The one mapping between aiayn's weights and Hugging Face's (Marian and GPT-2), both ways.

A `Rule` says where one Hugging Face tensor comes from: which of our tensors (a row slice of
it, for the query/key/value parts of our fused input projection), moved how (`op`) and
scaled by what. `aiayn export huggingface` applies the rules forwards (`to_theirs`);
`aiayn import huggingface` applies the same rules backwards (`to_ours`), so the two can
never disagree.

Ops (see `aiayn.export.huggingface` for why the feature axis is permuted for Marian):
- `reads`: a (out, d_model) weight that reads the residual stream: columns permuted;
- `writes`: a (d_model, in) weight or (d_model,) vector written into it: rows permuted;
- `plain`: unchanged; `transpose`: GPT-2's Conv1D stores (in, out); `row`: a (V,) vector
  stored as a (1, V) row (Marian's `final_logits_bias`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from aiayn.model.config import ModelConfig

OPS = ("reads", "writes", "plain", "transpose", "row")


@dataclass(frozen=True)
class Rule:
    """Their tensor `theirs` = op(our tensor `ours`[part]) * scale."""

    theirs: str
    ours: str
    op: str = "plain"
    part: tuple[int, int] | None = None  # rows of `ours`
    scale: float = 1.0


def feature_order(d_model: int) -> Tensor:
    """Indices that put our interleaved (sin, cos, sin, cos, ...) features in Marian's order
    (all sin, then all cos): Marian feature k is our feature order[k]."""
    return torch.cat([torch.arange(0, d_model, 2), torch.arange(1, d_model, 2)])


def to_theirs(rules: list[Rule], ours: dict[str, Tensor], order: Tensor | None) -> dict[str, Tensor]:
    """Their tensors, from ours (float32, contiguous)."""
    state = {}
    for rule in rules:
        tensor = ours[rule.ours].detach().float()
        if rule.part is not None:
            tensor = tensor[rule.part[0] : rule.part[1]]
        if rule.op == "reads":
            tensor = tensor[:, order]
        elif rule.op == "writes":
            tensor = tensor[order]
        elif rule.op == "transpose":
            tensor = tensor.t()
        elif rule.op == "row":
            tensor = tensor[None]
        state[rule.theirs] = (tensor * rule.scale if rule.scale != 1.0 else tensor).contiguous()
    return state


def to_ours(
    rules: list[Rule], theirs: dict[str, Tensor], shapes: dict[str, torch.Size], order: Tensor | None
) -> dict[str, Tensor]:
    """Our tensors (of `shapes`), from theirs: the inverse of `to_theirs`.

    A tensor of ours that several of theirs give (tied or shared embeddings) must be given
    the same by each; `ValueError` names the two that differ.
    """
    state: dict[str, Tensor] = {}
    given: dict[tuple[str, tuple[int, int] | None], str] = {}
    inverse = torch.argsort(order) if order is not None else None
    for rule in rules:
        tensor = theirs[rule.theirs].detach().float()
        if rule.scale != 1.0:
            tensor = tensor / rule.scale
        if rule.op == "reads":
            tensor = tensor[:, inverse]
        elif rule.op == "writes":
            tensor = tensor[inverse]
        elif rule.op == "transpose":
            tensor = tensor.t()
        elif rule.op == "row":
            tensor = tensor[0]
        target = state.setdefault(rule.ours, torch.full(shapes[rule.ours], float("nan")))
        rows = slice(*rule.part) if rule.part is not None else slice(None)
        key = (rule.ours, rule.part)
        if key in given:
            if not torch.equal(target[rows], tensor):
                raise ValueError(
                    f"{rule.theirs} and {given[key]} differ, but aiayn's model holds them as one tensor "
                    f"({rule.ours}); the model needs tied weights here"
                )
            continue
        given[key] = rule.theirs
        target[rows] = tensor
    return {name: tensor.contiguous() for name, tensor in state.items()}


# ------------------------------------------------------------------ Marian
def _marian_layer(ours: str, theirs: str, d: int, self_norm: str, cross: bool) -> list[Rule]:
    """One layer: our `ours` prefix -> Marian's `theirs` prefix (`self_norm`: our name of the
    self-attention sub-layer, `cross`: with encoder-decoder attention)."""
    rules = []
    blocks = [("self_attention", "self_attn", self_norm, "self_attn_layer_norm")]
    if cross:
        blocks.append(
            ("cross_attention", "encoder_attn", "cross_attention_sublayer", "encoder_attn_layer_norm")
        )
    for our_attn, their_attn, our_norm, their_norm in blocks:
        for i, proj in enumerate(("q_proj", "k_proj", "v_proj")):  # head features: not permuted
            part = (i * d, (i + 1) * d)
            rules.append(Rule(f"{theirs}.{their_attn}.{proj}.weight", f"{ours}.{our_attn}.in_proj.weight",
                              "reads", part))
            rules.append(Rule(f"{theirs}.{their_attn}.{proj}.bias", f"{ours}.{our_attn}.in_proj.bias",
                              "plain", part))
        rules += [
            Rule(f"{theirs}.{their_attn}.out_proj.weight", f"{ours}.{our_attn}.out_proj.weight", "writes"),
            Rule(f"{theirs}.{their_attn}.out_proj.bias", f"{ours}.{our_attn}.out_proj.bias", "writes"),
            Rule(f"{theirs}.{their_norm}.weight", f"{ours}.{our_norm}.norm.weight", "writes"),
            Rule(f"{theirs}.{their_norm}.bias", f"{ours}.{our_norm}.norm.bias", "writes"),
        ]
    return [
        *rules,
        Rule(f"{theirs}.fc1.weight", f"{ours}.feed_forward.linear1.weight", "reads"),
        Rule(f"{theirs}.fc1.bias", f"{ours}.feed_forward.linear1.bias"),
        Rule(f"{theirs}.fc2.weight", f"{ours}.feed_forward.linear2.weight", "writes"),
        Rule(f"{theirs}.fc2.bias", f"{ours}.feed_forward.linear2.bias", "writes"),
        Rule(f"{theirs}.final_layer_norm.weight", f"{ours}.feed_forward_sublayer.norm.weight", "writes"),
        Rule(f"{theirs}.final_layer_norm.bias", f"{ours}.feed_forward_sublayer.norm.bias", "writes"),
    ]


def marian_translation_rules(config: ModelConfig) -> list[Rule]:
    """`MarianMTModel` <- our `Transformer` (without the computed position tables)."""
    d = config.d_model
    rules = []
    if config.share_embeddings:
        rules.append(Rule("model.shared.weight", "src_embedding.embedding.weight", "reads"))
    tgt = "src_embedding" if config.share_embeddings else "tgt_embedding"
    rules += [
        Rule("model.encoder.embed_tokens.weight", "src_embedding.embedding.weight", "reads"),
        Rule("model.decoder.embed_tokens.weight", f"{tgt}.embedding.weight", "reads"),
        Rule("lm_head.weight", f"{tgt}.embedding.weight" if config.tie_output else "output_projection.weight",
             "reads"),
    ]
    if config.output_bias:
        rules.append(Rule("final_logits_bias", "output_projection.bias", "row"))
    for i in range(config.num_encoder_layers):
        rules += _marian_layer(f"encoder.layers.{i}", f"model.encoder.layers.{i}", d, "attention_sublayer",
                               cross=False)
    for i in range(config.num_decoder_layers):
        rules += _marian_layer(f"decoder.layers.{i}", f"model.decoder.layers.{i}", d,
                               "self_attention_sublayer", cross=True)
    return rules


def marian_language_rules(config: ModelConfig) -> list[Rule]:
    """`MarianForCausalLM` <- our post-LN `DecoderOnlyLM` (its unused cross-attention aside)."""
    d = config.d_model
    rules = [
        Rule("model.decoder.embed_tokens.weight", "embedding.embedding.weight", "reads"),
        Rule("lm_head.weight",
             "embedding.embedding.weight" if config.tie_output else "output_projection.weight", "reads"),
    ]
    if config.output_bias:
        rules.append(Rule("final_logits_bias", "output_projection.bias", "row"))
    for i in range(config.num_decoder_layers):
        rules += _marian_layer(f"decoder.layers.{i}", f"model.decoder.layers.{i}", d,
                               "self_attention_sublayer", cross=False)
    return rules


# ------------------------------------------------------------------ GPT-2
GPT2_NAMES = {
    "ln_1": "self_attention_sublayer.norm", "attn.c_attn": "self_attention.in_proj",
    "attn.c_proj": "self_attention.out_proj", "ln_2": "feed_forward_sublayer.norm",
    "mlp.c_fc": "feed_forward.linear1", "mlp.c_proj": "feed_forward.linear2",
}
"""GPT-2's block tensors -> ours (GPT-2's Conv1D stores (in, out): our (out, in), transposed)."""


def gpt2_rules(config: ModelConfig) -> list[Rule]:
    """`GPT2LMHeadModel` <- our pre-LN `DecoderOnlyLM` (without a sinusoidal table, a constant).

    GPT-2 does not scale its embeddings: ours, when scaled, carries sqrt(d_model) into `wte`,
    which is then untied from the output projection.
    """
    scale = config.d_model**0.5 if config.scale_embedding else 1.0
    tied = config.tie_output and not config.scale_embedding
    rules = [
        Rule("transformer.wte.weight", "embedding.embedding.weight", scale=scale),
        Rule("transformer.ln_f.weight", "decoder.final_norm.weight"),
        Rule("transformer.ln_f.bias", "decoder.final_norm.bias"),
        Rule("lm_head.weight", "embedding.embedding.weight" if tied else "output_projection.weight"),
    ]
    if config.positional == "learned":
        rules.append(Rule("transformer.wpe.weight", "positional.embedding.weight"))
    for i in range(config.num_decoder_layers):
        for theirs, ours in GPT2_NAMES.items():
            op = "plain" if theirs.startswith("ln") else "transpose"
            rules.append(Rule(f"transformer.h.{i}.{theirs}.weight", f"decoder.layers.{i}.{ours}.weight", op))
            rules.append(Rule(f"transformer.h.{i}.{theirs}.bias", f"decoder.layers.{i}.{ours}.bias"))
    return rules
