"""`aiayn import huggingface` of an OPUS-MT model computes what Transformers computes.

A `MarianMTModel` with the exact configuration of a real OPUS-MT model (d_model 512, 6+6
layers, 8 heads, d_ff 2048, swish, scale_embedding, shared embeddings, a final logits bias,
decoding started with `<pad>`) and random weights, with a SentencePiece pair trained here and
OPUS-MT's `vocab.json` layout (`</s>` 0, `<unk>` 1, `<pad>` last): imported, its logits are
within 1e-4 of Transformers', its greedy and beam outputs equal `generate`'s, and its tokenizer
gives `MarianTokenizer`'s ids. Nothing is downloaded.
"""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from aiayn.cli.main import main
from aiayn.core.errors import ConfigError
from aiayn.data.special_tokens import SpecialTokens
from aiayn.data.tokenizer import TokenizerPair
from aiayn.decoding import greedy_search
from aiayn.decoding.beam_search import beam_search
from aiayn.export import export_huggingface
from aiayn.formats import load_model
from aiayn.formats.hf_format import import_huggingface
from aiayn.model.masks import target_padding_mask

from .helpers import make_translation_dir

spm = pytest.importorskip("sentencepiece", reason="needs the optional extra 'sentencepiece'")
from transformers import GenerationConfig, MarianConfig, MarianMTModel, MarianTokenizer  # noqa: E402

TOLERANCE = 1e-4
STEPS = 8
EN = ["the", "a", "cat", "dog", "sees", "likes", "small", "big", "house", "garden", "red", "green",
      "runs", "walks", "today"]
DE = ["der", "die", "das", "katze", "hund", "sieht", "mag", "klein", "gross", "haus", "garten", "rot",
      "gruen", "laeuft", "geht", "heute"]
SENTENCES = ["the small cat sees a dog", "a big dog likes the red house today", "the garden is green"]


def _corpus(words: list[str], n: int = 400) -> list[str]:
    generator = torch.Generator().manual_seed(0)
    return [" ".join(words[i] for i in torch.randint(len(words), (int(3 + j % 7),), generator=generator))
            for j in range(n)]


def _train_spm(path, words: list[str]) -> None:
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(_corpus(words)), model_prefix=str(path), vocab_size=60, model_type="unigram",
        character_coverage=1.0, hard_vocab_limit=False, minloglevel=2, num_threads=1,
    )
    (path.parent / f"{path.name}.model").rename(path.parent / f"{path.name}.spm")


def opus_mt_like(root) -> tuple:
    """A directory laid out as an OPUS-MT download, with random weights."""
    root.mkdir()
    _train_spm(root / "source", EN)
    _train_spm(root / "target", DE)
    vocab = {"</s>": 0, "<unk>": 1}
    for side in ("source", "target"):
        processor = spm.SentencePieceProcessor(model_file=str(root / f"{side}.spm"))
        for i in range(processor.GetPieceSize()):
            vocab.setdefault(processor.IdToPiece(i), len(vocab)) if i > 2 else None
    vocab["<pad>"] = len(vocab)
    (root / "vocab.json").write_text(json.dumps(vocab))
    pad = vocab["<pad>"]
    config = MarianConfig(  # Helsinki-NLP/opus-mt-* (e.g. en-de), vocabulary aside
        vocab_size=len(vocab), decoder_vocab_size=len(vocab), d_model=512, encoder_layers=6, decoder_layers=6,
        encoder_attention_heads=8, decoder_attention_heads=8, encoder_ffn_dim=2048, decoder_ffn_dim=2048,
        activation_function="swish", scale_embedding=True, share_encoder_decoder_embeddings=True,
        tie_word_embeddings=True, max_position_embeddings=512, pad_token_id=pad, eos_token_id=0,
        decoder_start_token_id=pad, bos_token_id=0, forced_eos_token_id=0, dropout=0.1,
        architectures=["MarianMTModel"],
    )
    torch.manual_seed(0)
    model = MarianMTModel(config).eval()
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():  # outputs that vary from step to step, unlike a fresh model's
        for name, parameter in model.named_parameters():
            if "embed_positions" not in name:  # the sinusoidal table stays
                parameter.add_(0.1 * torch.randn(parameter.shape, generator=generator))
        model.final_logits_bias.normal_(0.0, 0.2)  # OPUS-MT's is learned: not zero
    model.save_pretrained(root)
    # OPUS-MT forces </s> at the length limit (`forced_eos_token_id`); aiayn stops without it there
    model.generation_config.forced_eos_token_id = None
    files = (str(root / name) for name in ("source.spm", "target.spm", "vocab.json"))
    return model, MarianTokenizer(*files)


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    root = tmp_path_factory.mktemp("marian")
    hf_model, hf_tokenizer = opus_mt_like(root / "opus-mt")
    import_huggingface(root / "opus-mt", root / "ours")
    model = load_model(root / "ours").eval()
    tokenizers = TokenizerPair.load(root / "ours", SpecialTokens.of(model.config))
    return root, hf_model, hf_tokenizer, model, tokenizers


