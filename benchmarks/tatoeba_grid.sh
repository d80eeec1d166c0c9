#!/usr/bin/env bash
# Tatoeba en-es grid, then `auto` on en-es and en-fr without retuning (issue 43). Every run: one
# thread, MINUTES (30) of training, two runs side by side (taskset -c 0 / -c 1), the recipe of
# configs/tatoeba_en_{es,fr}.yaml (every setting `auto` unless the grid fixes it), test BLEU
# (sacreBLEU, cased, 13a; beam 4, alpha 0.6, the run's own final test) and chrF on
# Tatoeba-Challenge test_v2020.
#
#   benchmarks/tatoeba_grid.sh                  # every stage: about 3 x (MINUTES + ~10) minutes
#   STAGES="grid" benchmarks/tatoeba_grid.sh    # or one stage: grid | seed | fr | summary
#   nohup benchmarks/tatoeba_grid.sh > tatoeba_grid.log 2>&1 &
#
# A run whose result file exists is skipped, so the stages resume after an interruption (delete
# the result file to run a point again).
# Stages (each needs the ones before it):
#   grid     the two nearest model presets x two vocabulary sizes (PRESETS, VOCABS; default small,
#            base x 8000, 16000: `auto` picks small and 8000 for en-es's 108k pairs on a CPU, so
#            each axis has its choice and the next size up), seed 1, two pairs of runs; the other
#            `auto` settings (batch, dropout, warmup, validation) stay on, as they would for a user
#   seed     the best grid point (by test BLEU) with train.seed=2, to measure the seed spread,
#            beside `auto` on en-es (every setting `auto`)
#   fr       `auto` on en-fr, beside the best en-es grid point's preset and vocabulary on en-fr
#   summary  benchmarks/results/tatoeba_summary.json: the grid, the spread, the pass rule
#            (`auto` >= best grid point - max(0.5, 2 x seed spread)); see tatoeba_summary.py;
#            and tatoeba_{en_es,en_fr}_curves.png, validation BLEU against minutes of every run
# Results: benchmarks/results/tatoeba_en_es_grid_<preset>_<vocab>_seed<seed>.json,
# tatoeba_en_es_auto.json, tatoeba_en_fr_auto.json, tatoeba_en_fr_best_grid_point.json (each
# with the validation curve against minutes). Run directories under RUNS
# (benchmarks/runs/tatoeba); token stores are prepared first, one at a time (`aiayn prepare`), so
# two runs never prepare the same store at once and preparation is outside the side-by-side time.
set -euo pipefail
cd "$(dirname "$0")/.."
MINUTES=${MINUTES:-30}
read -r -a PRESETS <<< "${PRESETS:-small base}"
read -r -a VOCABS <<< "${VOCABS:-8000 16000}"
STAGES=${STAGES:-grid seed fr summary}
AIAYN=${AIAYN:-.venv/bin/aiayn}
PY=${PY:-.venv/bin/python}
RUNS=${RUNS:-benchmarks/runs/tatoeba}
OUT=${OUT:-benchmarks/results}
export AIAYN_CACHE=${AIAYN_CACHE:-$RUNS/.cache}
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}  # idle OpenMP threads sleep on a shared machine
mkdir -p "$RUNS" "$OUT"
COMMON=(--set train.max_minutes="$MINUTES" --set train.threads=1 --set train.progress=none)

prepare() {  # CONFIG [--set ...]: the token store, once
  "$AIAYN" prepare "$@" > /dev/null
}

train() {  # CORE NAME RESULT CONFIG [--set ...]: one run pinned to CORE, then its figures
  local core=$1 name=$2 result=$3 config=$4
  shift 4
  local command="$AIAYN train $config --out $RUNS/$name ${COMMON[*]} $*"
  echo "$(date -u +%H:%M:%S) core $core: $command"
  taskset -c "$core" "$AIAYN" train "$config" --out "$RUNS/$name" --overwrite "${COMMON[@]}" "$@" \
    > "$RUNS/$name.log" 2>&1
  "$PY" benchmarks/tatoeba_summary.py record "$RUNS/$name" "$OUT/$result.json" \
    --command "taskset -c $core $command" --label "name=$name" > /dev/null
  echo "$(date -u +%H:%M:%S) $name: $(grep -m1 '"bleu"' "$OUT/$result.json")"
}

