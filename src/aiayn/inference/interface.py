"""What every translator and every generator offers, whichever backend decodes.

`Translator` (an encoder-decoder model: source sentences in, target sentences out) and
`Generator` (a decoder-only language model: a prompt in, its continuation out) are Protocols;
`aiayn.inference.load(DIR)` returns the implementation for a model directory: PyTorch
(`TorchTranslator`, `TorchGenerator`) for a directory written by aiayn, CTranslate2
(`CTranslate2Translator`, `CTranslate2Generator`) for one written by `aiayn export ctranslate2`.
The CLI, `aiayn serve` and the Python API use only these interfaces.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple, Protocol, runtime_checkable

from aiayn.core.decoding_choices import DEFAULT_BATCH_TOKENS, LONG_LINE_ACTIONS  # noqa: F401 (public here too)
from aiayn.data.tokenizer import Tokenizer, TokenizerPair
from aiayn.model.config import ModelConfig


class Translation(NamedTuple):
    """One n-best entry: the detokenized text, its score and its target token ids.

    `score` is log P(Y | X) / lp(Y) (GNMT length penalty; beam 1: log P(Y | X)); `tokens` are
    the generated ids without `<bos>` and `<eos>` (see `aiayn.decoding.common`).
    `token_scores` (when asked): the model's plain log-probability of each token, then of
    `<eos>` (len(tokens) + 1 values, but no `<eos>` step for an output cut at the model's max_len;
    their sum is `score(source, text)`); decoding controls
    change which tokens are chosen, not these values. `alignment` (when asked): (source word,
    output word) links (`aiayn.inference.words`). A blank text (empty or whitespace only) gives an
    empty output scored with its `<eos>`: `score` and `token_scores` are `score(text, "")`'s (one
    value, the `<eos>` step), the alignment [].
    `constraints_met`: False only when the text had phrases to include and the search reached
    its length limit before the output held them all (`aiayn.decoding.constrained_search`).
    """

    text: str
    score: float
    tokens: list[int]
    token_scores: list[float] | None = None
    alignment: list[tuple[int, int]] | None = None
    constraints_met: bool = True


@runtime_checkable
class Translator(Protocol):
    """A translation model and its tokenizers, ready to translate text.

    Attributes:
        engine: the backend, as `aiayn serve` reports it ('aiayn' or 'ctranslate2').
        config: the model's `ModelConfig` (max_len, sizes, special-token ids).
        tokenizers: the source and target tokenizers.
        device: where it decodes; `str(device)` is what `aiayn evaluate` and serve report.
        parameters: the number of model parameters (None when the backend does not say).
        directory: the model directory it was loaded from (None when built in memory).
    """

    engine: str
    config: ModelConfig
    tokenizers: TokenizerPair
    parameters: int | None
    directory: Path | None

    @property
    def device(self) -> object: ...

    def translate(
        self, texts: Sequence[str], beam: int = 4, alpha: float = 0.6, max_len_extra: int = 50,
        batch_tokens: int = DEFAULT_BATCH_TOKENS, line_offset: int = 0, on_long_line: str = "truncate",
        *, prefix: str | Sequence[str | None] | None = None,
        include: Sequence[Sequence[str] | None] | None = None,
        exclude: Sequence[Sequence[str] | None] | None = None, **controls: Any,
    ) -> list[str]:
        """The best translation of each text (paper defaults: beam 4, alpha 0.6, max length
        source + 50; beam 1 = greedy). An empty text gives an empty output.

        Args:
            texts: source sentences.
            beam: beam size; 1 = greedy search (alpha then plays no part).
            alpha: length penalty exponent (see `aiayn.decoding.common.length_penalty`).
            max_len_extra: output tokens allowed beyond the source length.
            batch_tokens: padded source tokens per batch.
            line_offset: added to the line numbers in warnings and errors (streamed input).
            on_long_line: 'truncate' (with a warning) or 'error' (`DataError` naming the line)
                for a text longer than the model's max_len.
            prefix: a target prefix for every text (str) or one per text (None: none), forced
                then continued; longer than a text's output length limit: `ConfigError`.
            include: per text, phrases the translation must contain (None: none); needs
                beam >= 2 (see docs/constraints.md).
            exclude: per text, phrases it must not contain (blocked at word level).
            controls: the decoding controls of `aiayn.decoding.controls.Controls`: `sample`
                (with `top_k`, `top_p`, `temperature`, `seed`), `no_repeat_ngram_size`,
                `repetition_penalty`, `max_output_ratio`. None given: the paper's search.
        """
        ...

    def translate_nbest(
        self, texts: Sequence[str], nbest: int, beam: int = 4, alpha: float = 0.6, max_len_extra: int = 50,
        batch_tokens: int = DEFAULT_BATCH_TOKENS, line_offset: int = 0, on_long_line: str = "truncate",
        *, prefix: str | Sequence[str | None] | None = None, token_scores: bool = False,
        alignments: bool = False, include: Sequence[Sequence[str] | None] | None = None,
        exclude: Sequence[Sequence[str] | None] | None = None, **controls: Any,
    ) -> list[list[Translation]]:
        """For each text up to `nbest` (1 <= nbest <= beam) `Translation`s, best first; a
        blank text (empty or whitespace only) is not decoded: it gives `[Translation('', s, [])]`, s
        the score of its empty output with `<eos>`, `score([text], [""])` (the same rule everywhere).
        `token_scores` / `alignments`: fill those fields (one teacher-forced pass more each; a
        backend without the attention raises `ConfigError`). Other arguments as `translate`."""
        ...

    def score(
        self, sources: Sequence[str], targets: Sequence[str], batch_tokens: int = DEFAULT_BATCH_TOKENS
    ) -> list[float]:
        """log P(target | source) (natural log, `<eos>` included) of each pair, by forced decoding."""
        ...

    def check_alignments(self) -> None:
        """Raise `ConfigError` (one line) when this backend cannot give word alignments."""
        ...

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Source tokens the model reads for each text (its tokens + `<eos>`; 0 for a blank text)."""
        ...