def _source_batch(tokenizers: TokenizerPair, eos: int, pad: int) -> torch.Tensor:
    rows = [[*tokenizers.source.encode(s), eos] for s in SENTENCES]
    width = max(map(len, rows))
    return torch.tensor([row + [pad] * (width - len(row)) for row in rows])


def test_settings_represent_opus_mt(imported):
    _, hf_model, _, model, _ = imported
    c = model.config
    assert (c.activation, c.scale_embedding, c.output_bias, c.share_embeddings, c.tie_output) == (
        "swish", True, True, True, True)
    assert c.bos_id == c.pad_id == hf_model.config.pad_token_id and c.eos_id == 0 and c.unk_id == 1
    shape = (c.d_model, c.num_encoder_layers, c.num_decoder_layers, c.num_heads, c.d_ff)
    assert shape == (512, 6, 6, 8, 2048)


def test_tokenizer_gives_marian_ids(imported):
    _, _, hf_tokenizer, model, tokenizers = imported
    for sentence in [*SENTENCES, "unknown zebra ä"]:
        assert [*tokenizers.source.encode(sentence), model.config.eos_id] == hf_tokenizer(sentence).input_ids
        target_ids = hf_tokenizer(text_target=sentence).input_ids
        assert [*tokenizers.target.encode(sentence), model.config.eos_id] == target_ids
    ids = tokenizers.target.encode("der hund sieht das haus")
    assert tokenizers.target.decode(ids) == hf_tokenizer.decode(ids, skip_special_tokens=True)


def test_logits_match_transformers(imported):
    _, hf_model, _, model, tokenizers = imported
    c = model.config
    src = _source_batch(tokenizers, c.eos_id, c.pad_id)
    targets = [tokenizers.target.encode(s) for s in ["der hund", "die katze sieht das rote haus", "heute"]]
    width = max(map(len, targets)) + 1
    tgt_in = torch.tensor([[c.bos_id, *t] + [c.pad_id] * (width - 1 - len(t)) for t in targets])
    assert (tgt_in[:, 0] == c.pad_id).all()  # decoding starts with <pad>: position 0 is real
    with torch.no_grad():
        ours = model(src, tgt_in)
        theirs = hf_model(input_ids=src, attention_mask=src != c.pad_id, decoder_input_ids=tgt_in).logits
    real = target_padding_mask(tgt_in, c.pad_id)
    assert real[:, 0].all() and not real.all()
    assert torch.allclose(ours[real], theirs[real], atol=TOLERANCE), (ours[real] - theirs[real]).abs().max()


def _generated(sequences: torch.Tensor, eos: int, pad: int) -> list[list[int]]:
    out = []
    for row in sequences[:, 1:].tolist():
        row = row[: row.index(eos)] if eos in row else row
        out.append([t for t in row if t != pad])
    return out


