"""aiayn: the Transformer of "Attention Is All You Need" (Vaswani et al., 2017), from scratch."""

from aiayn.inference import load
from aiayn.model import DecoderOnlyLM, EncoderOnly, ModelConfig, Transformer, load_model

__version__ = "0.1.0"

__all__ = [
    "DecoderOnlyLM", "EncoderOnly", "ModelConfig", "Transformer", "__version__", "load", "load_model",
]
