"""`ModelConfig`: every size and switch of the Transformer in one validated dataclass.

The presets follow Table 3 of the paper ("base" and "big") plus two smaller sizes
that fit a laptop CPU.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from aiayn.core.ranges import NON_NEGATIVE_INT, POSITIVE, POSITIVE_INT, PROBABILITY
from aiayn.core.settings import setting, validate

ACTIVATIONS = ("relu", "gelu", "gelu_new", "swish")
"""Feed-forward activations (`ModelConfig.activation`), named as Hugging Face names them."""

PRESET_SIZES: dict[str, dict[str, Any]] = {
    name: dict(d_model=d, num_heads=h, num_encoder_layers=n, num_decoder_layers=n, d_ff=ff, dropout=p)
    for name, d, h, n, ff, p in (
        ("tiny", 64, 2, 2, 256, 0.0),
        ("small", 256, 8, 3, 1024, 0.1),
        ("base", 512, 8, 6, 2048, 0.1),  # Table 3, base
        ("big", 1024, 16, 6, 4096, 0.3),  # Table 3, big
    )
}
"""The one preset table (`ModelConfig.preset`): Table 3's base and big, and two smaller sizes."""

PRESETS = tuple(PRESET_SIZES)
"""The named sizes (`ModelConfig.preset`)."""