def _generation(model, num_beams: int) -> GenerationConfig:
    c = model.config
    return GenerationConfig(
        num_beams=num_beams, do_sample=False, max_new_tokens=STEPS, min_new_tokens=0,
        forced_eos_token_id=None,
        length_penalty=0.0 if num_beams > 1 else 1.0,
        early_stopping=False, decoder_start_token_id=c.bos_id, pad_token_id=c.pad_id, eos_token_id=c.eos_id,
        bos_token_id=c.eos_id, suppress_tokens=[c.pad_id], num_return_sequences=1,
    )


def test_greedy_matches_generate(imported):
    _, hf_model, _, model, tokenizers = imported
    c = model.config
    src = _source_batch(tokenizers, c.eos_id, c.pad_id)
    ours = greedy_search(model, src, max_steps=STEPS).tokens
    with torch.no_grad():
        theirs = hf_model.generate(input_ids=src, attention_mask=src != c.pad_id,
                                   generation_config=_generation(model, 1))
    assert ours == _generated(theirs, c.eos_id, c.pad_id)
    assert len({token for row in ours for token in row}) > 1  # not one token repeated


def test_beam_matches_generate(imported):
    _, hf_model, _, model, tokenizers = imported
    c = model.config
    src = _source_batch(tokenizers, c.eos_id, c.pad_id)
    ours = beam_search(model, src, beam_size=4, alpha=0.0, max_steps=STEPS)
    with torch.no_grad():
        theirs = hf_model.generate(input_ids=src, attention_mask=src != c.pad_id,
                                   generation_config=_generation(model, 4), output_scores=True,
                                   return_dict_in_generate=True)
    expected = _generated(theirs.sequences, c.eos_id, c.pad_id)
    for hypotheses, tokens, score in zip(ours, expected, theirs.sequences_scores.tolist(), strict=True):
        best = hypotheses[0]
        tied = len(hypotheses) > 1 and abs(hypotheses[1].score - best.score) < 1e-5
        assert best.tokens == tokens or tied
        assert abs(best.score - score) < 1e-4


def _same_model(a, b) -> None:
    assert a.config.to_dict() | {"extra": {}} == b.config.to_dict() | {"extra": {}}
    for (name, ours), (_, theirs) in zip(a.state_dict().items(), b.state_dict().items(), strict=True):
        assert torch.equal(ours, theirs), name


def test_round_trip_through_export_is_exact(imported, tmp_path):
    root, _, _, model, _ = imported
    export_huggingface(root / "ours", tmp_path / "hf")
    tokenizer = MarianTokenizer.from_pretrained(tmp_path / "hf")  # OPUS-MT's tokenizer files, exported
    assert tokenizer("the red house").input_ids == imported[2]("the red house").input_ids
    import_huggingface(tmp_path / "hf", tmp_path / "again")
    _same_model(model, load_model(tmp_path / "again"))


@pytest.mark.parametrize("variant", ["post-sinusoidal-shared", "post-sinusoidal-separate"])
def test_round_trip_of_an_aiayn_model_is_exact(variant, tmp_path):
    model = make_translation_dir(tmp_path / "model", variant, tie_output=False)
    export_huggingface(tmp_path / "model", tmp_path / "hf")
    import_huggingface(tmp_path / "hf", tmp_path / "again")
    _same_model(model, load_model(tmp_path / "again"))
    again = TokenizerPair.load(tmp_path / "again", SpecialTokens.of(model.config))
    original = TokenizerPair.load(tmp_path / "model", SpecialTokens.of(model.config))
    assert again.target.encode("a red hat") == original.target.encode("a red hat")


