"""Deprecated path of `aiayn.formats` (one release; each name warns).

The one old module path kept as a file: `aiayn.model_dir` was where the model-directory names
were imported from (`model_format`'s among them, merged into `aiayn.formats`). The other old
top-level modules are reached as attributes of `aiayn` (`aiayn/__init__.py`).
"""

from aiayn.core.moved import moved

__all__ = [  # the names this module exported before the move: `import *` warns for each
    "CONFIG_FILE", "MODEL_CLASSES", "UNSTORED_BUFFER_LIMIT", "WEIGHTS_FILE", "ModelDirectory",
    "StoredTensor", "build_model", "check_unstored_buffers", "check_weights_file", "from_pretrained",
    "is_model_dir", "load_model", "load_model_of", "load_tokenizers", "load_weights", "meta_model",
    "model_class", "open_model", "read_model_dir", "read_model_json", "read_weights_header",
    "save_pretrained",
]

__getattr__ = moved(__name__, "aiayn.formats")
