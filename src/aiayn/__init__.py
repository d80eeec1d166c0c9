"""aiayn: the Transformer of "Attention Is All You Need" (Vaswani et al., 2017), from scratch.

The public names are imported on first use (`aiayn.core.lazy_names`), so that `import aiayn.core.errors`
or `aiayn --help` does not load torch.

The modules that moved into `aiayn.formats` and `aiayn.core` keep their old names here for one
release: `aiayn.errors` or `from aiayn import errors` gives a module whose every name warns
(`aiayn.core.moved`); `import aiayn.errors` no longer works. `aiayn.model_dir` is still a module.
"""

from typing import TYPE_CHECKING, Any

from aiayn.core.lazy_names import lazy_names
from aiayn.core.moved import moved_module

if TYPE_CHECKING:
    from aiayn.formats import load_model
    from aiayn.inference import load
    from aiayn.model import DecoderOnlyLM, EncoderOnly, ModelConfig, Transformer

__version__ = "0.1.0"

__all__ = [
    "DecoderOnlyLM", "EncoderOnly", "ModelConfig", "Transformer", "__version__", "load", "load_model",
]

MOVED_MODULES = {
    "model_format": "aiayn.formats", "model_card": "aiayn.formats.model_card",
    "hf_format": "aiayn.formats.hf_format", "hf_mapping": "aiayn.formats.hf_mapping",
    "ctranslate2_format": "aiayn.formats.ctranslate2_format",
    "errors": "aiayn.core.errors", "settings": "aiayn.core.settings",
}
"""The old top-level modules without a file (removed in the next release) -> their new path."""

_public_name, __dir__ = lazy_names(__name__, {
    "DecoderOnlyLM": "aiayn.model", "EncoderOnly": "aiayn.model", "ModelConfig": "aiayn.model",
    "Transformer": "aiayn.model", "load": "aiayn.inference", "load_model": "aiayn.formats",
})


def __getattr__(name: str) -> Any:
    if name in MOVED_MODULES:  # made on each use, never stored: nothing is registered at import
        return moved_module(f"{__name__}.{name}", MOVED_MODULES[name])
    return _public_name(name)