def test_cli_refuses_what_it_cannot_represent(imported, tmp_path, capsys):
    root = imported[0]
    shutil.copytree(root / "opus-mt", tmp_path / "src")
    config = json.loads((tmp_path / "src" / "config.json").read_text())
    config["decoder_ffn_dim"] = 1024
    (tmp_path / "src" / "config.json").write_text(json.dumps(config))
    assert main(["import", "huggingface", str(tmp_path / "src"), "--out", str(tmp_path / "out")]) == 2
    error = capsys.readouterr().err
    assert "decoder_ffn_dim" in error and len(error.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()
    with pytest.raises(ConfigError, match="Hugging Face Hub"):
        import_huggingface("nobody-xyz/not-a-model", tmp_path / "hub")


def test_imported_model_exports_to_ctranslate2(imported, tmp_path):
    """What an imported OPUS-MT model needs (swish, logits bias, <pad> start) goes to CTranslate2 too."""
    import ctranslate2

    from aiayn.export import export_ctranslate2

    root, _, _, model, tokenizers = imported
    c = model.config
    export_ctranslate2(root / "ours", tmp_path / "ct2")
    src = _source_batch(tokenizers, c.eos_id, c.pad_id)
    ours = greedy_search(model, src, max_steps=STEPS).tokens
    translator = ctranslate2.Translator(str(tmp_path / "ct2"), device="cpu", intra_threads=1)
    pieces = [tokenizers.source.tokens(s) for s in SENTENCES]
    results = translator.translate_batch(pieces, beam_size=1, max_decoding_length=STEPS,
                                         suppress_sequences=[[tokenizers.target.id_to_token(c.pad_id)]])
    theirs = [[tokenizers.target.vocab[t] for t in r.hypotheses[0]] for r in results]
    assert ours == theirs


def test_imported_model_translates_with_aiayn_load(imported):
    """Decoding with the SentencePiece pair: `aiayn.load(DIR).translate` gives the greedy ids' text."""
    import aiayn

    root, _, _, model, tokenizers = imported
    c = model.config
    ours = greedy_search(model, _source_batch(tokenizers, c.eos_id, c.pad_id), max_len_extra=5).tokens
    translations = aiayn.load(root / "ours", "cpu").translate(SENTENCES, beam=1, max_len_extra=5)
    assert translations == [tokenizers.target.decode(ids) for ids in ours]


def test_fine_tune_an_opus_mt_directory(imported, tmp_path):
    """`aiayn train --init-from` a Transformers Marian directory: imported into the run, trained
    with its SentencePiece pair, decoding started with <pad>, its logits bias trained."""
    import yaml

    root = imported[0]
    pairs = [("the small cat", "die katze"), ("a big dog today", "der hund heute"),
             ("the red house", "das haus")]
    for split in ("train", "valid"):
        (tmp_path / f"{split}.src").write_text("".join(s + "\n" for s, _ in pairs))
        (tmp_path / f"{split}.tgt").write_text("".join(t + "\n" for _, t in pairs))
    files = {f"{split}_{side}": str(tmp_path / f"{split}.{side}") for split in ("train", "valid")
             for side in ("src", "tgt")}
    config = {
        "data": {"task": "files", **files},
        "model": {"dropout": 0.0},
        "train": {"max_steps": 2, "eval_every": 2, "batch_tokens": 200, "precision": "fp32", "threads": 1,
                  "progress_bar": False, "bleu_max_sentences": 3, "bleu_beam": 1, "warmup": 1, "lr": 1e-4,
                  "freeze": ["encoder.layers.0-5"]},
    }
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    out = tmp_path / "run"
    args = ["--init-from", str(root / "opus-mt"), "--out", str(out)]
    assert main(["train", str(tmp_path / "c.yaml"), *args]) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["steps"] == 2 and results["init_val_loss"] > 0
    for name in ("source.spm", "target.spm", "vocab.json", "README.md"):
        assert (out / name).is_file(), name
    tuned = load_model(out)
    assert tuned.config.bos_id == tuned.config.pad_id and tuned.config.output_bias
    before = load_model(root / "ours").state_dict()
    assert torch.equal(tuned.state_dict()["encoder.layers.0.feed_forward.linear1.weight"],
                       before["encoder.layers.0.feed_forward.linear1.weight"])  # frozen
    assert not torch.equal(tuned.state_dict()["output_projection.bias"], before["output_projection.bias"])
