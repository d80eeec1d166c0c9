"""The request and response bodies of the service (pydantic models).

Requests are strict: a field of the wrong type (`"beam": "4"`, `"beam": 2.5`, `"text": "a"`
where a list is expected) or an unknown field is refused (422) rather than coerced or
ignored. Limits that depend on the model or on the command line (sentences per request,
tokens per sentence, new tokens) are checked by the app, which names the option. The ranges of the
numeric decoding fields are `aiayn.core.decoding_choices`' (the command line's too).
"""

from __future__ import annotations

from typing import Annotated, Any, get_args

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from aiayn.core.decoding_choices import (
    GENERATE_TOP_K,
    LENGTH_PENALTY,
    MAX_OUTPUT_RATIO,
    NO_REPEAT_NGRAM_SIZE,
    REPETITION_PENALTY,
    SEED,
    TEMPERATURE,
    TOP_K,
    TOP_P,
)

MAX_BEAM = 16
"""The largest beam a request may ask for (a larger one costs much and gains nothing)."""


def _valid_unicode(text: str) -> str:
    """JSON may spell lone UTF-16 surrogates (\\ud800), which are no text: refuse them."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("the text holds a lone surrogate (\\ud800-\\udfff): not valid Unicode") from None
    return text


Text = Annotated[str, AfterValidator(_valid_unicode)]


def _not_blank(text: str) -> str:
    if not text.strip():
        raise ValueError("the text is empty")
    return text


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    @model_validator(mode="before")
    @classmethod
    def _integral_numbers(cls, data: Any) -> Any:
        """JSON has one number type and the schema's `integer` admits 4.0: an integer field takes it
        as 4 (2.5 stays refused). A model validator, as a field validator would hide the field's
        bounds from the OpenAPI document."""
        if not isinstance(data, dict):
            return data
        fields = cls.model_fields
        return {
            key: int(value)
            if isinstance(value, float) and value.is_integer() and key in fields
            and int in (get_args(fields[key].annotation) or (fields[key].annotation,))
            else value
            for key, value in data.items()
        }


class TranslateRequest(Strict):
    """`POST /v1/translate`: sentences and the search (paper defaults: beam 4, alpha 0.6)."""

    text: list[Text] = Field(description="source sentences")
    beam: int = Field(4, ge=1, le=MAX_BEAM, description="beam size; 1 = greedy search")
    alpha: float = Field(0.6, **LENGTH_PENALTY.schema_bounds(), allow_inf_nan=False,
                         description="length penalty exponent")
    nbest: int = Field(1, ge=1, le=MAX_BEAM, description="translations per sentence (<= beam)")
    prefix: Text | list[Text | None] | None = Field(
        None, description="target prefix, forced then continued: one for all sentences or one per sentence"
    )
    sample: bool = Field(False, description="draw each token instead of searching (beam unused)")
    top_k: int | None = Field(None, **TOP_K.schema_bounds(), description="sample: from the k most probable "
                              "tokens (0: all)")
    top_p: float | None = Field(None, **TOP_P.schema_bounds(), allow_inf_nan=False,
                                description="sample: nucleus mass")
    temperature: float = Field(1.0, **TEMPERATURE.schema_bounds(), allow_inf_nan=False,
                               description="sample: 0 = arg-max")
    seed: int | None = Field(None, **SEED.schema_bounds(),
                             description="sample: random seed (default: a fresh one)")
    no_repeat_ngram_size: int = Field(0, **NO_REPEAT_NGRAM_SIZE.schema_bounds(),
                                      description="never repeat an n-gram of this size (0: off)")
    repetition_penalty: float = Field(1.0, **REPETITION_PENALTY.schema_bounds(), allow_inf_nan=False,
                                      description="penalise tokens already generated (1: off)")
    max_output_ratio: float | None = Field(None, **MAX_OUTPUT_RATIO.schema_bounds(), allow_inf_nan=False,
                                           description="output tokens <= ceil(ratio x source tokens)")
    token_scores: bool = Field(False, description="also return each translation's token_scores, words and "
                               "word_scores (the model's plain log-probabilities)")
    alignments: bool = Field(False, description="also return each translation's source-output word "
                             "alignment (Pharaoh format; not available with a CTranslate2 model: 422)")
    include: list[list[Text]] | None = Field(
        None, description="per sentence, phrases its translation must contain (beam >= 2; not with a "
        "CTranslate2 model: 422); each translation then says constraints_met")
    exclude: list[list[Text]] | None = Field(
        None, description="per sentence, phrases its translation must not contain (blocked at word level)")

    @model_validator(mode="after")
    def _nbest_within_beam(self) -> TranslateRequest:
        if self.nbest > self.beam:
            raise ValueError(f"nbest ({self.nbest}) must be <= beam ({self.beam})")
        if self.sample and self.nbest != 1:
            raise ValueError(f"sample gives one translation per sentence; nbest must be 1, got {self.nbest}")
        if isinstance(self.prefix, list) and len(self.prefix) != len(self.text):
            raise ValueError(f"{len(self.prefix)} prefixes for {len(self.text)} sentences")
        for name in ("include", "exclude"):
            phrases = getattr(self, name)
            if phrases is not None and len(phrases) != len(self.text):
                raise ValueError(f"{name} has {len(phrases)} lists for {len(self.text)} sentences (one each)")
        return self

    def controls(self) -> dict:
        """The keyword arguments of `Translator.translate_nbest` for the decoding controls."""
        return {
            "prefix": self.prefix, "sample": self.sample, "top_k": self.top_k, "top_p": self.top_p,
            "temperature": self.temperature, "seed": self.seed,
            "no_repeat_ngram_size": self.no_repeat_ngram_size,
            "repetition_penalty": self.repetition_penalty, "max_output_ratio": self.max_output_ratio,
            "include": self.include, "exclude": self.exclude,
        }

    def plain(self) -> bool:
        """No control set: the request may share a batch with others."""
        return self.controls() == TranslateRequest(text=[]).controls()


class Translation(BaseModel):
    text: str
    score: float
    token_scores: list[float] | None = Field(
        None, description="with token_scores: log p of each output token, `<eos>` last (their sum is the "
        "forced-decoding score of the pair)")
    words: list[str] | None = Field(None, description="with token_scores: the output's whitespace words")
    word_scores: list[float] | None = Field(
        None, description="with token_scores: each word's tokens' log p summed")
    alignment: str | None = Field(
        None, description="with alignments: source-output word links, Pharaoh format (`0-0 1-2`)")
    constraints_met: bool | None = Field(
        None, description="with include or exclude: false when the length limit came before the "
        "translation held every phrase to include")


class TranslateResponse(BaseModel):
    translations: list[list[Translation]]


class GenerateRequest(Strict):
    """`POST /v1/generate` (language models): a prompt and the sampling settings."""

    prompt: Text = Field("", description="the text to continue (empty: start from <bos>)")
    max_new_tokens: int = Field(100, ge=0, description="the most tokens generated")
    temperature: float = Field(0.8, **TEMPERATURE.schema_bounds(), allow_inf_nan=False,
                               description="0 = greedy")
    top_k: int | None = Field(None, **GENERATE_TOP_K.schema_bounds(),
                              description="sample from the k most probable tokens")
    top_p: float | None = Field(None, **TOP_P.schema_bounds(), allow_inf_nan=False,
                                description="nucleus mass")
    seed: int | None = Field(None, **SEED.schema_bounds(), description="random seed (default: a fresh one)")


class GenerateResponse(BaseModel):
    text: str


class AttentionRequest(Strict):
    """`POST /v1/attention`: one sentence (a translation model's source, or an LM's text)."""

    text: Annotated[Text, AfterValidator(_not_blank)] = Field(
        description="one sentence (not blank)", json_schema_extra={"pattern": r"\S"}
    )
    beam: int = Field(4, ge=1, le=MAX_BEAM, description="beam size of the translation whose attention "
                      "is shown (1 = greedy; a language model's attention is over the text itself)")


class ErrorDetail(BaseModel):
    """What an error says: its status, one line, and for some errors the limit or the fields at fault."""

    model_config = ConfigDict(extra="allow")

    status: int
    message: str


class ErrorResponse(BaseModel):
    """The body of every error (4xx, 5xx)."""

    error: ErrorDetail


ERRORS = {
    400: "malformed JSON, or no body",
    401: "missing or wrong API key (with --api-key)",
    404: "the endpoint needs the other kind of model (translation or language model)",
    413: "the body is over --max-request-bytes, or more sentences than --max-sentences",
    422: "a field of the wrong type, out of range or unknown; a text longer than the model takes",
    501: "the engine cannot do what was asked",
    503: "the service is shutting down",
}
"""The error statuses of the POST endpoints and what each means (documented in the OpenAPI schema)."""


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """FastAPI's `responses=` for these error statuses (all by default): each an ErrorResponse."""
    return {
        status: {"model": ErrorResponse, "description": ERRORS[status]} for status in statuses or ERRORS
    }
