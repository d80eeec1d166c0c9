"""Model formats: aiayn's model directory and the foreign formats it reads and writes.

- `model_dir`: the model directory (`config.json` + `model.safetensors`): `load_model`,
  `save_pretrained`, `from_pretrained`, `read_model_dir`, the format version and the config's
  (de)serialisation; `layout` checks a directory against the model before allocating it.
- `model_card`: the `README.md` model card written beside the weights.
- `hf_mapping` and `hf_format`: Hugging Face Transformers checkpoints (MarianMT, GPT-2) and
  their import into a model directory.
- `ctranslate2_format`: the layout of a CTranslate2 export.

The model (`aiayn.model`) imports nothing from here; the model-directory names are importable
from `aiayn.formats` itself.
"""

from aiayn.formats.layout import (
    UNSTORED_BUFFER_LIMIT,
    StoredTensor,
    check_unstored_buffers,
    check_weights_file,
    materialize,
    meta_model,
    read_weights_header,
)
from aiayn.formats.model_dir import (
    CONFIG_FILE,
    FORMAT_VERSION,
    MODEL_CLASSES,
    WEIGHTS_FILE,
    ModelDirectory,
    build_model,
    checked_layout,
    config_from_dict,
    config_to_dict,
    from_pretrained,
    is_model_dir,
    load_model,
    load_model_of,
    load_tokenizers,
    load_weights,
    model_class,
    open_model,
    read_model_dir,
    read_model_json,
    save_pretrained,
)

__all__ = [
    "CONFIG_FILE", "FORMAT_VERSION", "MODEL_CLASSES", "UNSTORED_BUFFER_LIMIT", "WEIGHTS_FILE",
    "ModelDirectory", "StoredTensor", "build_model", "check_unstored_buffers", "check_weights_file",
    "checked_layout", "config_from_dict", "config_to_dict", "from_pretrained", "is_model_dir",
    "load_model", "load_model_of", "load_tokenizers", "load_weights", "materialize", "meta_model",
    "model_class", "open_model", "read_model_dir", "read_model_json", "read_weights_header",
    "save_pretrained",
]