done_already() {  # "ARGS OF train": its result file exists (the stages resume)
  local words
  read -r -a words <<< "$1"
  [[ -f "$OUT/${words[1]}.json" ]]
}

side_by_side() {  # "ARGS OF train" "ARGS OF train": two runs, one per core; a finished one is skipped
  local first="" second=""
  if done_already "$1"; then echo "skipped (done): $1"; else eval "train 0 $1" & first=$!; fi
  if done_already "$2"; then echo "skipped (done): $2"; else eval "train 1 $2" & second=$!; fi
  if [[ -n $first ]]; then wait "$first"; fi
  if [[ -n $second ]]; then wait "$second"; fi
}

grid_args() {  # PRESET VOCAB SEED
  echo "en_es_$1_$2_seed$3 tatoeba_en_es_grid_$1_$2_seed$3 configs/tatoeba_en_es.yaml" \
    "--set model.preset=$1 --set data.vocab_size=$2 --set train.seed=$3"
}

best_point() {  # the best seed-1 grid point by test BLEU: "PRESET VOCAB"
  "$PY" - "$OUT" <<'PYEOF'
import json, sys
from pathlib import Path
points = [json.loads(p.read_text()) for p in Path(sys.argv[1]).glob("tatoeba_en_es_grid_*_seed1.json")]
best = max(points, key=lambda r: r["bleu"])["settings"]
print(best["preset"], best["vocab_size"])
PYEOF
}

for STAGE in $STAGES; do
  case $STAGE in
    grid)
      for V in "${VOCABS[@]}"; do prepare configs/tatoeba_en_es.yaml --set data.vocab_size="$V"; done
      # Each pair mixes the vocabularies, so the two runs of a pair differ in both axes' cost.
      side_by_side "$(grid_args "${PRESETS[0]}" "${VOCABS[0]}" 1)" "$(grid_args "${PRESETS[1]}" "${VOCABS[1]}" 1)"
      side_by_side "$(grid_args "${PRESETS[0]}" "${VOCABS[1]}" 1)" "$(grid_args "${PRESETS[1]}" "${VOCABS[0]}" 1)"
      ;;
    seed)
      read -r P V < <(best_point)
      prepare configs/tatoeba_en_es.yaml
      side_by_side "$(grid_args "$P" "$V" 2)" "en_es_auto tatoeba_en_es_auto configs/tatoeba_en_es.yaml"
      ;;
    fr)
      read -r P V < <(best_point)
      prepare configs/tatoeba_en_fr.yaml
      prepare configs/tatoeba_en_fr.yaml --set data.vocab_size="$V"
      side_by_side "en_fr_auto tatoeba_en_fr_auto configs/tatoeba_en_fr.yaml" \
        "en_fr_best_grid_point tatoeba_en_fr_best_grid_point configs/tatoeba_en_fr.yaml --set model.preset=$P --set data.vocab_size=$V"
      ;;
    summary)
      "$PY" benchmarks/tatoeba_summary.py summary "$OUT"
      # Validation BLEU against minutes: what each setting reached within the budget.
      for PAIR in en_es en_fr; do
        mapfile -t DIRS < <(find "$RUNS" -maxdepth 1 -type d -name "${PAIR}_*" | sort)
        if (( ${#DIRS[@]} )); then
          "$AIAYN" plot curves "${DIRS[@]}" --x minutes --out "$OUT/tatoeba_${PAIR}_curves.png"
        fi
      done
      ;;
    *)
      echo "unknown stage $STAGE (grid, seed, fr, summary)" >&2
      exit 2
      ;;
  esac
done
