"""Ensemble decoding: several translation models, one search over their mean probability.

    translator = aiayn.load(["runs/de_en_seed1", "runs/de_en_seed2"])
    translator.translate(["Ein Hund läuft."])

An `Ensemble` is a step runner (`aiayn.runtime.steps`) as the searches (`aiayn.decoding`) and
`TorchTranslator` take one: it encodes, keeps a decoding cache and gives each step's next-token
scores. Each model keeps its own encoder output and its own cache; a step runs every model's
own runner (compiled when the model was loaded with `compile`, int8 when quantized) and combines
their next-token distributions as the log of the mean probability, as fairseq does:

    log p(y | x, y_<t) = logsumexp_i(log p_i(y | x, y_<t)) - log n

(not the mean of the log-probabilities, which is a geometric mean). The searches take these
log-probabilities where one model gives its logits; a log-softmax of log-probabilities leaves
them as they are, so beam search, greedy search, n-best lists, scores and teacher-forced
per-token scores are those of the ensemble distribution. The decoding controls act on it too:
`--sample` (with `--temperature`, `--top-k`, `--top-p`) draws from it, n-gram blocking and a
forced prefix constrain it, and the repetition penalty treats the ensemble's log-probabilities
as its logits (all are <= 0, so a repeated token's log-probability is multiplied by p).

What the models must share, checked when they are loaded (`check_members`): the special ids,
the target vocabulary (the same token at every id) and the source vocabulary. The source is
tokenized once, by the first model's source tokenizer, and every model reads those ids. The
translator's `directory` is the first model's; `translator.model.directories` lists them all.

Attention (`attention_maps`: `--report`, alignments, the service's attention view): when every
model has the same numbers of layers and heads, each map is the mean of the models' maps (each
row of a mean of attention distributions is still one); otherwise every map is the first
model's.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Sequence
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from aiayn.core.errors import CheckpointError
from aiayn.data.tokenizer import Tokenizer, TokenizerPair
from aiayn.model.config import ModelConfig
from aiayn.model.transformer import AttentionMaps, Transformer
from aiayn.runtime.steps import StepRunner, as_runner


class EnsembleMemory(tuple):
    """One encoder output per model, each (B, S, D_i); `memory[keep]` keeps sentences `keep`
    (a (b',) index tensor) of every one, as the searches select a single model's memory."""

    def __getitem__(self, index):  # type: ignore[override]
        if isinstance(index, Tensor):
            return EnsembleMemory(memory[index] for memory in self)
        return super().__getitem__(index)


class EnsembleCache(tuple):
    """One `DecoderCache` per model; the searches' cache operations go to each."""

    def reorder(self, index: Tensor) -> None:
        """Keep rows `index` (B',) of every layer of every model (greedy search)."""
        for cache in self:
            cache.reorder(index)

    def select_sentences(self, index: Tensor) -> None:
        """Keep sentences `index` (b',) of every model's cross-attention keys/values."""
        for cache in self:
            cache.select_sentences(index)

    def reorder_beams(self, index: Tensor) -> None:
        """Select decoder rows `index` (R,) of every model's self-attention keys/values."""
        for cache in self:
            cache.reorder_beams(index)


def mean_probability(log_probs: Sequence[Tensor]) -> Tensor:
    """log((1/n) sum_i exp(log_probs[i])): the log of the mean probability, from n tensors of
    log-probabilities of one shape (..., V) (float32 result)."""
    # A pairwise fold of logaddexp (max(a, b) + log1p(exp(-|a - b|))) rather than a logsumexp
    # over a stacked leading axis: the same sum, without the (n, ..., V) copy or a reduction
    # across it.
    total = functools.reduce(torch.logaddexp, (logp.float() for logp in log_probs))
    return total - math.log(len(log_probs))


class Ensemble(nn.Module):
    """Translation models decoded as one (see the module docstring).

    Args:
        models: the `Transformer`s, or a step runner of each (`aiayn.runtime.steps`; a model
            alone runs eagerly), checked to share vocabularies and special ids by
            `check_members` when loaded; here only their output sizes and special ids.
        directories: the model directory of each, if any.

    Attributes:
        config: the first model's config with the smallest `max_len` of all (the searches use
            its special ids, `tgt_vocab_size` and `max_len`).
        runners: each model's step runner.
    """

    def __init__(
        self, models: Sequence[Transformer | StepRunner], directories: Sequence[Path | None] | None = None
    ) -> None:
        super().__init__()
        if not models:
            raise CheckpointError("an ensemble needs at least one model")
        runners = [as_runner(model) for model in models]
        models = [runner.model for runner in runners]
        first = models[0].config
        for model in models[1:]:
            config = model.config
            if config.tgt_vocab_size != first.tgt_vocab_size or _specials(config) != _specials(first):
                raise CheckpointError(
                    "the models of an ensemble must share the target vocabulary and special ids"
                )
        self.models = nn.ModuleList(models)
        self.runners = runners
        # A new module starts in training mode, and `eval_mode` gives the ensemble back in the mode
        # it found it in, which `train()` would pass on to every model (dropout on after a search):
        # the ensemble takes its models' mode instead (eval, as `aiayn.load` gives them).
        self.train(all(model.training for model in models))
        self.config = dataclasses.replace(first, max_len=min(m.config.max_len for m in models))
        self.directories = list(directories) if directories is not None else [None] * len(models)

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        """(B, S) source ids, (B, T) shifted-right target ids -> (B, T, V) float32 log-probabilities
        of the ensemble (teacher-forced: what `score` and per-token scores read)."""
        return mean_probability([F.log_softmax(run(src, tgt_in).float(), dim=-1) for run in self.runners])

    # ------------------------------------------------------------------ as a step runner
    @property
    def model(self) -> Ensemble:
        """The ensemble itself: the model its runner interface computes."""
        return self

    @property
    def network(self) -> Ensemble:
        """The ensemble itself (eval mode reaches every model)."""
        return self

    def train(self, mode: bool = True) -> Ensemble:
        """Set the models' mode and their runners' networks' (eval mode for a search)."""
        super().train(mode)
        for runner in getattr(self, "runners", ()):
            if runner.network is not runner.model:
                runner.network.train(mode)
        return self

    def encode(self, src: Tensor, src_padding_mask: Tensor | None = None) -> EnsembleMemory:
        """(B, S) source ids -> one (B, S, D_i) encoder output per model."""
        return EnsembleMemory(runner.encode(src, src_padding_mask) for runner in self.runners)

    def new_cache(self) -> EnsembleCache:
        """An empty decoding cache of each model (each its runner's)."""
        return EnsembleCache(runner.new_cache() for runner in self.runners)

    def step(
        self, last: Tensor, memory: EnsembleMemory, src_padding_mask: Tensor | None, cache: EnsembleCache,
        groups: int = 1,
    ) -> Tensor:
        """One step of every model (its own runner's, on its own memory and cache):
        last (B, 1), memory one (B or b, S, D_i) per model (b when `groups` consecutive rows
        share a memory row), src_padding_mask (B or b, S) or None -> (B, V) float32
        log-probabilities of the ensemble (the searches take them as logits)."""
        return mean_probability([
            F.log_softmax(runner.step(last, own_memory, src_padding_mask, own_cache, groups), dim=-1)
            for runner, own_memory, own_cache in zip(self.runners, memory, cache, strict=True)
        ])

    decode_step = step  # the earlier name, kept for callers of the previous release

    @torch.no_grad()
    def attention_maps(self, src: Tensor, tgt_in: Tensor) -> AttentionMaps:
        """`Transformer.attention_maps` of the ensemble: the mean of the models' maps (encoder
        (B, H, S, S), decoder (B, H, T, T), cross (B, H, T, S) per layer) when all have the same
        layers and heads, else the first model's."""
        if not self.same_attention_shapes:
            return self.runners[0].network.attention_maps(src, tgt_in)
        each = [runner.network.attention_maps(src, tgt_in) for runner in self.runners]

        def mean(kind: str) -> list[Tensor]:
            layers = zip(*(getattr(maps, kind) for maps in each), strict=True)
            return [torch.stack([m.float() for m in layer]).mean(dim=0) for layer in layers]

        return AttentionMaps(mean("encoder"), mean("decoder"), mean("cross"))

    @property
    def same_attention_shapes(self) -> bool:
        """Whether every model has the first's numbers of heads and encoder and decoder layers."""
        shape = [_attention_shape(model.config) for model in self.models]
        return all(s == shape[0] for s in shape)


def _attention_shape(config: ModelConfig) -> tuple[int, int, int]:
    return config.num_heads, config.num_encoder_layers, config.num_decoder_layers


def _specials(config: ModelConfig) -> tuple[int | None, ...]:
    return config.pad_id, config.bos_id, config.eos_id, config.unk_id


# ------------------------------------------------------------------ loading checks
def check_members(
    names: Sequence[str], configs: Sequence[ModelConfig], tokenizers: Sequence[TokenizerPair]
) -> None:
    """Raise `CheckpointError` (one line naming the model and the first difference) unless every
    model has the first's special ids, output size, and target and source vocabularies."""
    first = names[0]
    for name, config, pair in zip(names[1:], configs[1:], tokenizers[1:], strict=True):
        for role, mine, theirs in zip(("pad", "bos", "eos", "unk"), _specials(config), _specials(configs[0]),
                                      strict=True):
            if mine != theirs:
                raise CheckpointError(f"{name}: special token {role} is id {mine}, {first} has id {theirs}; "
                                      "the models of an ensemble must share their special ids")
        if config.tgt_vocab_size != configs[0].tgt_vocab_size:
            raise CheckpointError(
                f"{name}: its output layer has {config.tgt_vocab_size} target ids, {first}'s has "
                f"{configs[0].tgt_vocab_size}; the models of an ensemble must share the target vocabulary"
            )
        for side in ("target", "source"):
            difference = first_difference(getattr(pair, side), getattr(tokenizers[0], side))
            if difference is not None:
                token_id, mine, theirs = difference
                raise CheckpointError(
                    f"{name}: {side} token {token_id} is {_shown(mine)}, {first} has {_shown(theirs)}; "
                    f"the models of an ensemble must share the {side} vocabulary"
                )


def first_difference(one: Tokenizer, other: Tokenizer) -> tuple[int, str | None, str | None] | None:
    """The first id whose token differs between two tokenizers' vocabularies, with each one's
    token there (None: no token of that id), or None when the vocabularies are the same."""
    mine, theirs = _tokens_by_id(one), _tokens_by_id(other)
    if mine == theirs:
        return None
    token_id = min(i for i in mine.keys() | theirs.keys() if mine.get(i) != theirs.get(i))
    return token_id, mine.get(token_id), theirs.get(token_id)


def _tokens_by_id(tokenizer: Tokenizer) -> dict[int, str]:
    return {i: token for token, i in tokenizer.hf.get_vocab(with_added_tokens=True).items()}


def _shown(token: str | None) -> str:
    return "missing" if token is None else repr(token)
