"""Hugging Face exports compute what aiayn computes: logits within 1e-4, greedy outputs equal,
before and after a save_pretrained / from_pretrained round trip; the tokenizer prepares input."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer

from aiayn.cli.main import main
from aiayn.core.errors import ConfigError
from aiayn.decoding import greedy_search
from aiayn.export import export_huggingface
from aiayn.export.hf_tokenizer import TARGET_SUBFOLDER
from aiayn.export.huggingface import feature_order
from aiayn.inference import Translator, load
from aiayn.model.positional_encoding import sinusoidal_table

from .helpers import SOURCES, make_lm_dir, make_translation_dir

TOLERANCE = 1e-4
STEPS = 12
# MarianMTModel is post-LN with sinusoidal positions; shared or separate vocabularies, output
# projection tied to the target embedding or not.
TRANSLATION_CASES = {
    "shared": {}, "separate": {"share_embeddings": False}, "separate-untied": {"share_embeddings": False,
                                                                               "tie_output": False},
    "shared-untied": {"tie_output": False}, "gelu": {"activation": "gelu"},
}


@pytest.fixture(scope="module", params=list(TRANSLATION_CASES))
def translation(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(f"hf-{request.param}")
    fields = TRANSLATION_CASES[request.param]
    variant = "post-sinusoidal-" + ("separate" if fields.get("share_embeddings") is False else "shared")
    rest = {k: v for k, v in fields.items() if k != "share_embeddings"}
    make_translation_dir(root / "model", variant, **rest)
    export_huggingface(root / "model", root / "hf")
    return load(root / "model", "cpu"), root


def test_tokenizer_appends_eos_like_the_translator(translation):
    translator, root = translation
    tokenizer = AutoTokenizer.from_pretrained(root / "hf")
    config = translator.model.config
    for text in SOURCES:
        assert tokenizer(text).input_ids == [*translator.tokenizers.source.encode(text), config.eos_id]
    target = translator.tokenizers.target
    if not translator.tokenizers.is_joint:
        tokenizer = AutoTokenizer.from_pretrained(root / "hf", subfolder=TARGET_SUBFOLDER)
    ids = [config.bos_id, *target.encode("a dog runs"), config.eos_id, config.pad_id]
    assert tokenizer.decode(ids, skip_special_tokens=True) == target.decode(ids) == "a dog runs"


def _check_model(hf_model, translator: Translator, tokenizer) -> None:
    model = translator.model
    batch = tokenizer([s for s in SOURCES if s], return_tensors="pt", padding=True)
    src = batch.input_ids  # right-padded with pad_id: aiayn's own batch layout
    greedy = greedy_search(model, src, max_steps=STEPS)
    tgt_in = torch.full((src.size(0), STEPS + 1), model.config.pad_id)
    tgt_in[:, 0] = model.config.bos_id
    for i, tokens in enumerate(greedy.tokens):
        tgt_in[i, 1 : len(tokens) + 1] = torch.tensor(tokens, dtype=torch.long)
    with torch.no_grad():
        expected = model(src, tgt_in)
        logits = hf_model(input_ids=src, attention_mask=batch.attention_mask, decoder_input_ids=tgt_in).logits
    real = tgt_in != model.config.pad_id
    assert (logits - expected)[real].abs().max() < TOLERANCE

    generated = hf_model.generate(**batch, num_beams=1, do_sample=False, max_new_tokens=STEPS)
    eos, pad = model.config.eos_id, model.config.pad_id
    for row, tokens in zip(generated.tolist(), greedy.tokens, strict=True):
        assert row[0] == model.config.bos_id
        produced = [t for t in row[1:] if t != pad]
        assert produced[: produced.index(eos) if eos in produced else None] == tokens


def test_logits_and_greedy_generate_equal_aiayn(translation, tmp_path):
    translator, root = translation
    hf_model = AutoModelForSeq2SeqLM.from_pretrained(root / "hf").eval()
    assert type(hf_model).__name__ == "MarianMTModel"
    tokenizer = AutoTokenizer.from_pretrained(root / "hf")
    _check_model(hf_model, translator, tokenizer)

    hf_model.save_pretrained(tmp_path / "again")
    tokenizer.save_pretrained(tmp_path / "again")
    again = AutoModelForSeq2SeqLM.from_pretrained(tmp_path / "again").eval()
    _check_model(again, translator, AutoTokenizer.from_pretrained(tmp_path / "again"))


def test_marian_position_table_is_ours_permuted(translation):
    _, root = translation
    hf_model = AutoModelForSeq2SeqLM.from_pretrained(root / "hf")
    table = hf_model.model.encoder.embed_positions.weight
    ours = sinusoidal_table(table.size(0), table.size(1))
    assert torch.allclose(table, ours[:, feature_order(table.size(1))], atol=1e-6)


def test_translate_as_the_v4_translation_pipeline_did(translation):
    """transformers 5 removed pipeline("translation") (and 4.x needs tokenizers <= 0.23.0); its
    steps were: tokenize, generate with the saved generation config, decode without special
    tokens. Greedy, with aiayn's length limit (source length + max_len_extra), the text is ours."""
    translator, root = translation
    tokenizer = AutoTokenizer.from_pretrained(root / "hf")
    target = tokenizer if translator.tokenizers.is_joint else AutoTokenizer.from_pretrained(
        root / "hf", subfolder=TARGET_SUBFOLDER)
    hf_model = AutoModelForSeq2SeqLM.from_pretrained(root / "hf").eval()
    settings = hf_model.generation_config
    assert (settings.num_beams, settings.decoder_start_token_id) == (4, translator.config.bos_id)
    assert sorted(settings.suppress_tokens) == sorted({translator.config.pad_id,
                                                       translator.config.bos_id})
    for source in ["ein hund läuft", "ja", "kinder spielen im park"]:
        inputs = tokenizer([source], return_tensors="pt")
        output = hf_model.generate(**inputs, num_beams=1, max_new_tokens=inputs.input_ids.size(1) + 5)
        text = target.batch_decode(output, skip_special_tokens=True)[0]
        assert text == translator.translate([source], beam=1, max_len_extra=5)[0]


