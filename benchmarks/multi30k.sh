#!/usr/bin/env bash
# Multi30k end to end: raw .gz files -> BPE -> training (wall-clock budget) -> checkpoint
# averaging -> beam search on test_2016_flickr -> sacreBLEU/chrF -> results JSON.
#
#   benchmarks/multi30k.sh [SRC TGT] [MINUTES] [aiayn train options...]   (defaults: de en 60)
#   nohup benchmarks/multi30k.sh de en 60 > multi30k.log 2>&1 &
#
# Writes $OUT/multi30k_${SRC}_${TGT}.json and the validation curve PNG (OUT defaults to
# benchmarks/results; RUN, the run directory, to benchmarks/runs/multi30k_${SRC}_${TGT}).
# Options after MINUTES go to `aiayn train` (e.g. `--set model.preset=tiny`); TEST_LINES=N
# evaluates only the first N test sentences (the quick version in the test suite uses both).
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=${1:-de}
TGT=${2:-en}
MINUTES=${3:-60}
shift $(( $# < 3 ? $# : 3 ))
AIAYN=${AIAYN:-.venv/bin/aiayn}
PY=${PY:-.venv/bin/python}
DATA=${AIAYN_DATA_DIR:-../shared/data}/multi30k
CONFIG=${CONFIG:-configs/multi30k_de_en.yaml}
RUN=${RUN:-benchmarks/runs/multi30k_${SRC}_${TGT}}
OUT=${OUT:-benchmarks/results}
# Idle OpenMP threads sleep instead of spinning: on a shared 2-core machine spinning
# workers can stall a run many times over.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
mkdir -p "$OUT" "$(dirname "$RUN")"

"$AIAYN" train "$CONFIG" --out "$RUN" --overwrite \
  --set data.src_lang="$SRC" --set data.tgt_lang="$TGT" --set train.max_minutes="$MINUTES" \
  --set train.progress_bar=false "$@"
"$AIAYN" average "$RUN" --last 5 --out "$RUN/averaged"

LINES="1,${TEST_LINES:-\$}p"  # sed reads to the end: no SIGPIPE under pipefail
gunzip -c "$DATA/test_2016_flickr.$SRC.gz" | sed -n "$LINES" > "$RUN/test.$SRC"
gunzip -c "$DATA/test_2016_flickr.$TGT.gz" | sed -n "$LINES" > "$RUN/test.$TGT"
for MODEL in "$RUN" "$RUN/averaged"; do
  "$AIAYN" evaluate --model "$MODEL" --input "$RUN/test.$SRC" --ref "$RUN/test.$TGT" \
    --beam 4 --alpha 0.6 --output "$MODEL/test.hyp" --json "$MODEL/test_eval.json"
done
"$AIAYN" plot curves "$RUN" --out "$OUT/multi30k_${SRC}_${TGT}_curve.png"

COMMAND="benchmarks/multi30k.sh $SRC $TGT $MINUTES${*:+ $*}"
"$PY" - "$RUN" "$SRC" "$TGT" "$OUT" "$COMMAND" <<'PYEOF'
import json, sys
from pathlib import Path
import sacrebleu
run, src, tgt, out, command = Path(sys.argv[1]), *sys.argv[2:]
results = json.loads((run / "results.json").read_text())
candidates = {"best": run, "averaged": run / "averaged"}
evals = {name: json.loads((path / "test_eval.json").read_text()) for name, path in candidates.items()}
chosen = max(evals, key=lambda name: evals[name]["bleu"])
hyps = (candidates[chosen] / "test.hyp").read_text().splitlines()
refs = (run / f"test.{tgt}").read_text().splitlines()
srcs = (run / f"test.{src}").read_text().splitlines()
lc = sacrebleu.corpus_bleu(hyps, [refs], lowercase=True)
figures = {
    "direction": f"{src}-{tgt}", "model": chosen,
    "bleu": evals[chosen]["bleu"], "signature": evals[chosen]["bleu_signature"],
    "bleu_lowercase": lc.score, "chrf": evals[chosen]["chrf"],
    "bleu_best_checkpoint": evals["best"]["bleu"], "bleu_averaged": evals["averaged"]["bleu"],
    "train_minutes": results["train_minutes"], "train_tokens_per_s": results["tokens_per_s"],
    "steps": results["steps"], "params": results["params"],
    "decode_sentences_per_s": evals[chosen]["sentences_per_second"],
    "test_sentences": len(srcs),
    "command": command,
    "samples": [{"source": s, "reference": r, "output": h} for s, r, h in list(zip(srcs, refs, hyps))[:10]],
}
path = Path(out) / f"multi30k_{src}_{tgt}.json"
path.write_text(json.dumps(figures, indent=2, ensure_ascii=False) + "\n")
print(json.dumps({k: v for k, v in figures.items() if k != "samples"}, indent=2))
PYEOF
