"""Tiny model directories for the export tests, in every architecture variant."""

from __future__ import annotations

import itertools
from pathlib import Path

import torch
from torch import nn

from aiayn import formats
from aiayn.data import Tokenizer, TokenizerPair
from aiayn.model import DecoderOnlyLM, ModelConfig, Transformer

SOURCES = [
    "ein hund läuft", "zwei katzen schlafen", "der mann liest ein buch", "ja",
    "eine frau mit einem roten hut", "kinder spielen im park", "", "ein alter mann",
]
TARGETS = [
    "a dog runs", "two cats sleep", "the man reads a book", "yes",
    "a woman with a red hat", "children play in the park", "", "an old man",
]

# {post-LN, pre-LN} x {sinusoidal, learned} x {one shared vocabulary, two vocabularies}
VARIANTS = [
    f"{norm}-{positional}-{vocabulary}"
    for norm, positional, vocabulary in itertools.product(
        ("post", "pre"), ("sinusoidal", "learned"), ("shared", "separate")
    )
]
LM_VARIANTS = [f"{'pre' if pre else 'post'}-{positional}" for pre in (False, True)
               for positional in ("sinusoidal", "learned")]


def variant_config(variant: str) -> dict:
    """ModelConfig fields of a variant name such as 'pre-learned-separate'."""
    parts = variant.split("-")
    fields = {"norm_first": parts[0] == "pre", "positional": parts[1]}
    if len(parts) > 2:
        fields["share_embeddings"] = parts[2] == "shared"
    return fields


def perturb_(model: nn.Module, scale: float = 0.15, seed: int = 0) -> nn.Module:
    """Noise on every parameter, so that a random model's outputs vary (a fresh one tends to
    repeat one token); small enough to keep float32 rounding far below the tests' 1e-4."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(scale * torch.randn(parameter.shape, generator=generator))
    return model


def never_predicts_(model: nn.Module, token_ids: list[int], margin: float = 40.0) -> nn.Module:
    """Give `token_ids` a logit `margin` below the others' range, as training does to tokens
    that are never targets (<pad>, <bos>).

    aiayn sets the log-probability of <pad> and <bos> to -inf after its softmax, CTranslate2
    suppresses them before its softmax (renormalising); a trained model gives them ~0
    probability and the two agree, a random one does not. So: one feature of the final
    LayerNorm becomes the constant `margin`, and the output projection reads it with weight
    -1 for `token_ids` and 0 for every other token.
    """
    decoder = model.decoder
    norm = decoder.final_norm if decoder.final_norm is not None else (
        decoder.layers[-1].feed_forward_sublayer.norm
    )
    with torch.no_grad():
        norm.weight[0], norm.bias[0] = 0.0, margin
        projection = model.output_projection.weight
        projection[:, 0] = 0.0
        projection[token_ids, 0] = -1.0
    return model


def make_translation_dir(directory: Path, variant: str, seed: int = 0, **overrides) -> Transformer:
    """A random tiny Transformer of `variant` with character tokenizer(s), saved in `directory`."""
    fields = variant_config(variant) | overrides
    shared = fields.get("share_embeddings", True)
    if shared:
        tokenizer = Tokenizer.train("char", SOURCES + TARGETS)
        tokenizers = TokenizerPair(tokenizer, tokenizer)
    else:
        tokenizers = TokenizerPair(Tokenizer.train("char", SOURCES), Tokenizer.train("char", TARGETS))
    torch.manual_seed(seed)
    config = ModelConfig.tiny(
        src_vocab_size=tokenizers.source.vocab_size, tgt_vocab_size=tokenizers.target.vocab_size,
        d_model=32, num_heads=2, num_encoder_layers=2, num_decoder_layers=2, d_ff=64, max_len=40,
        **fields,
    )
    model = perturb_(Transformer(config), seed=seed).eval()
    never_predicts_(model, sorted({config.pad_id, config.bos_id}))
    formats.save_pretrained(model, directory)
    tokenizers.save(directory)
    return model


def make_lm_dir(directory: Path, variant: str, seed: int = 0, **overrides) -> DecoderOnlyLM:
    """A random tiny language model of `variant` with a character tokenizer."""
    tokenizer = Tokenizer.train("char", SOURCES + TARGETS)
    torch.manual_seed(seed)
    config = ModelConfig.tiny(
        src_vocab_size=tokenizer.vocab_size, tgt_vocab_size=tokenizer.vocab_size, d_model=32,
        num_heads=2, num_decoder_layers=2, d_ff=64, max_len=32, **(variant_config(variant) | overrides),
    )
    model = perturb_(DecoderOnlyLM(config), seed=seed).eval()
    formats.save_pretrained(model, directory)
    tokenizer.save(directory / "tokenizer.json")
    return model


END_OF_TEXT = "<|endoftext|>"


def gpt2_layout_tokenizer(texts: list[str]) -> Tokenizer:
    """Byte-level BPE laid out as GPT-2's: byte symbols first (ids 0..3 are `!"#$`), then the
    merges, `<|endoftext|>` (bos and eos) at the end, and aiayn's appended `<pad>` after it."""
    import tokenizers
    from tokenizers import decoders, models, pre_tokenizers, trainers

    hf = tokenizers.Tokenizer(models.BPE())
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    hf.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    hf.train_from_iterator(texts, trainer=trainer)
    hf.add_special_tokens([END_OF_TEXT])
    return Tokenizer(hf, origin="gpt2-layout")


def specials_last_tokenizer(texts: list[str]) -> Tokenizer:
    """One token per character, then `[UNK]`, `[START]` (bos), `[END]` (eos), and `<pad>`."""
    import tokenizers
    from tokenizers import decoders, models

    chars = sorted({c for text in texts for c in text})
    vocab = {c: i for i, c in enumerate([*chars, "[UNK]"])}
    hf = tokenizers.Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="[UNK]", fuse_unk=False))
    hf.decoder = decoders.Fuse()
    hf.add_special_tokens(["[START]", "[END]"])
    return Tokenizer(hf, names={"bos": "[START]", "eos": "[END]"}, origin="specials-last")


def save_model_dir(model: nn.Module, tokenizers: TokenizerPair, directory: Path) -> None:
    formats.save_pretrained(model, directory)
    if isinstance(model, DecoderOnlyLM):
        tokenizers.source.save(directory / "tokenizer.json")
    else:
        tokenizers.save(directory)


def special_ids(tokenizer: Tokenizer) -> dict:
    """ModelConfig fields for `tokenizer`'s special ids."""
    return tokenizer.specials.as_dict()
