"""The weight mapping between aiayn and Hugging Face, kept in `aiayn.hf_mapping` (the export
applies it forwards, the import and `--init-from` backwards)."""

from aiayn.hf_mapping import (
    OPS,
    Rule,
    feature_order,
    gpt2_rules,
    marian_language_rules,
    marian_translation_rules,
    to_ours,
    to_theirs,
)

__all__ = [
    "OPS", "Rule", "feature_order", "gpt2_rules", "marian_language_rules", "marian_translation_rules",
    "to_ours", "to_theirs",
]
