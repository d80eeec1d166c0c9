"""Inference: one interface to translate and to generate, whichever backend decodes.

interface (`Translator`, `Generator`, `Translation`) -> base (what every backend shares) ->
torch_translator / torch_generator (aiayn's own decoders, `aiayn.decoding`; ensemble: several
translation models decoded as one) and ctranslate2 (a CTranslate2 export) -> loader (`load(DIR)`,
also `aiayn.load`; `load([A, B])`: an ensemble).

    translator = aiayn.load("runs/multi30k")             # or runs/multi30k-ct2, an export
    translator.translate(["Ein Hund läuft."])            # ['A dog runs.']
    translator.translate_nbest(["Ein Hund läuft."], 2)   # [[Translation(text, score, tokens), ...]]
    translator.score(["Ein Hund läuft."], ["A dog runs."])

    generator = aiayn.load("runs/shakespeare_char")      # a language model: a Generator
    generator.generate("ROMEO:", max_new_tokens=100, seed=1)

The CLI (`aiayn translate/evaluate/score/lm generate`), `aiayn serve` and the Python API use
only these interfaces. CTranslate2 is imported only when an export is opened.
"""

from aiayn.formats.ctranslate2_format import is_ctranslate2_dir
from aiayn.inference.base import context_length, stream_text
from aiayn.inference.ctranslate2 import CTranslate2Generator, CTranslate2Translator
from aiayn.inference.interface import (
    DEFAULT_BATCH_TOKENS,
    LONG_LINE_ACTIONS,
    Generator,
    Translation,
    Translator,
)
from aiayn.inference.loader import load
from aiayn.inference.torch_generator import TorchGenerator
from aiayn.inference.torch_translator import TorchTranslator, length_batches

__all__ = [
    "DEFAULT_BATCH_TOKENS",
    "LONG_LINE_ACTIONS",
    "CTranslate2Generator",
    "CTranslate2Translator",
    "Generator",
    "TorchGenerator",
    "TorchTranslator",
    "Translation",
    "Translator",
    "context_length",
    "is_ctranslate2_dir",
    "length_batches",
    "load",
    "stream_text",
]
