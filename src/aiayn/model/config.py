"""`ModelConfig`: every size and switch of the Transformer in one validated dataclass.

The presets follow Table 3 of the paper ("base" and "big") plus two smaller sizes
that fit a laptop CPU.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Literal

FORMAT_VERSION = 1
"""Version of the `config.json` format written by `save_pretrained`."""


@dataclass
class ModelConfig:
    """Hyper-parameters of the Transformer (Sec. 3, Table 3).

    Attributes:
        src_vocab_size: source vocabulary size (unused by `DecoderOnlyLM`).
        tgt_vocab_size: target vocabulary size (also the LM vocabulary).
        d_model: width of every sub-layer output and embedding (paper: 512).
        num_heads: number of attention heads h (paper: 8); d_k = d_v = d_model / h.
        num_encoder_layers: N for the encoder stack (paper: 6).
        num_decoder_layers: N for the decoder stack (paper: 6).
        d_ff: inner width of the position-wise feed-forward network (paper: 2048).
        dropout: P_drop on sub-layer outputs and on embeddings + positions (Sec. 5.4).
        attention_dropout: dropout on attention probabilities (not in the paper; 0 by default).
        activation_dropout: dropout inside the feed-forward network, after the activation (not
            in the paper; 0 by default).
        max_len: size of the positional table: the longest sequence the model accepts.
        norm_first: False = post-LN as in the paper, True = pre-LN with a final LayerNorm.
        positional: 'sinusoidal' (Sec. 3.5) or 'learned' embeddings.
        activation: 'relu' (paper, Eq. 2) or 'gelu'.
        share_embeddings: one embedding matrix for source and target (Sec. 3.4);
            needs src_vocab_size == tgt_vocab_size.
        tie_output: the pre-softmax projection shares the target embedding matrix (Sec. 3.4).
        pad_id: id of the padding token; padding masks are derived from it.
        bos_id: id of the start token that opens every decoder input (Sec. 3.1's "shifted
            right"); model directories written before it was stored mean 1.
        eos_id: id of the end token that closes every sequence (older directories: 2).
        unk_id: id of the unknown-token symbol, or None for vocabularies without one (byte-level
            BPE); older directories: 3.
        layer_norm_eps: epsilon of every LayerNorm.
    """

    src_vocab_size: int = 8000
    tgt_vocab_size: int = 8000
    d_model: int = 512
    num_heads: int = 8
    num_encoder_layers: int = 6
    num_decoder_layers: int = 6
    d_ff: int = 2048
    dropout: float = 0.1
    attention_dropout: float = 0.0
    activation_dropout: float = 0.0
    max_len: int = 1024
    norm_first: bool = False
    positional: Literal["sinusoidal", "learned"] = "sinusoidal"
    activation: Literal["relu", "gelu"] = "relu"
    share_embeddings: bool = False
    tie_output: bool = True
    pad_id: int = 0
    bos_id: int = 1
    eos_id: int = 2
    unk_id: int | None = 3
    layer_norm_eps: float = 1e-5
    extra: dict[str, Any] = field(default_factory=dict)
    """Free-form metadata kept with the model (e.g. which task trained it)."""

    def __post_init__(self) -> None:
        positive = (
            "src_vocab_size", "tgt_vocab_size", "d_model", "num_heads", "d_ff", "max_len",
        )
        for name in positive:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"ModelConfig.{name} must be a positive integer, got {value!r}")
        for name in ("num_encoder_layers", "num_decoder_layers"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"ModelConfig.{name} must be an integer >= 0, got {value!r}")
        if self.d_model % self.num_heads != 0:
            raise ValueError(
                f"ModelConfig.d_model ({self.d_model}) must be divisible by "
                f"ModelConfig.num_heads ({self.num_heads})"
            )
        for name in ("dropout", "attention_dropout", "activation_dropout"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
                raise ValueError(f"ModelConfig.{name} must be in [0, 1), got {value!r}")
        if self.positional not in ("sinusoidal", "learned"):
            raise ValueError(
                f"ModelConfig.positional must be 'sinusoidal' or 'learned', got {self.positional!r}"
            )
        if self.activation not in ("relu", "gelu"):
            raise ValueError(
                f"ModelConfig.activation must be 'relu' or 'gelu', got {self.activation!r}"
            )
        if self.share_embeddings and self.src_vocab_size != self.tgt_vocab_size:
            raise ValueError(
                "ModelConfig.share_embeddings needs src_vocab_size == tgt_vocab_size, got "
                f"{self.src_vocab_size} and {self.tgt_vocab_size}"
            )
        smallest_vocab = min(self.src_vocab_size, self.tgt_vocab_size)
        for name in ("pad_id", "bos_id", "eos_id", "unk_id"):
            value = getattr(self, name)
            if name == "unk_id" and value is None:
                continue
            if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < smallest_vocab:
                raise ValueError(
                    f"ModelConfig.{name} must be a token id in [0, {smallest_vocab}), got {value!r}"
                )
        eps = self.layer_norm_eps
        if not isinstance(eps, (int, float)) or isinstance(eps, bool) or not 0 < eps < math.inf:
            raise ValueError(f"ModelConfig.layer_norm_eps must be > 0, got {self.layer_norm_eps!r}")

    @property
    def head_dim(self) -> int:
        """d_k = d_v = d_model / h (Sec. 3.2.2)."""
        return self.d_model // self.num_heads

    # ----------------------------------------------------------------- presets
    @classmethod
    def _preset(cls, sizes: dict[str, Any], overrides: dict[str, Any]) -> ModelConfig:
        vocab_size = overrides.pop("vocab_size", None)
        if vocab_size is not None:
            # One shared vocabulary, shared embeddings and tied output, as in Sec. 3.4.
            sizes |= {
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
        sizes = dict(d_model=512, num_heads=8, num_encoder_layers=6, num_decoder_layers=6,
                     d_ff=2048, dropout=0.1)
        return cls._preset(sizes, overrides)

    @classmethod
    def big(cls, **overrides: Any) -> ModelConfig:
        """Transformer (big) of Table 3: d_model 1024, 16 heads, 6+6 layers, d_ff 4096, dropout 0.3."""
        sizes = dict(d_model=1024, num_heads=16, num_encoder_layers=6, num_decoder_layers=6,
                     d_ff=4096, dropout=0.3)
        return cls._preset(sizes, overrides)

    @classmethod
    def small(cls, **overrides: Any) -> ModelConfig:
        """A CPU-friendly size: d_model 256, 8 heads, 3+3 layers, d_ff 1024, dropout 0.1."""
        sizes = dict(d_model=256, num_heads=8, num_encoder_layers=3, num_decoder_layers=3,
                     d_ff=1024, dropout=0.1)
        return cls._preset(sizes, overrides)

    @classmethod
    def tiny(cls, **overrides: Any) -> ModelConfig:
        """A size for tests: d_model 64, 2 heads, 2+2 layers, d_ff 256, dropout 0.0."""
        sizes = dict(d_model=64, num_heads=2, num_encoder_layers=2, num_decoder_layers=2,
                     d_ff=256, dropout=0.0)
        return cls._preset(sizes, overrides)

    @classmethod
    def preset(cls, name: str, **overrides: Any) -> ModelConfig:
        """Build a preset by name: 'tiny', 'small', 'base' or 'big'."""
        builders = {"tiny": cls.tiny, "small": cls.small, "base": cls.base, "big": cls.big}
        if name not in builders:
            raise ValueError(f"unknown preset {name!r}; valid presets: {', '.join(builders)}")
        return builders[name](**overrides)

    # ------------------------------------------------------------- serialising
    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict, with the format version under `format_version`."""
        return {"format_version": FORMAT_VERSION, **dataclasses.asdict(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelConfig:
        """Inverse of `to_dict`; an unknown key or a newer format version raises `ValueError`."""
        data = dict(data)
        version = data.pop("format_version", FORMAT_VERSION)
        if not isinstance(version, int) or version > FORMAT_VERSION:
            raise ValueError(
                f"config format_version {version!r} is newer than this aiayn supports "
                f"({FORMAT_VERSION}); upgrade aiayn"
            )
        valid = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - valid
        if unknown:
            raise ValueError(
                f"unknown ModelConfig field(s) {sorted(unknown)}; valid fields: {sorted(valid)}"
            )
        return cls(**data)