@dataclass
class ModelConfig:
    """Hyper-parameters of the Transformer (Sec. 3, Table 3).

    Each field is declared with its range or choices and what it means (`aiayn.core.settings`);
    `__post_init__` checks them all, and what relates two fields.
    """

    src_vocab_size: int = setting(
        8000, range=POSITIVE_INT, help="source vocabulary size (unused by DecoderOnlyLM)"
    )
    tgt_vocab_size: int = setting(8000, range=POSITIVE_INT, help="target vocabulary size (also the LM's)")
    d_model: int = setting(
        512, range=POSITIVE_INT, help="width of every sub-layer output and embedding (paper: 512)"
    )
    num_heads: int = setting(
        8, range=POSITIVE_INT, help="attention heads h (paper: 8); d_k = d_v = d_model / h unless head_dim"
    )
    head_dim: int | None = setting(
        None,
        range=POSITIVE_INT,
        help="d_k = d_v of each head; None: d_model / h, the paper's choice (Sec. 3.2.2; Table 3 row B "
        "varies it at fixed d_model and h)",
    )
    num_encoder_layers: int = setting(6, range=NON_NEGATIVE_INT, help="N of the encoder stack (paper: 6)")
    num_decoder_layers: int = setting(6, range=NON_NEGATIVE_INT, help="N of the decoder stack (paper: 6)")
    d_ff: int = setting(
        2048, range=POSITIVE_INT, help="inner width of the feed-forward network (paper: 2048, Eq. 2)"
    )
    dropout: float = setting(
        0.1, range=PROBABILITY, help="P_drop on sub-layer outputs and on embeddings + positions (Sec. 5.4)"
    )
    attention_dropout: float = setting(
        0.0, range=PROBABILITY, help="dropout on attention probabilities (not in the paper)"
    )
    activation_dropout: float = setting(
        0.0, range=PROBABILITY, help="dropout after the feed-forward activation (not in the paper)"
    )
    max_len: int = setting(
        1024, range=POSITIVE_INT, help="size of the positional table: the longest sequence accepted"
    )
    norm_first: bool = setting(
        False, help="False: post-LN as in the paper; True: pre-LN with a final LayerNorm"
    )
    positional: str = setting(
        "sinusoidal", choices=("sinusoidal", "learned"), help="Sec. 3.5's sinusoidal table, or learned"
    )
    activation: str = setting(
        "relu",
        choices=ACTIVATIONS,
        help="of the feed-forward network (paper: relu, Eq. 2); gelu is the exact (erf) GELU, gelu_new "
        "its tanh approximation (GPT-2), swish = SiLU (Marian / OPUS-MT)",
    )
    scale_embedding: bool = setting(
        True, help="multiply token embeddings by sqrt(d_model) (Sec. 3.4); GPT-2 does not"
    )
    output_bias: bool = setting(
        False,
        help="a learned bias on the pre-softmax projection (Marian's final_logits_bias; not in the paper)",
    )
    share_embeddings: bool = setting(
        False, help="one embedding matrix for source and target (Sec. 3.4); needs equal vocabulary sizes"
    )
    tie_output: bool = setting(True, help="the pre-softmax projection shares the target embedding (Sec. 3.4)")
    pad_id: int = setting(0, range=NON_NEGATIVE_INT, help="the padding token; padding masks come from it")
    bos_id: int = setting(
        1,
        range=NON_NEGATIVE_INT,
        help="the start token of every decoder input (Sec. 3.1's 'shifted right'); model directories "
        "written before it was stored mean 1",
    )
    eos_id: int = setting(
        2, range=NON_NEGATIVE_INT, help="the end token that closes every sequence (older directories: 2)"
    )
    unk_id: int | None = setting(
        3,
        range=NON_NEGATIVE_INT,
        help="the unknown-token symbol, or None for vocabularies without one (byte-level BPE); older "
        "directories: 3",
    )
    layer_norm_eps: float = setting(1e-5, range=POSITIVE, help="epsilon of every LayerNorm")
    extra: dict[str, Any] = setting(
        default_factory=dict, help="free-form metadata kept with the model (e.g. which task trained it)"
    )

    def __post_init__(self) -> None:
        validate(self, "ModelConfig")
        if self.head_dim is None and self.d_model % self.num_heads != 0:
            raise ValueError(
                f"ModelConfig.d_model ({self.d_model}) must be divisible by "
                f"ModelConfig.num_heads ({self.num_heads}), or ModelConfig.head_dim given"
            )
        if self.share_embeddings and self.src_vocab_size != self.tgt_vocab_size:
            raise ValueError(
                "ModelConfig.share_embeddings needs src_vocab_size == tgt_vocab_size, got "
                f"{self.src_vocab_size} and {self.tgt_vocab_size}"
            )
        smallest_vocab = min(self.src_vocab_size, self.tgt_vocab_size)
        for name in ("pad_id", "bos_id", "eos_id", "unk_id"):
            value = getattr(self, name)
            if value is not None and value >= smallest_vocab:
                raise ValueError(
                    f"ModelConfig.{name} must be a token id in [0, {smallest_vocab}), got {value!r}"
                )

    @property
    def d_k(self) -> int:
        """d_k = d_v of each head: `head_dim`, or d_model / h when it is None (Sec. 3.2.2)."""
        return self.d_model // self.num_heads if self.head_dim is None else self.head_dim

    # ----------------------------------------------------------------- presets
    @classmethod
    def _preset(cls, sizes: dict[str, Any], overrides: dict[str, Any]) -> ModelConfig:
        vocab_size = overrides.pop("vocab_size", None)
        if vocab_size is not None:
            # One shared vocabulary, shared embeddings and tied output, as in Sec. 3.4.
            sizes = sizes | {  # a new dict: PRESET_SIZES stays as written
                "src_vocab_size": vocab_size,
                "tgt_vocab_size": vocab_size,
                "share_embeddings": True,
                "tie_output": True,
            }
        unknown = set(overrides) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise ValueError(f"unknown ModelConfig field(s): {', '.join(sorted(unknown))}")
        return cls(**(sizes | overrides))

    @classmethod
    def base(cls, **overrides: Any) -> ModelConfig:
        """Transformer (base) of Table 3: d_model 512, 8 heads, 6+6 layers, d_ff 2048, dropout 0.1."""
        return cls.preset("base", **overrides)

    @classmethod
    def big(cls, **overrides: Any) -> ModelConfig:
        """Transformer (big) of Table 3: d_model 1024, 16 heads, 6+6 layers, d_ff 4096, dropout 0.3."""
        return cls.preset("big", **overrides)

    @classmethod
    def small(cls, **overrides: Any) -> ModelConfig:
        """A CPU-friendly size: d_model 256, 8 heads, 3+3 layers, d_ff 1024, dropout 0.1."""
        return cls.preset("small", **overrides)

    @classmethod
    def tiny(cls, **overrides: Any) -> ModelConfig:
        """A size for tests: d_model 64, 2 heads, 2+2 layers, d_ff 256, dropout 0.0."""
        return cls.preset("tiny", **overrides)

    @classmethod
    def preset(cls, name: str, **overrides: Any) -> ModelConfig:
        """Build a preset by name: 'tiny', 'small', 'base' or 'big' (`PRESET_SIZES`)."""
        if name not in PRESET_SIZES:
            raise ValueError(f"unknown preset {name!r}; valid presets: {', '.join(PRESETS)}")
        return cls._preset(PRESET_SIZES[name], overrides)

    # ------------------------------------------------------------- serialising
    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of the fields (the model directory format, `aiayn.formats`, adds
        its version around it).

        `head_dim` is written only when given, so that a model with the paper's d_model / h has
        the config.json it had before the setting existed (and readers without it still load it).
        """
        fields = dataclasses.asdict(self)
        if fields["head_dim"] is None:
            del fields["head_dim"]
        return fields

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelConfig:
        """Inverse of `to_dict`; an unknown key raises `ValueError`."""
        valid = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - valid
        if unknown:
            raise ValueError(
                f"unknown ModelConfig field(s) {sorted(unknown)}; valid fields: {sorted(valid)}"
            )
        return cls(**data)
