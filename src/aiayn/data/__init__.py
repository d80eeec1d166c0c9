"""Data: tokenizers, corpora (Multi30k, synthetic tasks, files, Hugging Face datasets), token
stores (a corpus encoded once, memory-mapped) and token-budget batching.

This package knows nothing of the model or of training.
"""

from aiayn.data.batching import (
    Batch,
    BatchedDataset,
    ParallelDataset,
    make_batch,
    plan_token_batches,
    shard,
    token_batches,
)
from aiayn.data.corpus import FilterStats, filter_pairs, read_lines, read_parallel
from aiayn.data.multi30k import MULTI30K_URL, SPLITS, load_multi30k, multi30k_files
from aiayn.data.paths import data_root
from aiayn.data.special_tokens import (  # the *_ID constants: the layout of trained tokenizers
    BOS_ID,
    EOS_ID,
    PAD_ID,
    SPECIAL_TOKENS,
    TRAINED_SPECIALS,
    UNK_ID,
    SpecialTokens,
)
from aiayn.data.store_dataset import StoreDataset
from aiayn.data.synthetic import TASKS, format_date, make_task
from aiayn.data.token_store import TokenStore
from aiayn.data.tokenizer import Tokenizer, TokenizerPair
from aiayn.data.tokenizer_training import TOKENIZER_KINDS

__all__ = [
    "BOS_ID",
    "EOS_ID",
    "MULTI30K_URL",
    "PAD_ID",
    "SPECIAL_TOKENS",
    "SPLITS",
    "TASKS",
    "TOKENIZER_KINDS",
    "TRAINED_SPECIALS",
    "UNK_ID",
    "Batch",
    "BatchedDataset",
    "FilterStats",
    "ParallelDataset",
    "SpecialTokens",
    "StoreDataset",
    "TokenStore",
    "Tokenizer",
    "TokenizerPair",
    "data_root",
    "filter_pairs",
    "format_date",
    "load_multi30k",
    "make_batch",
    "make_task",
    "multi30k_files",
    "plan_token_batches",
    "read_lines",
    "read_parallel",
    "shard",
    "token_batches",
]
