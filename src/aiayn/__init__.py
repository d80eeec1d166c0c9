"""aiayn: the Transformer of "Attention Is All You Need" (Vaswani et al., 2017), from scratch.

The public names are imported on first use (`aiayn.core.lazy_names`), so that `import aiayn.core.errors`
or `aiayn --help` does not load torch.
"""

from typing import TYPE_CHECKING

from aiayn.core.lazy_names import lazy_names

if TYPE_CHECKING:
    from aiayn.formats import load_model
    from aiayn.inference import load
    from aiayn.model import DecoderOnlyLM, EncoderOnly, ModelConfig, Transformer

__version__ = "0.1.0"

__all__ = [
    "DecoderOnlyLM", "EncoderOnly", "ModelConfig", "Transformer", "__version__", "load", "load_model",
]

__getattr__, __dir__ = lazy_names(__name__, {
    "DecoderOnlyLM": "aiayn.model", "EncoderOnly": "aiayn.model", "ModelConfig": "aiayn.model",
    "Transformer": "aiayn.model", "load": "aiayn.inference", "load_model": "aiayn.formats",
})
