"""The exporters read the special ids from the model: a GPT-2-layout language model (ids 0..3
are `!"#$`, `<|endoftext|>` both opens and closes, `<pad>` appended) and a translation model
whose special tokens come last export and run exactly as with aiayn's own layout."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer

from aiayn.data import TokenizerPair
from aiayn.export import export_ctranslate2, export_huggingface
from aiayn.inference import CTranslate2Generator, CTranslate2Translator, load
from aiayn.model import DecoderOnlyLM, ModelConfig, Transformer

from .helpers import (
    SOURCES,
    TARGETS,
    gpt2_layout_tokenizer,
    never_predicts_,
    perturb_,
    save_model_dir,
    special_ids,
    specials_last_tokenizer,
)

TOLERANCE = 1e-4


@pytest.mark.parametrize("norm_first", [False, True])
def test_gpt2_layout_language_model(norm_first, tmp_path):
    tokenizer = gpt2_layout_tokenizer(SOURCES + TARGETS)
    ids = special_ids(tokenizer)
    assert ids["bos_id"] == ids["eos_id"] == ids["pad_id"] - 1 and ids["unk_id"] is None
    torch.manual_seed(0)
    config = ModelConfig.tiny(src_vocab_size=tokenizer.vocab_size, tgt_vocab_size=tokenizer.vocab_size,
                              d_model=32, num_heads=2, num_decoder_layers=2, d_ff=64, max_len=40,
                              norm_first=norm_first, **ids)
    model = perturb_(DecoderOnlyLM(config)).eval()
    save_model_dir(model, TokenizerPair(tokenizer, tokenizer), tmp_path / "model")
    prompt = tokenizer.encode('!"#$ a dog')
    assert prompt[:4] == [0, 1, 2, 3]  # ordinary characters here
    expected = list(load(tmp_path / "model", "cpu").generate_ids(prompt, max_new_tokens=30, temperature=0))
    with torch.no_grad():
        logits = model(torch.tensor([prompt]))[0]

    engine = CTranslate2Generator(export_ctranslate2(tmp_path / "model", tmp_path / "ct2"), "cpu", threads=1)
    assert (engine.logits(prompt) - logits).abs().max() < TOLERANCE
    assert list(engine.generate_ids(prompt, max_new_tokens=30, temperature=0)) == expected

    hf_model = AutoModelForCausalLM.from_pretrained(export_huggingface(tmp_path / "model", tmp_path / "hf"))
    with torch.no_grad():
        assert (hf_model(torch.tensor([prompt])).logits[0] - logits).abs().max() < TOLERANCE
    hf_tokenizer = AutoTokenizer.from_pretrained(tmp_path / "hf")
    assert hf_tokenizer('!"#$ a dog').input_ids == prompt  # no <eos> appended to an LM prompt
    assert hf_tokenizer.eos_token == hf_tokenizer.bos_token == "<|endoftext|>"


def test_translation_model_with_specials_last(tmp_path):
    tokenizer = specials_last_tokenizer(SOURCES + TARGETS)
    ids = special_ids(tokenizer)
    assert min(i for i in ids.values() if i is not None) > 3
    torch.manual_seed(0)
    config = ModelConfig.tiny(vocab_size=tokenizer.vocab_size, d_model=32, num_heads=2, num_encoder_layers=2,
                              num_decoder_layers=2, d_ff=64, max_len=40, **ids)
    model = never_predicts_(perturb_(Transformer(config)).eval(), [ids["pad_id"], ids["bos_id"]])
    save_model_dir(model, TokenizerPair(tokenizer, tokenizer), tmp_path / "model")
    ours = load(tmp_path / "model", "cpu")

    engine = CTranslate2Translator(export_ctranslate2(tmp_path / "model", tmp_path / "ct2"), "cpu", threads=1)
    for beam in (1, 4):
        expected = ours.translate_nbest(SOURCES, 1, beam=beam, alpha=0.0, max_len_extra=8)
        outputs = engine.translate_nbest(SOURCES, 1, beam=beam, alpha=0.0, max_len_extra=8)
        assert [h[0].tokens for h in outputs] == [h[0].tokens for h in expected]
        assert [h[0].score for h in outputs] == pytest.approx([h[0].score for h in expected], abs=TOLERANCE)

    export_huggingface(tmp_path / "model", tmp_path / "hf")
    hf_tokenizer = AutoTokenizer.from_pretrained(tmp_path / "hf")
    assert hf_tokenizer("ein hund").input_ids == [*tokenizer.encode("ein hund"), ids["eos_id"]]
    hf_model = AutoModelForSeq2SeqLM.from_pretrained(tmp_path / "hf").eval()
    assert hf_model.generation_config.decoder_start_token_id == ids["bos_id"]
    batch = hf_tokenizer(["ein hund läuft", "ja"], return_tensors="pt", padding=True)
    assert batch.input_ids[1, -1] == ids["pad_id"]
    generated = hf_model.generate(**batch, num_beams=1, max_new_tokens=6)
    expected = ours.translate_nbest(["ein hund läuft", "ja"], 1, beam=1, max_len_extra=100)
    for row, hyps in zip(generated.tolist(), expected, strict=True):
        produced = [t for t in row[1:] if t not in (ids["pad_id"], ids["eos_id"])]
        assert produced == hyps[0].tokens[: len(produced)]
