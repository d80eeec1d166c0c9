"""aiayn: the Transformer of "Attention Is All You Need" (Vaswani et al., 2017), from scratch."""

from aiayn.inference import load
from aiayn.model import DecoderOnlyLM, EncoderOnly, ModelConfig, Transformer
from aiayn.model_dir import load_model

__version__ = "0.1.0"

__all__ = [
    "DecoderOnlyLM", "EncoderOnly", "ModelConfig", "Transformer", "__version__", "load", "load_model",
]
