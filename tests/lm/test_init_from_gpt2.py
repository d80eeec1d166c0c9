"""`aiayn lm train --init-from` a GPT-2-layout Transformers directory (issue 26): the run imports
it, starts at the loss Transformers computes on the same validation windows (within 1e-3), and
lowers it."""

from __future__ import annotations

import json

import pytest
import torch

from aiayn.cli.main import main

transformers = pytest.importorskip("transformers", reason="needs the optional extra 'export'")

TEXT = " ".join(
    ["the cat sat on the mat and the dog ran to the park where children play in the sun"] * 60
)


@pytest.fixture(scope="module")
def gpt2_dir(tmp_path_factory):
    import tokenizers
    from tokenizers import decoders, models, pre_tokenizers, trainers

    root = tmp_path_factory.mktemp("gpt2-lm")
    hf = tokenizers.Tokenizer(models.BPE())
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    hf.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=280, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    hf.train_from_iterator([TEXT], trainer=trainer)
    hf.add_special_tokens(["<|endoftext|>"])
    eot = hf.token_to_id("<|endoftext|>")
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=hf, bos_token="<|endoftext|>",
                                                eos_token="<|endoftext|>")
    config = transformers.GPT2Config(vocab_size=hf.get_vocab_size(), n_positions=128, n_embd=64, n_layer=2,
                                     n_head=4, bos_token_id=eot, eos_token_id=eot, resid_pdrop=0.0,
                                     embd_pdrop=0.0, attn_pdrop=0.0)
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(config).eval()
    model.save_pretrained(root / "hf")
    fast.save_pretrained(root / "hf")
    (root / "text.txt").write_text(TEXT)
    return root


def _transformers_loss(hf_dir, run_dir) -> float:
    """Transformers' mean next-token loss over the run's validation windows."""
    from aiayn.data.special_tokens import SpecialTokens
    from aiayn.data.tokenizer import Tokenizer
    from aiayn.formats import read_model_json
    from aiayn.lm.run import prepare_lm_data
    from aiayn.model.config import ModelConfig
    from aiayn.tasks import load_config

    specials = SpecialTokens.of(ModelConfig.from_dict(read_model_json(run_dir)["config"]))
    tokenizer = Tokenizer.load(run_dir / "tokenizer.json", specials)
    data = prepare_lm_data(load_config(run_dir / "train_config.yaml").data, tokenizer)
    model = transformers.GPT2LMHeadModel.from_pretrained(hf_dir).eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for batch in data.valid.batches(10_000, shuffle=False):
            logits = model(batch.inputs).logits
            keep = batch.labels != batch.pad_id
            loss = torch.nn.functional.cross_entropy(logits[keep], batch.labels[keep], reduction="sum")
            total += float(loss)
            count += int(keep.sum())
    return total / count


def test_lm_train_init_from_gpt2_starts_at_its_loss_and_lowers_it(gpt2_dir, tmp_path):
    out = tmp_path / "run"
    code = main([
        "lm", "train", "--text", str(gpt2_dir / "text.txt"), "--init-from", str(gpt2_dir / "hf"),
        "--out", str(out), "--set", "data.block_size=32", "--set", "train.max_steps=30",
        "--set", "train.eval_every=30", "--set", "train.precision=fp32", "--set", "train.batch_tokens=256",
        "--set", "train.threads=1", "--set", "train.progress_bar=false", "--set", "train.warmup=5",
    ])
    assert code == 0
    results = json.loads((out / "results.json").read_text())
    assert (out / "init_from" / "config.json").is_file()  # imported into the run directory
    assert abs(results["init_val_loss"] - _transformers_loss(gpt2_dir / "hf", out)) < 1e-3
    assert results["val_loss"] < results["init_val_loss"] - 0.1
    assert json.loads((out / "config.json").read_text())["config"]["activation"] == "gelu_new"
