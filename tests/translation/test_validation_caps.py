"""Validation decoding within its caps (`aiayn.translation.validation`): a length cap read off the
references, a time allowance given by the Trainer; each cap that bit says so in one log line."""

from __future__ import annotations

import json
import logging
from functools import partial
from types import SimpleNamespace

import pytest
import torch

from aiayn.decoding.common import output_length_limit
from aiayn.model import Transformer
from aiayn.tasks import config_from_dict
from aiayn.training.loss import translation_loss
from aiayn.training.run_dir import prepare_run_dir
from aiayn.training.trainer import Trainer
from aiayn.translation import validation
from aiayn.translation.data import prepare_data
from aiayn.translation.task import TRANSLATION_TASK, build_model_config
from aiayn.translation.validation import MAX_LEN_EXTRA, decode_within_caps, reference_len_extra


def test_the_auto_length_cap_follows_the_references():
    # 99 references 2 tokens longer than their sources, one 30 longer: the 99th percentile is
    # 2 + 0.01 x 28 = 2.28 -> 3, + 5 tokens of margin.
    assert reference_len_extra([10] * 100, [12] * 99 + [40]) == 8
    assert reference_len_extra([10] * 10, [5] * 10) == 5  # shorter references: the margin alone
    assert reference_len_extra([3] * 10, [200] * 10) == MAX_LEN_EXTRA  # never above source + 50
    assert reference_len_extra([0, 10], [90, 10]) == 5  # a blank source is not decoded: skipped


class RunawayTranslator:
    """Outputs as long as their limit allows (a model that never says <eos>), 1 s a sentence."""

    def __init__(self, clock: list[float]) -> None:
        self.clock, self.calls = clock, []
        self.config = SimpleNamespace(max_len=256)
        words = SimpleNamespace(encode_batch=lambda texts: [t.split() for t in texts])
        self.tokenizers = SimpleNamespace(target=words)

    def count_tokens(self, texts):
        return [len(t.split()) + 1 for t in texts]

    def translate_nbest(self, texts, nbest, beam, alpha, max_len_extra, batch_tokens, line_offset=0):
        self.calls.append((line_offset, len(texts), max_len_extra))
        self.clock[0] += len(texts)
        found = []
        for text in texts:
            limit = output_length_limit(len(text.split()) + 1, max_len_extra, None, self.config.max_len)
            found.append([SimpleNamespace(text=text, tokens=list(range(limit)))])
        return found


def test_decoding_stops_at_the_time_allowance_and_counts_length_cuts(monkeypatch):
    monkeypatch.setattr(validation, "MIN_SENTENCES", 4)
    monkeypatch.setattr(validation, "CHUNK_SENTENCES", 2)
    clock = [0.0]
    translator = RunawayTranslator(clock)
    sources = [f"w{i} x y" for i in range(10)]  # 3 tokens + <eos>; references as long
    decoded = decode_within_caps(
        translator, sources, sources, beam=1, allowance_s=7.0, timer=lambda: clock[0])
    # 4 sentences (4 s), then 2 more (6 s, 8 s predicted for the next chunk: past 7 s): 6 of 10.
    assert translator.calls == [(0, 4, 5), (4, 2, 5)]
    assert len(decoded.hypotheses) == 6 and decoded.time_cut and decoded.sentences == 10
    assert decoded.max_len_extra == 5 and decoded.length_cut == 6  # every output ran to source + 5
    unlimited = decode_within_caps(RunawayTranslator([0.0]), sources, sources, beam=1, max_len_extra=50)
    assert len(unlimited.hypotheses) == 10 and not unlimited.time_cut and unlimited.length_cut == 0


def tiny_run_config(**train):
    return config_from_dict({
        "data": {"task": "copy", "seed": 3, "num_train": 200, "num_valid": 40, "num_test": 4,
                 "tokenizer": "char", "max_sentence_tokens": 30},
        "model": {"preset": "tiny", "dropout": 0.1, "max_len": 64},
        "train": {"max_steps": 2, "batch_tokens": 400, "schedule": "constant", "lr": 1e-3, "warmup": 1,
                  "eval_every": 2, "progress": "none", "bleu_max_sentences": 30, "threads": 1,
                  "precision": "fp32", "compile": "false"} | train,
    })


def validated_run(tmp_path, **train) -> dict:
    """Two steps of a fresh tiny model and one validation with BLEU; its metrics row."""
    config = tiny_run_config(**train)
    prepare_run_dir(tmp_path, resume=False, overwrite=False)
    torch.manual_seed(config.train.seed)
    data = prepare_data(config.data)
    model = Transformer(build_model_config(config, data.tokenizers))
    evaluate = partial(TRANSLATION_TASK.validation_metrics, config=config, data=data)
    Trainer(config, model, data.train, data.valid, tmp_path, loss_fn=translation_loss, evaluate=evaluate,
            metrics=TRANSLATION_TASK.metrics).fit()
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    return next(r for r in rows if r["split"] == "val")


@pytest.fixture
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_a_tiny_run_where_the_caps_bite(tmp_path, monkeypatch, caplog, one_thread):
    monkeypatch.setattr(validation, "MIN_SENTENCES", 8)
    monkeypatch.setattr(validation, "CHUNK_SENTENCES", 4)
    with caplog.at_level(logging.INFO, logger="aiayn.translation.validation"):
        capped = validated_run(tmp_path / "capped", bleu_time_share=1e-9)  # no time left past the first 8
    assert capped["bleu_sentences"] == 8
    assert "validation decoding stopped at its time cap: 8 of 30 sentences" in caplog.text
    # Copy-task references are their sources: the cap is source + 5, and a model of two steps
    # does not stop by itself.
    assert "outputs stopped at the length cap (source + 5 tokens" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="aiayn.translation.validation"):
        free = validated_run(tmp_path / "free", bleu_time_share=None, bleu_max_len_extra=50)
    assert free["bleu_sentences"] == 30 and "cap" not in caplog.text


@pytest.mark.parametrize("value", ["long", -1])
def test_the_length_cap_setting_is_checked(value):
    with pytest.raises(Exception, match="train.bleu_max_len_extra"):
        tiny_run_config(bleu_max_len_extra=value)
