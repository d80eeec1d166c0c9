"""Export tests: they need the optional extra `export` (ctranslate2, transformers) and skip
without it. Nothing is downloaded: tokenizers are built here, and the Hugging Face hub is
switched off for the whole session (read by huggingface_hub when it is first imported)."""

import os

import pytest

from threads import one_thread  # noqa: F401 (an autouse fixture: one intra-op thread)

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

pytest.importorskip("ctranslate2", reason="needs the optional extra 'export'")
pytest.importorskip("transformers", reason="needs the optional extra 'export'")
