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
# evaluates only the first N validation and test sentences (the quick version in the test suite
# uses both); SKIP_TRAIN=1 redoes only the selection and evaluation of an existing $RUN.
# Besides the scores, the JSON records cpu_model, the precision `train.precision: auto` chose,
# the epochs reached, the settings as the run used them (`settings`: the dropout `auto` chose,
# warmup, eval_every, threads, batch_tokens, the averaged tail), final_lr, and the training process's
# peak_rss_gb and sys_time_fraction (system CPU time over user + system), measured by
# benchmarks/process_watch.py ($RUN/train_process.json has the samples).
#
# Model selection uses the validation set only: the best checkpoint (by validation BLEU) and the
# average of the checkpoints of the last AVERAGE_TAIL of the run (default 20%: the annealed end,
# by the progress each checkpoint records; `aiayn average --tail`) are each decoded on `val`
# with beam 4 at every length penalty in ALPHAS (default "0.6 0.8 1.0 1.2 1.5"); the pair with
# the best validation BLEU translates `test_2016_flickr` once. Both models' test scores at that
# alpha are recorded too.
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

if [[ -z "${SKIP_TRAIN:-}" ]]; then
  # process_watch.py records the training process's peak RSS and user/system CPU time.
  "$PY" benchmarks/process_watch.py --json "$RUN.train_process.json" -- "$AIAYN" train "$CONFIG" --out "$RUN" --overwrite \
    --set data.src_lang="$SRC" --set data.tgt_lang="$TGT" --set train.max_minutes="$MINUTES" \
    --set train.progress=none "$@"
  mv "$RUN.train_process.json" "$RUN/train_process.json"
  "$AIAYN" average "$RUN" --tail "${AVERAGE_TAIL:-20%}" --out "$RUN/averaged"
fi

LINES="1,${TEST_LINES:-\$}p"  # sed reads to the end: no SIGPIPE under pipefail
for SPLIT in val test_2016_flickr; do
  for LANG_ in "$SRC" "$TGT"; do
    gunzip -c "$DATA/$SPLIT.$LANG_.gz" | sed -n "$LINES" > "$RUN/$SPLIT.$LANG_"
  done
done
mkdir -p "$RUN/selection"
for MODEL in best averaged; do
  DIR="$RUN"; [[ $MODEL == averaged ]] && DIR="$RUN/averaged"
  for ALPHA in ${ALPHAS:-0.6 0.8 1.0 1.2 1.5}; do
    "$AIAYN" evaluate --model "$DIR" --input "$RUN/val.$SRC" --ref "$RUN/val.$TGT" --beam 4 \
      --alpha "$ALPHA" --output "$RUN/selection/${MODEL}_alpha${ALPHA}.hyp" \
      --json "$RUN/selection/${MODEL}_alpha${ALPHA}.json" | sed -n "1s/^/val, $MODEL, alpha $ALPHA: /p"
  done
done
read -r ALPHA < <("$PY" - "$RUN/selection" <<'PYEOF'
import json, sys
from pathlib import Path
paths = sorted(Path(sys.argv[1]).glob("*_alpha*.json"))  # sorted: ties resolve the same way everywhere
scores = {p.stem: json.loads(p.read_text())["bleu"] for p in paths}
print(max(scores, key=scores.get).split("_alpha")[1])
PYEOF
)
echo "length penalty chosen on val: alpha $ALPHA"
for MODEL in "$RUN" "$RUN/averaged"; do
  "$AIAYN" evaluate --model "$MODEL" --input "$RUN/test_2016_flickr.$SRC" --ref "$RUN/test_2016_flickr.$TGT" \
    --beam 4 --alpha "$ALPHA" --output "$MODEL/test.hyp" --json "$MODEL/test_eval.json"
done
"$AIAYN" plot curves "$RUN" --out "$OUT/multi30k_${SRC}_${TGT}_curve.png"

COMMAND="benchmarks/multi30k.sh $SRC $TGT $MINUTES${*:+ $*}"
"$PY" - "$RUN" "$SRC" "$TGT" "$OUT" "$COMMAND" "$ALPHA" "${AVERAGE_TAIL:-20%}" <<'PYEOF'
import json, sys
from pathlib import Path
import sacrebleu
import yaml
run, src, tgt, out, command, alpha, tail = Path(sys.argv[1]), *sys.argv[2:]
results = json.loads((run / "results.json").read_text())
config = yaml.safe_load((run / "train_config.yaml").read_text())  # `auto` settings as chosen
process = json.loads((run / "train_process.json").read_text())["totals"]
cpuinfo = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").is_file() else ""
cpu_model = next((line.split(":", 1)[1].strip() for line in cpuinfo.splitlines() if line.startswith("model name")), "")
paths = sorted((run / "selection").glob("*_alpha*.json"))
selection = {p.stem: json.loads(p.read_text())["bleu"] for p in paths}
chosen = max(selection, key=selection.get).split("_alpha")[0]  # by validation BLEU only
candidates = {"best": run, "averaged": run / "averaged"}
evals = {name: json.loads((path / "test_eval.json").read_text()) for name, path in candidates.items()}
hyps = (candidates[chosen] / "test.hyp").read_text().splitlines()
refs = (run / f"test_2016_flickr.{tgt}").read_text().splitlines()
srcs = (run / f"test_2016_flickr.{src}").read_text().splitlines()
lc = sacrebleu.corpus_bleu(hyps, [refs], lowercase=True)
figures = {
    "direction": f"{src}-{tgt}", "model": chosen, "beam": 4, "alpha": float(alpha),
    "val_bleu_by_model_and_alpha": selection,
    "bleu": evals[chosen]["bleu"], "signature": evals[chosen]["bleu_signature"],
    "bleu_lowercase": lc.score, "chrf": evals[chosen]["chrf"],
    "bleu_best_checkpoint": evals["best"]["bleu"], "bleu_averaged": evals["averaged"]["bleu"],
    "train_minutes": results["train_minutes"], "train_tokens_per_s": results["tokens_per_s"],
    "steps": results["steps"], "epochs": results["epochs"], "params": results["params"],
    "settings": {
        "dropout": config["model"]["dropout"], "warmup": config["train"]["warmup"],
        "eval_every": config["train"]["eval_every"], "threads": config["train"]["threads"],
        "batch_tokens": config["train"]["batch_tokens"],
        "average_tail": tail,
    },
    "cpu_model": cpu_model, "precision": results["precision"], "final_lr": results["final_lr"],
    "peak_rss_gb": process["peak_rss_gb"], "sys_time_fraction": process["sys_time_fraction"],
    "train_cpu_s": {"user": process["user_s"], "system": process["sys_s"]},
    "load_average_end_of_training": process["load_average_end"],
    "decode_sentences_per_s": evals[chosen]["sentences_per_second"],
    "test_sentences": len(srcs),
    "command": command,
    "samples": [{"source": s, "reference": r, "output": h} for s, r, h in list(zip(srcs, refs, hyps))[:10]],
}
path = Path(out) / f"multi30k_{src}_{tgt}.json"
path.write_text(json.dumps(figures, indent=2, ensure_ascii=False) + "\n")
print(json.dumps({k: v for k, v in figures.items() if k != "samples"}, indent=2))
PYEOF
