"""Export: write an aiayn model for CTranslate2 or Hugging Face Transformers, same function.

common (model directory in, special tokens, output directory) -> ctranslate2 (the spec) and
huggingface (+ hf_tokenizer). Only the writers live here: running a CTranslate2 export is
`aiayn.inference` (`aiayn.load(EXPORT_DIR)`). The runtimes come with the optional extra
`export`; nothing here imports them until an export is written.
"""

from aiayn.export.ctranslate2 import QUANTIZATIONS, export_ctranslate2
from aiayn.export.huggingface import export_huggingface

__all__ = ["QUANTIZATIONS", "export_ctranslate2", "export_huggingface"]
