"""The choices and defaults of the decoding options, in a module that imports no torch.

The command line reads them when it builds its parsers (`aiayn --help` must not load torch);
the engine modules import them from here, so each has one home.
"""

from aiayn.core.ranges import Range

DEFAULT_BATCH_TOKENS = 4096
"""Padded source tokens per decoding batch (beam search decodes beam x as many rows)."""

LONG_LINE_ACTIONS = ("truncate", "error")
"""What to do with a line longer than the model's max_len: cut it (with a warning) or raise."""

COMPILE_CHOICES = ("auto", "always", "never")
"""When the decoding step is compiled (`aiayn.load(..., compile=)`, `--compile`; True and False
are 'always' and 'never'): 'auto' where a kept step exists or building one pays (`aiayn.runtime.auto`)."""

QUANTIZATIONS = ("int8",)
"""What `aiayn.load(..., quantize=)` accepts: int8 linear layers (`aiayn.runtime.int8`)."""

EXPORT_QUANTIZATIONS = ("int8", "int8_float32", "int16", "float16", "bfloat16")
"""The weight types of a CTranslate2 export (`aiayn.export.ctranslate2`)."""


# ------------------------------------------------------------------ the controls' ranges
# Declared once, here: the command line (`aiayn translate`, `aiayn lm generate`), the service's
# request models and their OpenAPI schema (`aiayn.serve.schemas`), and the engine's own checks
# (`aiayn.decoding.controls.Controls`, `aiayn.decoding.sampling.Sampling`) all read these, so a
# value one accepts the others accept too. Each bound comes from the arithmetic the option takes
# part in (float32 logits and scores), so that no value inside a range can make a score NaN or
# infinite; a last check refuses any hypothesis whose score is still not finite
# (`aiayn.inference.base.check_finite_scores`).

FLOAT32_TINY = 1.1754943508222875e-38
"""The smallest normal float32 (`torch.finfo(torch.float32).tiny`): below it a divisor rounds
towards 0 in float32 and a finite logit divided by it overflows to inf (NaN after the softmax)."""

FLOAT32_MAX = 3.4028234663852886e38
"""The largest finite float32: above it a factor rounds to inf in float32 (0 x inf and
-inf / inf are NaN)."""

REPETITION_PENALTY = Range(low=FLOAT32_TINY, high=FLOAT32_MAX)
"""A seen token's logit is divided (positive) or multiplied (negative) by p in float32: p must be
a normal, finite float32 (see FLOAT32_TINY, FLOAT32_MAX); the penalised logits are then kept
within +-`aiayn.decoding.controls.PENALISED_LOGIT_LIMIT`, so a sentence's summed log-probabilities
stay finite. (The bound that let NaN through was `> 0`: 6e-239 is 0 in float32.)"""

TEMPERATURE = Range(low=0, high=FLOAT32_MAX)
"""The logits, shifted so that their maximum is 0, are divided by T (0: the arg-max; a T under
FLOAT32_TINY is taken as FLOAT32_TINY, which keeps the maximum at 0 / T = 0): any T that is a
finite float32 leaves the maximum at 0 and a forbidden token at -inf / T = -inf."""

TOP_K = Range(low=0, integer=True)
"""The k most probable tokens (0: all; a k at least the vocabulary keeps them all)."""

GENERATE_TOP_K = Range(low=1, integer=True)
"""A language model's top-k (`aiayn lm generate`, `POST /v1/generate`): the k most probable."""

TOP_P = Range(low=0, high=1, low_open=True)
"""The nucleus mass: the first token is always kept, so any p in (0, 1] leaves one."""

LENGTH_PENALTY = Range(low=0, high=10)
"""alpha of lp(Y) = ((5 + |Y|) / 6)^alpha (float32): alpha >= 0 keeps lp >= 1, so dividing a
score by it never makes it larger in size; alpha <= 10 keeps lp finite for every output up to
6 x FLOAT32_MAX^(1/10) - 5 (about 43,000) tokens."""

MAX_OUTPUT_RATIO = Range(low=0, high=1000, low_open=True)
"""ceil(r x source tokens) output tokens at most: any r > 0 allows at least 1 (`<eos>`); 1000
keeps r x source tokens an exact, finite number for any source a model takes (a larger ratio
would never bind before the other length limits)."""

NO_REPEAT_NGRAM_SIZE = Range(low=0, integer=True)
"""n-gram blocking (0: off): it only sets scores to -inf, and never every token of a step."""

SEED = Range(low=0, high=2**63, high_open=True, integer=True)
"""The seed of a `torch.Generator` (a non-negative 64-bit integer)."""

CONTROL_RANGES = {
    "repetition_penalty": REPETITION_PENALTY,
    "temperature": TEMPERATURE,
    "top_k": TOP_K,
    "top_p": TOP_P,
    "max_output_ratio": MAX_OUTPUT_RATIO,
    "no_repeat_ngram_size": NO_REPEAT_NGRAM_SIZE,
    "seed": SEED,
    "alpha": LENGTH_PENALTY,
}
"""Every numeric decoding option, by its keyword name, and its range."""
