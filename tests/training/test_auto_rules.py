"""The pure rules behind `auto` (`aiayn.training.auto_rules`): each at its boundaries, Multi30k's
statistics giving today's recipe, and the docs' table matching the rules."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
import yaml

from aiayn.training import auto_rules
from aiayn.training.auto_rules import (
    AUTO_ORDER,
    CorpusProfile,
    Run,
    batches_that_fit,
    bleu_sentences_for_run,
    choices_table,
    eval_every_for_updates,
    eval_share_for_updates,
    plan_auto,
    preset_cost,
    preset_for_run,
    training_seconds,
    validation_split_size,
    vocab_size_for_pairs,
    warmup_for_updates,
)

REPO = Path(__file__).resolve().parents[2]

# Multi30k task 1 de-en, as the recipe tokenizes it (joint BPE, 8000 tokens): measured from the
# token store `aiayn train configs/multi30k_de_en.yaml` prepared (numpy over its src_lengths.npy and
# tgt_lengths.npy: sum, mean, 95th percentile; lengths without <eos>), and val's 1,014 lines.
MULTI30K = CorpusProfile(pairs=29_000, src_tokens=412_577, tgt_tokens=397_072, src_p95=24, tgt_p95=23,
                         valid_pairs=1_014)
# Target tokens of a 3000- and a 1500-token batch of it, from the start-up log line of the one-thread
# run in benchmarks/RESULTS.md ("fp32 1,694 target tokens/s; expected updates 2,343 with 3000, 4,430
# with 1500-token batches" in 60 minutes): 1,694 * 3600 / updates.
MULTI30K_TARGETS_PER_BATCH = {3000: 1_694 * 3600 / 2_343, 1500: 1_694 * 3600 / 4_430}


def multi30k_run(tokens_per_s: float, recipe: dict) -> Run:
    per_epoch = MULTI30K.tgt_tokens + MULTI30K.pairs  # + <eos>
    return Run(
        budget_s=60 * recipe["train"]["max_minutes"], max_steps=recipe["train"]["max_steps"], max_epochs=None,
        batches_per_step=1, preset="small", batch_tokens=3000, eval_every=1,
        tokens_per_s=lambda preset: tokens_per_s if preset == "small" else tokens_per_s / 10,
        target_per_batch=MULTI30K_TARGETS_PER_BATCH.__getitem__,
        batches_per_epoch=lambda b: math.ceil(per_epoch / MULTI30K_TARGETS_PER_BATCH[b]),
    )


def test_multi30k_statistics_give_todays_recipe():
    """Multi30k at the recorded one-thread fp32 speed (1,768 target tokens/s over the 60-minute run,
    RESULTS.md) and on the full machine (bf16 6,745 timed at start-up): the recipe's numbers, and
    the batch and dropout its `auto` chose in those runs."""
    recipe = yaml.safe_load((REPO / "configs" / "multi30k_de_en.yaml").read_text())
    assert vocab_size_for_pairs(MULTI30K.pairs) == recipe["data"]["vocab_size"] == 8000
    slow = plan_auto(AUTO_ORDER, MULTI30K, multi30k_run(1_768, recipe))
    assert slow.value("model.preset") == recipe["model"]["preset"] == "small"
    assert slow.value("train.warmup") == recipe["train"]["warmup"] == "6%"
    assert slow.value("train.eval_every") == recipe["train"]["eval_every"] == "6%"
    assert slow.value("train.bleu_max_sentences") == recipe["train"]["bleu_max_sentences"] == 1014
    assert (slow.value("train.batch_tokens"), slow.value("model.dropout")) == (1500, 0.2)  # as logged then
    fast = plan_auto(AUTO_ORDER, MULTI30K, multi30k_run(6_745, recipe))
    assert (fast.value("model.preset"), fast.value("train.batch_tokens"), fast.value("model.dropout")) == (
        "small", 3000, 0.3)
    assert fast.value("train.warmup") == fast.value("train.eval_every") == "6%"


def test_vocab_size_by_pairs():
    assert [vocab_size_for_pairs(n) for n in (1, 199_999, 200_000, 1_999_999, 2_000_000, 10**9)] == [
        8000, 8000, 16000, 16000, 32000, 32000]


def test_preset_by_pairs_and_tokens_seen():
    small_needs, base_pairs, base_tokens = 1.5e6, 500_000, 5e7
    assert preset_for_run(29_000, small_needs - 1) == "tiny"
    assert preset_for_run(29_000, small_needs) == "small"
    assert preset_for_run(base_pairs - 1, 1e12) == "small"  # a small corpus never gets base
    assert preset_for_run(base_pairs, base_tokens - 1) == "small"  # nor a short run
    assert preset_for_run(base_pairs, base_tokens) == "base"
    assert preset_cost("tiny", 8000) < preset_cost("small", 8000) < preset_cost("small", 32000)
    assert preset_cost("small", 8000) < preset_cost("base", 8000)


def test_warmup_by_updates():
    assert warmup_for_updates(1_000, share_allowed=True) == "6%"
    assert warmup_for_updates(1_000, share_allowed=False) == 60  # no max_steps to take a share of
    assert warmup_for_updates(4000 / 0.06, share_allowed=True) == "6%"  # exactly 4000 steps
    assert warmup_for_updates(4000 / 0.06 + 100, share_allowed=True) == 4000  # the paper's, at most
    assert warmup_for_updates(1, share_allowed=False) == 1


def test_eval_every_by_updates():
    assert eval_every_for_updates(100_000) == "6%"
    assert eval_every_for_updates(834) == "6%"  # 50 updates apart at 6%
    assert eval_every_for_updates(833) == "7%"  # fewer: the share grows to keep 50 updates apart
    assert eval_every_for_updates(100) == "50%" == eval_every_for_updates(3)  # at most every half run


def test_bleu_sentences_by_validation_time():
    # 17 validations of a 3600 s run may take 10%: 21.2 s each; at 1,000 tokens/s, 14+1 tokens a sentence.
    fits = int(0.1 * 3600 / 17 * 1_000 / 15)
    assert bleu_sentences_for_run(10_000, 14, 1_000, 3600, 17) == fits == 1411
    assert bleu_sentences_for_run(1_000, 14, 1_000, 3600, 17) == 1_000  # all there are
    assert bleu_sentences_for_run(10_000, 14, 10, 3600, 17) == 200  # at least this many
    assert bleu_sentences_for_run(50, 14, 10, 3600, 17) == 50


def test_validation_split_size():
    assert [validation_split_size(n) for n in (5, 300, 1_000, 29_000, 100_000, 5_000_000)] == [
        0, 30, 100, 580, 2000, 2000]


def test_a_setting_given_as_a_number_is_kept_and_read():
    recipe = yaml.safe_load((REPO / "configs" / "multi30k_de_en.yaml").read_text())
    run = multi30k_run(1_768, recipe)._replace(preset="base", batch_tokens=3000, eval_every=1000)
    plan = plan_auto(("model.dropout", "train.bleu_max_sentences"), MULTI30K, run)
    assert [c.name for c in plan.choices] == ["model.dropout", "train.bleu_max_sentences"]
    assert plan.preset == "base" and plan.batch_tokens == 3000 and set(plan.steps) == {3000}
    assert plan.epochs < 2  # base's estimated speed is a tenth of small's here
    validations = int(plan.steps[3000] // 1000) + 1
    assert f"{validations} validations" in plan.choices[1].reason


def test_a_run_bounded_by_epochs_alone_validates_every_so_many_steps():
    recipe = yaml.safe_load((REPO / "configs" / "multi30k_de_en.yaml").read_text())
    run = multi30k_run(1_768, recipe)._replace(budget_s=None, max_steps=None, max_epochs=2)
    plan = plan_auto(("train.warmup", "train.eval_every"), MULTI30K, run)
    updates = plan.steps[3000]  # two epochs of 3000-token batches
    assert updates == 2 * math.ceil((MULTI30K.tgt_tokens + MULTI30K.pairs) / MULTI30K_TARGETS_PER_BATCH[3000])
    assert plan.value("train.warmup") == round(0.06 * updates) == 20
    # 328 updates: 6% would be 20 apart, so 16% (at least 50 apart), as steps
    assert plan.value("train.eval_every") == round(eval_share_for_updates(updates) * updates) == 52


def test_corpus_settings_need_a_corpus():
    recipe = yaml.safe_load((REPO / "configs" / "multi30k_de_en.yaml").read_text())
    with pytest.raises(Exception, match="model.preset auto needs a translation corpus"):
        plan_auto(("model.preset",), None, multi30k_run(1_768, recipe))


def test_the_docs_table_is_the_rules():
    page = (REPO / "docs" / "auto-settings.md").read_text()
    table = re.search(r"<!-- table: [^>]*-->\n(.*?)\n<!-- end table -->", page, re.S)
    assert table is not None and table.group(1) == choices_table()
    rows = choices_table().splitlines()[2:]
    assert len(rows) == 8 and sum("the rules alone" in row for row in rows) == 7


def test_the_docs_table_follows_a_changed_rule(monkeypatch):
    """A rule changed without the page: the check above would fail (the table is regenerated)."""
    before = choices_table()
    monkeypatch.setattr(auto_rules, "VOCAB_RULE", ((math.inf, 4000),))
    assert choices_table() != before and "| 4000 |" in choices_table()


def test_the_validations_share_comes_off_the_budget_before_the_updates_are_counted():
    recipe = yaml.safe_load((REPO / "configs" / "multi30k_de_en.yaml").read_text())
    run = multi30k_run(1_768, recipe)
    without = plan_auto(AUTO_ORDER, MULTI30K, run)
    shared = plan_auto(AUTO_ORDER, MULTI30K, run._replace(validation_share=0.1))
    batch = without.batch_tokens
    assert shared.steps[batch] == pytest.approx(without.steps[batch] / 1.1)  # 10% of training on top
    assert training_seconds(1800, 0.1) == pytest.approx(1800 / 1.1)


def test_gpu_batches_are_those_that_fit_in_memory_with_headroom():
    choices = auto_rules.GPU_BATCH_TOKENS_CHOICES
    # 8 GB free, 1 GB for gradients and moments, 200 kB a token: 80% of 8 GB leaves 5.4 GB, 27,000 tokens.
    assert batches_that_fit(choices, 8e9, 1e9, 2e5) == (24576, 16384, 12288, 8192, 6144, 4096, 3000)
    assert batches_that_fit(choices, 1e12, 1e9, 2e5)[0] == 65536  # never above 64k
    assert batches_that_fit(choices, 1e9, 1e9, 2e5) == (3000,)  # nothing fits: the smallest, to fail loudly
