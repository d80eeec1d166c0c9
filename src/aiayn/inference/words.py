"""Words of a translation: per-word scores and source-target word alignments (Pharaoh format).

A *word* is a whitespace-separated word (`str.split()`: tabs and repeated spaces separate
words too) of the text the user sees: the input line as given, and the output as printed. Word
indices count from 0 in those, as fairseq, Marian and fast_align do, whatever the tokenizer drops
or normalises. A source token belongs to the word its characters are in, found through the token
offsets the tokenizer gives (`source_token_words`); a source word with no token left (a character
the vocabulary cannot represent and drops) has no link. An output token belongs to the word its
decoded text ends in (`token_words`; the printed output is that decoded text), so the subwords of
a word are merged.

Per-token scores are the model's plain log-probabilities of the output's tokens, `<eos>` last
(`Translation.token_scores`: len(tokens) + 1 values, whose sum is `aiayn score` of the pair);
a word's score is the sum of its tokens' (`word_scores`; the `<eos>` step belongs to no word).

Alignments come from the encoder-decoder attention (Sec. 3.2.3) of one teacher-forced pass over
the source and the output (`aiayn.inference.torch_translator.cross_attention`, the pass the
evaluation report shows). The policy, chosen on the built-in `copy` task and measured on
`reverse` (`benchmarks/alignment_policy.py`, benchmarks/RESULTS.md): the attention of decoder
layer `ALIGNMENT_LAYER`, averaged over its heads, in the row that predicts each output token;
the source `<eos>` column left out; a target word's rows averaged and a source word's columns
summed; each output word is linked to the source word it attends to most.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from aiayn.data.tokenizer import Tokenizer
    from aiayn.inference.interface import Translation

ALIGNMENT_LAYER = -1
"""The decoder layer whose encoder-decoder attention gives the alignments (-1: the last)."""

ALIGNMENT_ROW_SHIFT = 0
"""0: an output token's attention row is the one that predicts it (1: the one that reads it)."""


def token_words(tokenizer: Tokenizer, ids: Sequence[int]) -> list[int]:
    """The word (0-based, in the detokenized text) of each token of `ids`: the word its
    decoded prefix ends in (a leading token with no text yet: word 0)."""
    words = []
    for end in range(1, len(ids) + 1):
        words.append(max(len(tokenizer.decode(ids[:end]).split()) - 1, 0))
    return words


def word_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each whitespace-separated word of `text`, as `text.split()` splits it."""
    spans, start = [], None
    for index, character in enumerate(text):
        if character.isspace():
            if start is not None:
                spans.append((start, index))
                start = None
        elif start is None:
            start = index
    if start is not None:
        spans.append((start, len(text)))
    return spans


def source_token_words(tokenizer: Tokenizer, text: str, count: int) -> list[int | None]:
    """The word of `text` (the line as the user gave it) that each of its first `count` tokens
    comes from: the word holding the token's first character that is not whitespace, through the
    tokenizer's offsets; None for a token of no character of any word."""
    _, offsets = tokenizer.encode_with_offsets(text)
    starts = [start for start, _ in word_spans(text)]
    words: list[int | None] = []
    for start, end in offsets[:count]:
        first = next((i for i in range(start, min(end, len(text))) if not text[i].isspace()), None)
        words.append(None if first is None else bisect.bisect_right(starts, first) - 1)
    return words + [None] * (count - len(words))


def word_scores(token_scores: Sequence[float], words: Sequence[int]) -> list[float]:
    """Each word's score: the sum of its tokens' (`token_scores` may end with the `<eos>`
    step, which belongs to no word)."""
    sums = [0.0] * (max(words) + 1 if words else 0)
    for score, word in zip(token_scores, words, strict=False):
        sums[word] += score
    return sums


def align_words(
    cross: np.ndarray, source_words: Sequence[int | None], target_words: Sequence[int],
    layer: int = ALIGNMENT_LAYER, head: int | None = None, row_shift: int = ALIGNMENT_ROW_SHIFT,
) -> list[tuple[int, int]]:
    """(source word, output word) links from one pair's attention.

    Args:
        cross: (L, H, T, S) attention: rows `<bos>` + output tokens, columns source tokens + `<eos>`.
        source_words: the word of each source token in the input line (`source_token_words`;
            None: a token of no word).
        target_words: the word of each output token (`token_words`).
        layer, head, row_shift: the policy (defaults: the documented one; `head` None = the
            mean of the heads; `row_shift` 0 = the row predicting the token, 1 = the row reading it).

    Returns:
        One link per output word, in output word order.
    """
    columns = [(column, word) for column, word in enumerate(source_words) if word is not None]
    if not target_words or not columns:
        return []
    attention = cross[layer].mean(axis=0) if head is None else cross[layer, head]  # (T, S)
    rows = attention[row_shift : row_shift + len(target_words), : len(source_words)]
    target_words = target_words[: rows.shape[0]]  # a row past the model's max_len: none
    num_target, num_source = max(target_words) + 1, max(word for _, word in columns) + 1
    by_word = np.full((num_target, num_source), -1.0)  # a source word with no token: never linked
    by_word[:, sorted({word for _, word in columns})] = 0.0
    for column, word in columns:
        by_word[:, word] += _mean_rows(rows[:, column], target_words, num_target)
    return [(int(by_word[t].argmax()), t) for t in range(num_target)]


def _mean_rows(column: np.ndarray, target_words: Sequence[int], num_target: int) -> np.ndarray:
    """(num_target,) the mean of `column`'s values over each output word's rows."""
    sums, counts = np.zeros(num_target), np.zeros(num_target)
    np.add.at(sums, np.asarray(target_words), column)
    np.add.at(counts, np.asarray(target_words), 1)
    return sums / np.maximum(counts, 1)


def translation_details(entry: Translation, tokenizer: Tokenizer) -> dict:
    """What `aiayn translate --format jsonl` and `aiayn serve` add to a translation when asked:
    `token_scores`, `words`, `word_scores` (with token scores) and `alignment` (Pharaoh)."""
    details: dict = {}
    if entry.token_scores is not None:
        words = entry.text.split()
        by_word = word_scores(entry.token_scores, token_words(tokenizer, entry.tokens))
        details.update(token_scores=entry.token_scores, words=words,
                       word_scores=by_word + [0.0] * (len(words) - len(by_word)))
    if entry.alignment is not None:
        details["alignment"] = pharaoh(entry.alignment)
    return details


def pharaoh(links: Sequence[tuple[int, int]]) -> str:
    """Links as the Pharaoh format: `src-tgt` pairs separated by spaces (`0-0 1-2`)."""
    return " ".join(f"{s}-{t}" for s, t in links)


def parse_pharaoh(text: str) -> list[tuple[int, int]]:
    """The links of a Pharaoh line (`ValueError` naming the bad pair)."""
    links = []
    for pair in text.split():
        source, dash, target = pair.partition("-")
        if not dash or not source.isdigit() or not target.isdigit():
            raise ValueError(f"not a Pharaoh alignment pair (src-tgt): {pair!r}")
        links.append((int(source), int(target)))
    return links
