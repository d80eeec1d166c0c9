"""Choose the word-alignment policy on the built-in `copy` task and measure it on `reverse`.

    aiayn train --out runs/copy --set data.task=copy --set data.num_train=20000 \
        --set data.num_valid=100 --set data.num_test=200 --set train.max_steps=1200
    aiayn train --out runs/reverse --set data.task=reverse ... (the same sizes, more steps)
    python benchmarks/alignment_policy.py --copy runs/copy --reverse runs/reverse

For each model the script translates its own test split (greedy), keeps the outputs that equal
the reference (so the gold links are known: copy i-i, reverse i-(n-1-i)), and computes the
alignment error rate, AER = 1 - 2|A & S| / (|A| + |S|) (all gold links sure), of every policy
(decoder layer, head or the heads' mean, the row predicting or reading each output token) from
the same attention pass `aiayn translate --alignments` uses. The best policy on `copy` is the
one `aiayn.inference.words` must use; its AER on `reverse` is the measurement. These toy tasks
check the plumbing (attention -> word links -> Pharaoh indices), not alignment quality on language.
"""

from __future__ import annotations

import argparse
import json
from itertools import product

import aiayn
from aiayn.data.synthetic import make_task
from aiayn.inference.torch_translator import cross_attention
from aiayn.inference.words import ALIGNMENT_LAYER, ALIGNMENT_ROW_SHIFT, align_words, token_words
from aiayn.runtime.cpu import cpu_model

SIZES = (20000, 100, 200)  # the runs' data.num_train / num_valid / num_test
SEED = 1


def gold(task: str, n: int) -> set[tuple[int, int]]:
    return {(i, i) if task == "copy" else (i, n - 1 - i) for i in range(n)}


def aer(found: set[tuple[int, int]], sure: set[tuple[int, int]]) -> float:
    return 1 - 2 * len(found & sure) / (len(found) + len(sure))


def policy_errors(task: str, model_dir: str) -> tuple[dict[tuple, float], int]:
    """The mean AER of every policy over the exactly translated test pairs, and their count."""
    translator = aiayn.load(model_dir, "cpu", task="translation")
    pairs = make_task(task, SEED, *SIZES)["test"]
    outputs = translator.translate_nbest([s for s, _ in pairs], nbest=1, beam=1)
    kept = [(s, out[0]) for (s, ref), out in zip(pairs, outputs, strict=True) if out[0].text == ref]
    source_tok, target_tok = translator.tokenizers.source, translator.tokenizers.target
    sources = [source_tok.encode(s) for s, _ in kept]
    maps = cross_attention(translator.model, sources, [t.tokens for _, t in kept], translator.device)
    config = translator.config
    policies = list(product(range(config.num_decoder_layers), [None, *range(config.num_heads)], (0, 1)))
    totals = dict.fromkeys(policies, 0.0)
    for (text, translation), ids, cross in zip(kept, sources, maps, strict=True):
        words = token_words(source_tok, ids), token_words(target_tok, translation.tokens)
        sure = gold(task, len(text.split()))
        for layer, head, shift in policies:
            totals[layer, head, shift] += aer(set(align_words(cross, *words, layer, head, shift)), sure)
    return {p: total / max(len(kept), 1) for p, total in totals.items()}, len(kept)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--copy", required=True, help="model trained on data.task=copy")
    parser.add_argument("--reverse", required=True, help="model trained on data.task=reverse")
    args = parser.parse_args()
    copy_errors, copy_count = policy_errors("copy", args.copy)
    reverse_errors, reverse_count = policy_errors("reverse", args.reverse)
    layers = len({p[0] for p in copy_errors})
    chosen = min(copy_errors, key=lambda p: (copy_errors[p], p[2], p[1] is not None, -p[0]))
    documented = (ALIGNMENT_LAYER % layers, None, ALIGNMENT_ROW_SHIFT)
    print(json.dumps({
        "cpu_model": cpu_model(), "copy_sentences": copy_count, "reverse_sentences": reverse_count,
        "chosen_on_copy": {"layer": chosen[0], "head": chosen[1] if chosen[1] is not None else "mean",
                           "row_shift": chosen[2], "copy_aer": round(copy_errors[chosen], 4)},
        "documented_policy_is_chosen": documented == chosen,
        "reverse_aer_of_documented_policy": round(reverse_errors[documented], 4),
        "all_policies": {f"layer{p[0]}/{'mean' if p[1] is None else 'head' + str(p[1])}/shift{p[2]}":
                         [round(copy_errors[p], 4), round(reverse_errors[p], 4)] for p in copy_errors},
    }, indent=1))


if __name__ == "__main__":
    main()
