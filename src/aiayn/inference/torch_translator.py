"""aiayn's own translator: beam and greedy search in PyTorch (`aiayn.decoding`).

    translator = aiayn.load("runs/multi30k")
    translator.translate(["Ein Hund läuft."])                  # ['A dog runs.']
    translator.translate_nbest(["Ein Hund läuft."], nbest=2)   # [[Translation('A dog runs.', -0.21, [...]),
                                                               #   ...]]
    translator.score(["Ein Hund läuft."], ["A dog runs."])     # [-0.93]

A `TorchTranslator` tokenizes each source (tokens + `<eos>`; the special ids are the model
config's; see `aiayn.inference.base`), sorts the sentences by length into batches of about
`batch_tokens` padded source tokens (little padding, so little wasted work), decodes each
batch with beam search (Sec. 6.1) or greedy search (beam 1), puts the outputs back in input
order and detokenizes them.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from aiayn.core.errors import ConfigError
from aiayn.core.eval_mode import eval_mode
from aiayn.data.tokenizer import TokenizerPair
from aiayn.decoding.beam_search import beam_search
from aiayn.decoding.common import Hypothesis
from aiayn.decoding.constraints import SentenceConstraints
from aiayn.decoding.controls import NO_CONTROLS, Controls
from aiayn.decoding.greedy import greedy_search
from aiayn.inference.base import TorchBackend, TranslatorBase
from aiayn.inference.ensemble import Ensemble
from aiayn.model.transformer import Transformer
from aiayn.runtime.steps import StepRunner


def length_batches(lengths: Sequence[int], batch_tokens: int) -> list[list[int]]:
    """Group indices by length, longest first, so that each batch's padded size
    (number of sentences x longest length) stays within `batch_tokens` (a longer sentence
    gets a batch of its own)."""
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    batches: list[list[int]] = []
    for i in order:
        if batches and lengths[batches[-1][0]] * (len(batches[-1]) + 1) <= batch_tokens:
            batches[-1].append(i)  # the first index of a batch is its longest sentence
        else:
            batches.append([i])
    return batches


def pad_batch(rows: Sequence[Sequence[int]], pad_id: int, device: torch.device) -> torch.Tensor:
    """Token id lists -> (B, longest) LongTensor, right-padded with `pad_id`."""
    out = torch.full((len(rows), max(map(len, rows))), pad_id, dtype=torch.long)
    for i, row in enumerate(rows):
        out[i, : len(row)] = torch.tensor(row, dtype=torch.long)
    return out.to(device)


class TorchTranslator(TorchBackend, TranslatorBase):
    """A Transformer and its tokenizers, ready to translate text (`aiayn.inference.Translator`).

    Args:
        model: a trained `Transformer` (its device is used; it is put in eval mode while
            decoding and returned to its previous mode after, so this works mid-training), or
            an `Ensemble` of them (`aiayn.inference.ensemble`), decoded as one model, or the
            step runner that computes one (`aiayn.runtime.steps`, as `aiayn.load` gives it):
            searches, scores and attention then run through it.
        tokenizers: the `TokenizerPair` the model was trained with; its special ids must be
            the model config's.
        directory: the model directory it came from, if any.
    """

    def __init__(
        self, model: Transformer | Ensemble | StepRunner, tokenizers: TokenizerPair,
        directory: Path | None = None,
    ) -> None:
        self._hold(model, (Transformer, Ensemble), "translation needs an encoder-decoder Transformer")
        super().__init__(model.config, tokenizers, directory)

    def _search(
        self, sources: list[list[int]], beam: int, alpha: float, max_len_extra: int, nbest: int,
        batch_tokens: int, exact_scores: bool, controls: Controls = NO_CONTROLS,
        prefixes: list[list[int]] | None = None, constraints: list[SentenceConstraints] | None = None,
    ) -> list[list[Hypothesis]]:
        eos_id, pad_id = self.config.eos_id, self.config.pad_id
        with_eos = [[*ids, eos_id] for ids in sources]
        results: list[list[Hypothesis]] = [[] for _ in sources]
        for batch in length_batches([len(s) for s in with_eos], batch_tokens):
            src = pad_batch([with_eos[j] for j in batch], pad_id, self.device)  # (B, S)
            chosen = None if prefixes is None else [prefixes[j] for j in batch]
            kept = None if constraints is None else [constraints[j] for j in batch]
            if kept is not None and beam == 1:  # excluded phrases only: greedy = beam 1, alpha 0
                nbests = beam_search(self.runner, src, 1, 0.0, max_len_extra, 1, controls=controls,
                                     prefixes=chosen, constraints=kept)
            elif beam == 1 or controls.sample:  # greedy: the length penalty does not change an arg-max path
                greedy = greedy_search(self.runner, src, max_len_extra, controls=controls, prefixes=chosen)
                nbests = [[Hypothesis(t, s)] for t, s in zip(greedy.tokens, greedy.scores, strict=True)]
            else:
                nbests = beam_search(
                    self.runner, src, beam, alpha, max_len_extra, nbest, controls=controls, prefixes=chosen,
                    constraints=kept,
                )
            for j, hyps in zip(batch, nbests, strict=True):
                results[j] = hyps
        return results

    def _check_constraints(self, include: bool, exclude: bool, beam: int, controls: Controls) -> None:
        if controls.sample:
            raise ConfigError("lexical constraints need a search; sampling cannot honour them (no --sample)")
        if include and beam == 1:
            raise ConfigError(
                "phrases to include need beam search (beam >= 2): greedy search cannot keep the "
                "hypotheses that have met more of them"
            )

    def _token_log_probs(
        self, sources: list[list[int]], targets: list[list[int]], batch_tokens: int
    ) -> list[list[float]]:
        """Targets + `<eos>` within the model's max_len; an output that search cut at max_len
        tokens has no position left for its `<eos>` step, which is then left out."""
        bos_id, eos_id, pad_id = self.config.bos_id, self.config.eos_id, self.config.pad_id
        limit = self.config.max_len
        src_ids = [[*ids, eos_id] for ids in sources]
        labels = [[*ids, eos_id][:limit] for ids in targets]
        lengths = [max(len(s), len(t)) for s, t in zip(src_ids, labels, strict=True)]
        scores: list[list[float]] = [[] for _ in sources]
        with eval_mode(self.network):
            for batch in length_batches(lengths, batch_tokens):
                src = pad_batch([src_ids[i] for i in batch], pad_id, self.device)  # (B, S)
                fed = [[bos_id, *targets[i]][:limit] for i in batch]
                tgt_in = pad_batch(fed, pad_id, self.device)  # (B, T)
                gold = pad_batch([labels[i] for i in batch], pad_id, self.device)  # (B, T)
                logp = F.log_softmax(self.network(src, tgt_in).float(), dim=-1)  # (B, T, V)
                token_logp = logp.gather(2, gold[:, :, None]).squeeze(2)  # (B, T)
                for i, row in zip(batch, token_logp.tolist(), strict=True):
                    scores[i] = row[: len(labels[i])]
        return scores

    def _cross_attention(self, sources: list[list[int]], targets: list[list[int]]) -> list[np.ndarray]:
        return cross_attention(self.network, sources, targets, self.device)


def cross_attention(
    model: Transformer | Ensemble, sources: Sequence[Sequence[int]], targets: Sequence[Sequence[int]],
    device: torch.device,
) -> list[np.ndarray]:
    """The encoder-decoder attention (Sec. 3.2.3) of each (source, output) pair of token ids
    (without `<eos>`; each within the model's max_len): (L, H, T, S) float32 per pair, rows
    `<bos>` + output (row t predicts output token t, the last row `<eos>`), columns source +
    `<eos>` (an output of max_len tokens, cut there by the search: no `<eos>` row). One
    teacher-forced pass per pair (a batch of one: no padding) of the model's
    explicit attention path (`Transformer.attention_maps`), whichever step decoding used
    (compiled or not; int8 linear layers when the model has them); an ensemble's is the mean
    of its models' or the first model's (`Ensemble.attention_maps`)."""
    eos_id, bos_id = model.config.eos_id, model.config.bos_id
    maps = []
    with eval_mode(model), torch.no_grad():
        for src_ids, tgt_ids in zip(sources, targets, strict=True):
            src = torch.tensor([[*src_ids, eos_id]], dtype=torch.long, device=device)  # (1, S)
            fed = [bos_id, *tgt_ids][: model.config.max_len]
            tgt_in = torch.tensor([fed], dtype=torch.long, device=device)  # (1, T)
            cross = model.attention_maps(src, tgt_in).cross  # L x (1, H, T, S)
            maps.append(torch.stack([m[0] for m in cross]).float().cpu().numpy())  # (L, H, T, S)
    return maps