@pytest.mark.parametrize("variant", ["post-sinusoidal", "pre-sinusoidal", "pre-learned"])
def test_language_models(variant, tmp_path):
    model = make_lm_dir(tmp_path / "model", variant)
    export_huggingface(tmp_path / "model", tmp_path / "hf")
    for directory in (tmp_path / "hf", tmp_path / "again"):
        hf_model = AutoModelForCausalLM.from_pretrained(directory).eval()
        expected_class = "MarianForCausalLM" if variant.startswith("post") else "GPT2LMHeadModel"
        assert type(hf_model).__name__ == expected_class
        ids = torch.tensor([[1, *range(4, 24), 7, 7]])
        with torch.no_grad():
            assert (hf_model(ids).logits - model(ids)).abs().max() < TOLERANCE
        prompt = [1, 5, 6]
        out = hf_model.generate(torch.tensor([prompt]), do_sample=False, max_new_tokens=20,
                                eos_token_id=None, pad_token_id=model.config.pad_id)
        # aiayn stops at <eos>; compare up to there
        ours = load(tmp_path / "model", "cpu")
        expected = list(ours.generate_ids(prompt, max_new_tokens=20, temperature=0))
        assert out[0, len(prompt):].tolist()[: len(expected)] == expected
        hf_model.save_pretrained(tmp_path / "again")
        AutoTokenizer.from_pretrained(tmp_path / "hf").save_pretrained(tmp_path / "again")


@pytest.mark.parametrize(
    ("make", "variant", "fields", "field"),
    [
        (make_translation_dir, "pre-sinusoidal-shared", {}, "norm_first"),
        (make_translation_dir, "post-learned-shared", {}, "positional"),
        (make_translation_dir, "post-sinusoidal-shared", {"layer_norm_eps": 1e-6}, "layer_norm_eps"),
        (make_lm_dir, "post-learned", {}, "positional"),
    ],
)
def test_refuses_what_the_target_cannot_represent(make, variant, fields, field, tmp_path, capsys):
    make(tmp_path / "model", variant, **fields)
    with pytest.raises(ConfigError, match=rf"ModelConfig\.{field}="):
        export_huggingface(tmp_path / "model", tmp_path / "hf")
    command = ["export", "huggingface", "--model", str(tmp_path / "model"), "--out", str(tmp_path / "hf")]
    assert main(command) == 2
    assert f"ModelConfig.{field}" in capsys.readouterr().err
    assert not (tmp_path / "hf").exists()


def test_special_tokens_are_never_read_from_text(translation):
    """As in aiayn, the text "<eos>" is spelled out; only the post-processor appends the id."""
    translator, root = translation
    tokenizer = AutoTokenizer.from_pretrained(root / "hf")
    text = "ein <eos> hund <pad>"
    eos = translator.config.eos_id
    assert tokenizer(text).input_ids == [*translator.tokenizers.source.encode(text), eos]
    assert tokenizer(text).input_ids.count(eos) == 1
