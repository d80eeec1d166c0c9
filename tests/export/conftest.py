"""Export tests: they need the optional extra `export` (ctranslate2, transformers) and skip
without it. Nothing is downloaded: tokenizers are built here, and the Hugging Face hub is
switched off for the whole session (read by huggingface_hub when it is first imported)."""

import os

import pytest
import torch

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

pytest.importorskip("ctranslate2", reason="needs the optional extra 'export'")
pytest.importorskip("transformers", reason="needs the optional extra 'export'")


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny models run fastest on one thread, and leave the shared cores to other jobs."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
