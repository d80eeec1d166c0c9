"""`aiayn import huggingface` of a GPT-2 model computes what Transformers computes.

A `GPT2LMHeadModel` of GPT-2 small's shape (d_model 768, 12 heads, d_ff 3072, gelu_new, learned
positions, tied unscaled embeddings, 1024 positions) reduced to 2 layers, random weights, with
a byte-level BPE tokenizer laid out as GPT-2's: imported, logits within 1e-4, greedy generation
equal to `generate`, and the round trip through `aiayn export huggingface` exact.
"""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from transformers import GenerationConfig, GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

from aiayn.core.errors import ConfigError
from aiayn.data.special_tokens import SpecialTokens
from aiayn.data.tokenizer import Tokenizer
from aiayn.decoding.sampling import Sampling, sample_stream
from aiayn.export import export_huggingface
from aiayn.formats import load_model
from aiayn.formats.hf_format import import_huggingface

from .helpers import END_OF_TEXT, SOURCES, TARGETS, make_lm_dir

TOLERANCE = 1e-4
STEPS = 12
TEXTS = [*SOURCES, *TARGETS] * 4


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    import tokenizers
    from tokenizers import decoders, models, pre_tokenizers, trainers

    root = tmp_path_factory.mktemp("gpt2")
    hf = tokenizers.Tokenizer(models.BPE())
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    hf.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    hf.train_from_iterator(TEXTS, trainer=trainer)
    hf.add_special_tokens([END_OF_TEXT])
    eot = hf.token_to_id(END_OF_TEXT)
    fast = PreTrainedTokenizerFast(tokenizer_object=hf, bos_token=END_OF_TEXT, eos_token=END_OF_TEXT)
    config = GPT2Config(  # GPT-2 small, 2 of its 12 layers
        vocab_size=hf.get_vocab_size(), n_positions=1024, n_embd=768, n_layer=2, n_head=12,
        activation_function="gelu_new", bos_token_id=eot, eos_token_id=eot,
    )
    torch.manual_seed(0)
    hf_model = GPT2LMHeadModel(config).eval()
    with torch.no_grad():  # outputs that vary from step to step
        for parameter in hf_model.parameters():
            parameter.add_(0.02 * torch.randn_like(parameter))
    hf_model.save_pretrained(root / "gpt2")
    fast.save_pretrained(root / "gpt2")
    import_huggingface(root / "gpt2", root / "ours")
    model = load_model(root / "ours").eval()
    tokenizer = Tokenizer.load(root / "ours" / "tokenizer.json", SpecialTokens.of(model.config))
    return root, hf_model, fast, model, tokenizer


def test_settings_represent_gpt2(imported):
    _, hf_model, _, model, _ = imported
    c = model.config
    assert (c.activation, c.positional, c.norm_first, c.scale_embedding, c.tie_output) == (
        "gelu_new", "learned", True, False, True)
    assert (c.d_model, c.num_heads, c.d_ff, c.num_decoder_layers, c.max_len) == (768, 12, 3072, 2, 1024)
    assert c.eos_id == c.bos_id == hf_model.config.eos_token_id and c.unk_id is None


def test_tokenizer_gives_the_same_ids(imported):
    _, _, fast, _, tokenizer = imported
    for text in [*SOURCES, "an unseen wörd"]:
        assert tokenizer.encode(text) == fast(text).input_ids


def test_logits_match_transformers(imported):
    _, hf_model, _, model, tokenizer = imported
    ids = torch.tensor([tokenizer.encode("the man reads a book in the park")])
    with torch.no_grad():
        ours, theirs = model(ids), hf_model(ids).logits
    assert torch.allclose(ours, theirs, atol=TOLERANCE), (ours - theirs).abs().max()


def test_greedy_matches_generate(imported):
    _, hf_model, _, model, tokenizer = imported
    prompt = tokenizer.encode("two cats")
    ours = list(sample_stream(model, prompt, STEPS, Sampling(temperature=0.0)))
    generation = GenerationConfig(do_sample=False, num_beams=1, max_new_tokens=STEPS, min_new_tokens=0,
                                  eos_token_id=model.config.eos_id, pad_token_id=model.config.pad_id)
    with torch.no_grad():
        theirs = hf_model.generate(torch.tensor([prompt]), generation_config=generation)[0, len(prompt):]
    assert ours == theirs.tolist()
    assert len(set(ours)) > 1


def test_round_trip_through_export_is_exact(imported, tmp_path):
    root, _, _, model, _ = imported
    export_huggingface(root / "ours", tmp_path / "hf")
    import_huggingface(tmp_path / "hf", tmp_path / "again")
    again = load_model(tmp_path / "again")
    assert again.config.to_dict() | {"extra": {}} == model.config.to_dict() | {"extra": {}}
    for (name, ours), (_, theirs) in zip(model.state_dict().items(), again.state_dict().items(), strict=True):
        assert torch.equal(ours, theirs), name


def test_round_trip_of_an_aiayn_gpt2_layout_model_is_exact(tmp_path):
    model = make_lm_dir(tmp_path / "model", "pre-learned", activation="gelu_new", scale_embedding=False)
    export_huggingface(tmp_path / "model", tmp_path / "hf")
    import_huggingface(tmp_path / "hf", tmp_path / "again")
    again = load_model(tmp_path / "again")
    for (name, ours), (_, theirs) in zip(model.state_dict().items(), again.state_dict().items(), strict=True):
        assert torch.equal(ours, theirs), name


def test_refuses_what_it_cannot_represent(imported, tmp_path):
    shutil.copytree(imported[0] / "gpt2", tmp_path / "src")
    config = json.loads((tmp_path / "src" / "config.json").read_text())
    config["scale_attn_by_inverse_layer_idx"] = True
    (tmp_path / "src" / "config.json").write_text(json.dumps(config))
    with pytest.raises(ConfigError, match="scale_attn_by_inverse_layer_idx"):
        import_huggingface(tmp_path / "src", tmp_path / "out")
