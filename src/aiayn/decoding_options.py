"""The choices and defaults of the decoding options, in a module that imports no torch.

The command line reads them when it builds its parsers (`aiayn --help` must not load torch);
the engine modules import them from here, so each has one home.
"""

DEFAULT_BATCH_TOKENS = 4096
"""Padded source tokens per decoding batch (beam search decodes beam x as many rows)."""

LONG_LINE_ACTIONS = ("truncate", "error")
"""What to do with a line longer than the model's max_len: cut it (with a warning) or raise."""

QUANTIZATIONS = ("int8",)
"""What `aiayn.load(..., quantize=)` accepts: int8 linear layers (`aiayn.runtime.int8`)."""

EXPORT_QUANTIZATIONS = ("int8", "int8_float32", "int16", "float16", "bfloat16")
"""The weight types of a CTranslate2 export (`aiayn.export.ctranslate2`)."""
