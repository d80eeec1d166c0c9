"""Export: run an aiayn model with CTranslate2 or Hugging Face Transformers, same function.

common (model directory in, special tokens, output directory) -> ctranslate2 (the spec) and
huggingface (+ hf_tokenizer) -> engine (a CTranslate2 export behind aiayn's `Translator`
interface, for `aiayn translate/evaluate/score/lm generate`). The runtimes come with the
optional extra `export`; nothing here imports them until an export or engine is used.
"""

from aiayn.export.ctranslate2 import QUANTIZATIONS, export_ctranslate2
from aiayn.export.engine import (
    CTranslate2Generator,
    CTranslate2Translator,
    is_ctranslate2_dir,
    load_translator,
)
from aiayn.export.huggingface import export_huggingface

__all__ = [
    "QUANTIZATIONS",
    "CTranslate2Generator",
    "CTranslate2Translator",
    "export_ctranslate2",
    "export_huggingface",
    "is_ctranslate2_dir",
    "load_translator",
]