@runtime_checkable
class Generator(Protocol):
    """A language model and its tokenizer, ready to continue text.

    Attributes as `Translator`'s, with one `tokenizer` instead of a pair.
    """

    engine: str
    config: ModelConfig
    tokenizer: Tokenizer
    parameters: int | None
    directory: Path | None

    @property
    def device(self) -> object: ...

    def generate(
        self, prompt: str, max_new_tokens: int = 100, temperature: float = 1.0, top_k: int | None = None,
        top_p: float | None = None, seed: int | None = None,
    ) -> str:
        """The continuation of `prompt` (without the prompt and the final `<eos>`).

        Args:
            prompt: the text to continue; empty = start from `<bos>`.
            max_new_tokens: the most tokens generated (>= 0).
            temperature: > 0 divides the logits; 0 = greedy (arg-max).
            top_k: keep the k most likely tokens (None or 0: all); `aiayn.decoding.sampling.filter_logits`.
            top_p: keep the most likely tokens up to this probability mass (None or 1.0: all).
            seed: the random seed (None: a fresh random one); the same seed gives the same text.
        """
        ...

    def generate_stream(
        self, prompt: str, max_new_tokens: int = 100, temperature: float = 1.0, top_k: int | None = None,
        top_p: float | None = None, seed: int | None = None,
    ) -> Iterator[str]:
        """`generate` as text pieces, yielded as they are decoded (they join to its result)."""
        ...

    def generate_ids(
        self, prompt_ids: Sequence[int], max_new_tokens: int = 100, temperature: float = 1.0,
        top_k: int | None = None, top_p: float | None = None, seed: int | None = None,
        stop_ids: Sequence[int] | None = None, context: int | None = None,
    ) -> Iterator[int]:
        """The generated token ids, one at a time (a stop id, when reached, is the last).

        `stop_ids` default to the model's `<eos>`; `context` is the most positions the model
        sees at once (default: the block size it was trained on). Other arguments as `generate`.
        """
        ...
