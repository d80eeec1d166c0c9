"""`aiayn import huggingface`: a Transformers Marian or GPT-2 checkpoint written as an aiayn
model directory. The reading lives in `aiayn.hf_format`, shared with `--init-from`
(`aiayn.training.init_from`), so that training does not depend on the exporters' package."""

from aiayn.hf_format import (
    HUB_NAME,
    SUPPORTED,
    gpt2_config,
    hf_model_type,
    import_huggingface,
    load_mapped,
    marian_config,
    resolve_source,
)

__all__ = [
    "HUB_NAME", "SUPPORTED", "gpt2_config", "hf_model_type", "import_huggingface", "load_mapped",
    "marian_config", "resolve_source",
]
