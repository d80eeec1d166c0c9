"""The rules behind the settings left at `auto`: pure functions of what the run measured.

`aiayn.training.auto_settings` measures (the corpus, the training speed at start-up) and
applies; this module decides, so that the same rules give the run's choices, the table of
docs/auto-settings.md (`describe_choices`) and the unit tests. Each rule cites its evidence in
benchmarks/RESULTS.md; where that evidence is Multi30k's alone it says so.

| setting | chosen by | rule |
|---|---|---|
| `data.vocab_size` | training pairs (before the tokenizer is trained) | `VOCAB_RULE` |
| `model.preset` | corpus pairs, and the target tokens the `small` model would see | `preset_for_run` |
| `train.batch_tokens` | updates the budget allows with each batch | `batch_tokens_for_steps` |
| `model.dropout` | expected epochs | `DROPOUT_RULE` |
| `train.warmup` | expected updates | `warmup_for_updates` |
| `train.eval_every` | expected updates | `eval_every_for_updates` |
| `train.bleu_max_sentences` | validation pairs and length, time per validation | `bleu_sentences_for_run` |
| the split-off validation set | training pairs (no validation files given) | `validation_split_size` |

Evidence. `batch_tokens` and `dropout` come from the Multi30k runs of the `small` model
(RESULTS.md: "The recipe by shares of the run, and dropout by expected epochs", "Runs at two slow
speeds", "`train.batch_tokens: auto`, and the recipe at the three speeds"); the 6% shares of
warmup and validation from "The recipe by shares of the run" (400 of 6,441 steps); vocabulary
8,000 and the `small` preset for 29k pairs from the Multi30k recipe (configs/multi30k_de_en.yaml,
"Multi30k"). The Tatoeba en-es grid (benchmarks/tatoeba_grid.sh; RESULTS.md "Settings that size
themselves, and Tatoeba") backs the first vocabulary tier and the `small` preset at 108k pairs
on one thread, and the validation share for the `small` model; the larger vocabulary and preset
tiers and the split size are derived from the rules, not from runs.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

from aiayn.core.errors import ConfigError
from aiayn.core.settings import parse_share
from aiayn.model.config import ModelConfig

AUTO = "auto"

DROPOUT_RULE: tuple[tuple[float, float], ...] = ((20.0, 0.2), (math.inf, 0.3))
"""(fewer expected epochs than, dropout): the first row that applies. Multi30k: 0.2 over-fits
from ~17 epochs, 0.3 still improves at ~36."""

BATCH_TOKENS_CHOICES: tuple[int, ...] = (3000, 1500)
"""What `train.batch_tokens: auto` chooses from, largest first (Multi30k)."""

GPU_BATCH_TOKENS_CHOICES: tuple[int, ...] = (65536, 49152, 32768, 24576, 16384, 12288, 8192, 6144, 4096, 3000)
"""What `train.batch_tokens: auto` chooses from on a CUDA GPU, largest first: up to 64k padded
tokens (the paper's steps held ~25k source + ~25k target tokens, Sec. 5.1), those that fit in
memory (`batches_that_fit`); the updates rule (`batch_tokens_for_steps`) then picks among them."""

MEMORY_HEADROOM = 0.8
"""A batch must fit in this share of the GPU memory free at start-up (the allocator's
fragmentation and the validation's decoding take the rest)."""

ENOUGH_STEPS = 4000
"""Updates within the budget that a larger batch must still give to be chosen over a smaller one
(Multi30k: the fast machine's ~6,400 updates of 3000 tokens and one fp32 thread's ~2,300 lie on
either side)."""

VOCAB_RULE: tuple[tuple[float, int], ...] = ((200_000, 8000), (2_000_000, 16000), (math.inf, 32000))
"""(fewer training pairs than, vocabulary size). 8000 for Multi30k's 29k pairs (its recipe) and for
Tatoeba en-es's 108k pairs, where it beat 16000 in a 30-minute one-thread run (the Tatoeba grid);
the larger tiers are derived, not run."""

PRESET_CHOICES = ("tiny", "small", "base")
"""What `model.preset: auto` chooses from, smallest first (`big` is never chosen: a run that
could train it names it)."""

TIMED_PRESET = "small"
"""The preset timed at start-up; the rule reads the target tokens *it* would see."""

PRESET_NEEDS: dict[str, tuple[int, float]] = {"tiny": (0, 0.0), "small": (0, 1.5e6), "base": (500_000, 5e7)}
"""preset -> (training pairs, target tokens the `small` model would see in the run) it needs.
`small`: Multi30k's 30-minute one-thread run saw 3.1M and reached 35.8 BLEU, so half of that;
`base`: its paper settings over-fit 29k pairs, and on Tatoeba en-es (108k pairs) one thread for 30
minutes trains it too few steps to translate at all (the Tatoeba grid), so a corpus far larger
and a run far faster than a CPU's. The thresholds themselves are derived, not run."""

WARMUP_SHARE, MAX_WARMUP_STEPS = 0.06, 4000
"""Warmup: 6% of the run (Multi30k's recipe), at most the paper's 4000 steps (Sec. 5.3)."""

EVAL_SHARE, MIN_STEPS_BETWEEN_VALIDATIONS, MAX_EVAL_SHARE = 0.06, 50, 0.5
"""Validation every 6% of the run (Multi30k's recipe); a shorter run validates less often, at
least 50 updates apart (at most every half run)."""

VALIDATION_TIME_SHARE = 0.10
"""The share of the training time that the validations may take together (the default of
`train.bleu_time_share`, which caps it: `aiayn.translation.validation`), so at most 0.1 / 1.1 =
9.1% of a run's budget. `bleu_sentences_for_run` plans for outputs of about the references'
length; a model too slow to converge in its budget decodes longer ones (before the caps, the
Tatoeba grid's `base` spent 43.6% of its run validating), and the caps stop it."""

DECODE_TOKENS_PER_TRAIN_TOKEN = 1.0
"""Target tokens greedy validation decodes per second, per target token trained per second
(Multi30k's 1,014 sentences at one thread fit well inside the share, and so did Tatoeba en-es's
2,000 for the `small` model: the Tatoeba grid)."""

MIN_BLEU_SENTENCES = 200
"""Fewest validation sentences decoded for BLEU when there are that many (a noisier score below)."""

SPLIT_SHARE, MAX_SPLIT, MIN_SPLIT = 0.02, 2000, 100
"""The validation set split off a corpus without one: 2% of the pairs, at most 2000 (Tatoeba's
own validation size), at least 100 (or a tenth of a smaller corpus)."""

PADDING_FILL = 0.9
"""Share of a batch's padded positions that are tokens of its longer side (Multi30k: a 3000-token
batch held 2,603 target tokens at mean lengths 14.2/13.7, 0.87 of it)."""


class CorpusProfile(NamedTuple):
    """What the run measured of its corpus, after the tokenizer (lengths without <eos>)."""

    pairs: int
    src_tokens: int
    tgt_tokens: int
    src_p95: float = 0.0
    tgt_p95: float = 0.0
    valid_pairs: int = 0

    @property
    def mean_tgt(self) -> float:
        return self.tgt_tokens / max(self.pairs, 1)

    @property
    def mean_src(self) -> float:
        return self.src_tokens / max(self.pairs, 1)

    def describe(self) -> str:
        return (f"{self.pairs:,} training pairs, {self.src_tokens:,}/{self.tgt_tokens:,} tokens "
                f"(mean {self.mean_src:.1f}/{self.mean_tgt:.1f}, 95th percentile {self.src_p95:.0f}/"
                f"{self.tgt_p95:.0f}), {self.valid_pairs:,} validation pairs")


class Choice(NamedTuple):
    """One setting chosen: `name` (`train.warmup`), the value written to the config, and why."""

    name: str
    value: Any
    reason: str
    label: str = ""  # shown before the value in the log line ("dropout 0.2")

    def describe(self) -> str:
        return f"{self.name} auto: {self.reason}: {self.label}{self.value}"


def _first(rule: tuple[tuple[float, Any], ...], value: float) -> Any:
    return next(choice for below, choice in rule if value < below)


def dropout_for_epochs(epochs: float) -> float:
    """The dropout `DROPOUT_RULE` gives a run expected to reach `epochs` epochs."""
    return _first(DROPOUT_RULE, epochs)


def vocab_size_for_pairs(pairs: int) -> int:
    """The BPE vocabulary `VOCAB_RULE` gives a corpus of `pairs` training pairs."""
    return _first(VOCAB_RULE, pairs)


def batch_tokens_for_steps(steps_by_batch: dict[int, float]) -> int:
    """The batch (padded tokens) to train with, given the updates each candidate batch is expected
    to reach: the largest that reaches `ENOUGH_STEPS`, else the one that reaches the most (the
    largest of those, when a step budget makes them equal)."""
    enough = [batch for batch, steps in steps_by_batch.items() if steps >= ENOUGH_STEPS]
    if enough:
        return max(enough)
    most = max(steps_by_batch.values())
    return max(batch for batch, steps in steps_by_batch.items() if steps >= most * (1 - 1e-9))


def batches_that_fit(
    candidates: tuple[int, ...], free_bytes: float, fixed_bytes: float, bytes_per_token: float,
    headroom: float = MEMORY_HEADROOM,
) -> tuple[int, ...]:
    """The `candidates` (padded tokens per batch) whose training step fits in `headroom` of
    `free_bytes`: `fixed_bytes` (weights, gradients, Adam's moments) plus `bytes_per_token` for each
    padded token (activations, measured by a step); at least the smallest candidate."""
    fits = tuple(b for b in candidates if fixed_bytes + b * bytes_per_token <= headroom * free_bytes)
    return fits or (min(candidates),)


def preset_cost(preset: str, vocab_size: int) -> float:
    """Multiply-adds per target token of a training step, relative units: the weights a token
    passes through (encoder and decoder layers, the output projection over the vocabulary)."""
    config = ModelConfig.preset(preset)
    d, ff = config.d_model, config.d_ff
    encoder = config.num_encoder_layers * (4 * d * d + 2 * d * ff)
    decoder = config.num_decoder_layers * (8 * d * d + 2 * d * ff)
    return float(encoder + decoder + d * vocab_size)


def preset_for_run(pairs: int, small_tokens_seen: float) -> str:
    """The largest of `PRESET_CHOICES` whose `PRESET_NEEDS` the corpus (`pairs`) and the run (the
    target tokens the `small` model would see in it) meet."""
    fits = [p for p in PRESET_CHOICES if pairs >= PRESET_NEEDS[p][0]
            and small_tokens_seen >= PRESET_NEEDS[p][1]]
    return fits[-1] if fits else PRESET_CHOICES[0]


def warmup_for_updates(updates: float, share_allowed: bool) -> int | str:
    """`WARMUP_SHARE` of the run ('6%'; as steps when the run has no `train.max_steps` to take a
    share of), at most `MAX_WARMUP_STEPS`."""
    steps = WARMUP_SHARE * updates
    if steps > MAX_WARMUP_STEPS:
        return MAX_WARMUP_STEPS
    return f"{100 * WARMUP_SHARE:g}%" if share_allowed else max(1, round(steps))


def eval_share_for_updates(updates: float) -> float:
    """The share of the run between validations: `EVAL_SHARE`, or more where that would fall
    fewer than `MIN_STEPS_BETWEEN_VALIDATIONS` updates apart (whole percents)."""
    share = max(EVAL_SHARE, MIN_STEPS_BETWEEN_VALIDATIONS / max(updates, 1e-9))
    return min(MAX_EVAL_SHARE, math.ceil(round(100 * share, 6)) / 100)


def eval_every_for_updates(updates: float) -> str:
    """`train.eval_every` as a share of the run ('6%'), from `eval_share_for_updates`."""
    return f"{100 * eval_share_for_updates(updates):g}%"


def bleu_sentences_for_run(
    valid_pairs: int, mean_tgt_tokens: float, tokens_per_s: float, run_s: float, validations: int,
    share: float = VALIDATION_TIME_SHARE,
) -> int:
    """Validation sentences decoded for BLEU: as many as `validations` greedy decodings can take
    within `share` of `run_s` seconds of training, at `DECODE_TOKENS_PER_TRAIN_TOKEN` times the
    training speed (target tokens/s) for sentences of `mean_tgt_tokens` (+1 for <eos>); at
    least `MIN_BLEU_SENTENCES`, at most all `valid_pairs`."""
    seconds = share * run_s / max(validations, 1)
    fits = int(seconds * DECODE_TOKENS_PER_TRAIN_TOKEN * tokens_per_s / (mean_tgt_tokens + 1))
    return min(valid_pairs, max(MIN_BLEU_SENTENCES, fits))


def validation_split_size(pairs: int) -> int:
    """Pairs split off a training corpus of `pairs` pairs as its validation set."""
    return min(MAX_SPLIT, max(round(SPLIT_SHARE * pairs), min(MIN_SPLIT, pairs // 10)))


def training_seconds(budget_s: float, validation_share: float) -> float:
    """The training time of a run of `budget_s` seconds whose validations take `validation_share`
    of the training time (`train.bleu_time_share`: they may take that much, and the rules
    plan for it); the clock counts both."""
    return budget_s / (1.0 + validation_share)


def expected_epochs(
    tokens_per_s: float,
    tokens_per_batch: float,
    batches_per_epoch: int,
    *,
    budget_s: float | None,
    max_steps: int | None,
    max_epochs: int | None,
    batches_per_step: int = 1,
) -> float:
    """Epochs a run reaches within the first of its budgets to run out, at `tokens_per_s`
    (target tokens per second, all processes) and `tokens_per_batch` (target tokens of a batch)."""
    limits = []
    if budget_s is not None:
        limits.append(tokens_per_s * budget_s / max(tokens_per_batch * batches_per_epoch, 1e-9))
    if max_steps is not None:
        limits.append(max_steps * batches_per_step / max(batches_per_epoch, 1))
    if max_epochs is not None:
        limits.append(float(max_epochs))
    if not limits:
        raise ConfigError(
            "settings at 'auto' need a budget to estimate the epochs from: "
            "set train.max_minutes, train.max_steps or train.max_epochs"
        )
    return min(limits)


class Run(NamedTuple):
    """What the rules read of a run: its budgets, the settings given as numbers, and how to
    measure. `tokens_per_s(preset)`: target tokens/s training that preset (timed by the run,
    estimated by `estimated_speed` for the docs); `target_per_batch(batch_tokens)` and
    `batches_per_epoch(batch_tokens)`: of the training data."""

    budget_s: float | None
    max_steps: int | None
    max_epochs: int | None
    batches_per_step: int
    preset: str
    batch_tokens: int | str
    eval_every: int | str
    tokens_per_s: Callable[[str], float]
    target_per_batch: Callable[[int], float]
    batches_per_epoch: Callable[[int], int]
    validation_share: float = 0.0  # of the training time: validations that decode (`training_seconds`)
    batch_candidates: tuple[int, ...] = BATCH_TOKENS_CHOICES  # what `train.batch_tokens: auto` picks from


class Plan(NamedTuple):
    """`plan_auto`'s choices, and the estimates they were made from."""

    choices: list[Choice]
    preset: str  # chosen or given
    batch_tokens: int  # chosen or given
    steps: dict[int, float]  # updates expected with each candidate batch (the one batch if not auto)
    epochs: float  # expected with `preset` and `batch_tokens`

    def value(self, name: str, default: Any = None) -> Any:
        return next((c.value for c in self.choices if c.name == name), default)


AUTO_ORDER = ("model.preset", "train.batch_tokens", "model.dropout", "train.warmup", "train.eval_every",
              "train.bleu_max_sentences")
"""The settings `plan_auto` chooses, in the order it chooses them (each may read the ones before)."""


def plan_auto(auto: tuple[str, ...], profile: CorpusProfile | None, run: Run) -> Plan:
    """The choices for the settings named in `auto` (of `AUTO_ORDER`), in that order; a setting
    not in `auto` keeps the value `run` gives."""
    choices = []

    budget_s = None if run.budget_s is None else training_seconds(run.budget_s, run.validation_share)

    def epochs_with(preset: str, batch: int) -> float:
        return expected_epochs(
            run.tokens_per_s(preset), run.target_per_batch(batch), run.batches_per_epoch(batch),
            budget_s=budget_s, max_steps=run.max_steps, max_epochs=run.max_epochs,
            batches_per_step=run.batches_per_step,
        )

    preset = run.preset
    candidates = run.batch_candidates if "train.batch_tokens" in auto else (int(run.batch_tokens),)
    if "model.preset" in auto:
        if profile is None:
            raise ConfigError("model.preset auto needs a translation corpus to measure")
        seen = epochs_with(TIMED_PRESET, candidates[0]) * run.target_per_batch(candidates[0]) * \
            run.batches_per_epoch(candidates[0])
        preset = preset_for_run(profile.pairs, seen)
        reason = f"{profile.pairs:,} training pairs, {seen / 1e6:,.1f}M target tokens seen by {TIMED_PRESET}"
        choices.append(Choice("model.preset", preset, reason))
    steps = {b: epochs_with(preset, b) * run.batches_per_epoch(b) / run.batches_per_step for b in candidates}
    batch = batch_tokens_for_steps(steps)
    if "train.batch_tokens" in auto:
        expected = ", ".join(f"{s:,.0f} with {b}" for b, s in steps.items())
        choices.append(Choice("train.batch_tokens", batch, f"expected updates {expected}-token batches",
                              "batch_tokens "))
    epochs, updates = epochs_with(preset, batch), steps[batch]
    if "model.dropout" in auto:
        choices.append(Choice("model.dropout", dropout_for_epochs(epochs), f"expected {epochs:.0f} epochs",
                              "dropout "))
    if "train.warmup" in auto:
        warmup = warmup_for_updates(updates, share_allowed=run.max_steps is not None)
        choices.append(Choice("train.warmup", warmup, f"expected {updates:,.0f} updates"))
    eval_every = run.eval_every
    if "train.eval_every" in auto:
        eval_every = eval_every_for_updates(updates)
        if run.max_steps is None and run.budget_s is None:  # no progress to take a share of: steps
            eval_every = max(1, round(eval_share_for_updates(updates) * updates))
        choices.append(Choice("train.eval_every", eval_every, f"expected {updates:,.0f} updates"))
    if "train.bleu_max_sentences" in auto:
        if profile is None:
            raise ConfigError("train.bleu_max_sentences auto needs a translation corpus to measure")
        if isinstance(eval_every, str):
            validations = math.floor(1 / parse_share("train.eval_every", eval_every) + 1e-9) + 1
        else:
            validations = int(updates // max(int(eval_every), 1)) + 1
        run_s = updates * run.batches_per_step * run.target_per_batch(batch) / run.tokens_per_s(preset)
        sentences = bleu_sentences_for_run(profile.valid_pairs, profile.mean_tgt, run.tokens_per_s(preset),
                                           run_s, validations, run.validation_share or VALIDATION_TIME_SHARE)
        reason = (f"{profile.valid_pairs:,} validation pairs, {validations} validations in "
                  f"{run_s / 60:,.1f} minutes")
        choices.append(Choice("train.bleu_max_sentences", sentences, reason))
    return Plan(choices, preset, batch, steps, epochs)


def estimated_speed(small_tokens_per_s: float, vocab_size: int) -> Callable[[str], float]:
    """Target tokens/s of each preset, from the `small` model's with an 8000-token vocabulary,
    in inverse proportion to `preset_cost` (for the docs' table; a run times its own)."""
    reference = preset_cost(TIMED_PRESET, 8000)
    return lambda preset: small_tokens_per_s * reference / preset_cost(preset, vocab_size)


TWO_CORE_SMALL_TOKENS_PER_S = 6745.0
"""The `small` model's training speed that the docs' table assumes: a 2-core CPU (AMD EPYC, two
threads, bf16 as `train.precision: auto` chose), timed at start-up (RESULTS.md, "`train.batch_tokens:
auto`, and the recipe at the three speeds": "fp32 3,241, bf16 6,745")."""

MULTI30K_LENGTHS = (14.23, 13.69)
"""Mean tokens per source and target sentence of Multi30k de-en under a joint 8000-token BPE,
which the docs' table assumes for every corpus."""

BACKED_BY_RUNS = {(30_000, 60): "a run: Multi30k de-en, 2 threads (RESULTS.md)"}
"""Rows of the docs' table that a recorded run of the same choices backs (Multi30k validated on its
own 1,014 sentences rather than a split)."""


def estimated_plan(
    pairs: int, minutes: float, small_tokens_per_s: float = TWO_CORE_SMALL_TOKENS_PER_S,
    lengths: tuple[float, float] = MULTI30K_LENGTHS, max_steps: int | None = 1_000_000,
) -> Plan:
    """What every `auto` of the built-in files recipe chooses for `pairs` pairs of sentences of
    `lengths` tokens, `minutes` of training at `small_tokens_per_s` (no validation set given):
    the rules applied to estimates instead of measurements (`estimated_speed`, `PADDING_FILL`)."""
    mean_src, mean_tgt = lengths
    valid = validation_split_size(pairs)
    train_pairs = pairs - valid
    vocab = vocab_size_for_pairs(pairs)
    profile = CorpusProfile(train_pairs, round(train_pairs * mean_src), round(train_pairs * mean_tgt),
                            valid_pairs=valid)

    def target_per_batch(batch_tokens: int) -> float:
        return batch_tokens * PADDING_FILL * (mean_tgt + 1) / (max(mean_src, mean_tgt) + 1)

    run = Run(
        budget_s=60 * minutes, max_steps=max_steps, max_epochs=None, batches_per_step=1, preset=TIMED_PRESET,
        batch_tokens=BATCH_TOKENS_CHOICES[0], eval_every=AUTO,
        tokens_per_s=estimated_speed(small_tokens_per_s, vocab),
        target_per_batch=target_per_batch,
        batches_per_epoch=lambda b: math.ceil(train_pairs * (mean_tgt + 1) / target_per_batch(b)),
        validation_share=VALIDATION_TIME_SHARE,
    )
    plan = plan_auto(AUTO_ORDER, profile, run)
    return plan._replace(choices=[Choice("data.vocab_size", vocab, f"{pairs:,} pairs"), *plan.choices])


def choices_table(pairs: tuple[int, ...] = (30_000, 150_000, 1_000_000, 5_000_000),
                  minutes: tuple[float, ...] = (30, 60)) -> str:
    """docs/auto-settings.md's table: `estimated_plan` for each corpus size and budget."""
    names = ("data.vocab_size", "model.preset", "train.batch_tokens", "model.dropout", "train.warmup",
             "train.eval_every", "train.bleu_max_sentences")
    lines = ["| pairs | minutes | " + " | ".join(f"`{n.split('.')[1]}`" for n in names)
             + " | epochs | updates | backed by |", "|---" * (len(names) + 5) + "|"]
    for count in pairs:
        for budget in minutes:
            plan = estimated_plan(count, budget)
            values = " | ".join(str(plan.value(name)) for name in names)
            backing = BACKED_BY_RUNS.get((count, budget), "the rules alone")
            lines.append(f"| {count:,} | {budget:g} | {values} | {plan.epochs:,.1f} | "
                         f"{plan.steps[plan.batch_tokens]:,.0f} | {backing} |")
    return "\n".join(lines)
