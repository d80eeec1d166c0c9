#!/usr/bin/env bash
# The run that docs/tutorial.md shows, step by step, as a user types it: train for MINUTES on
# Tatoeba en-es, then the curves, evaluate --report on 300 test lines, translate --nbest and
# --scores, average, export ctranslate2 and translate the export, serve and one curl. Each step's
# output goes to OUT/<step>.out; OUT/tutorial_en_es.json gathers the run's results.json (without
# its example translations) and those outputs (what benchmarks/results/tutorial_en_es.json holds).
#
#   benchmarks/tutorial_run.sh WORKDIR [MINUTES] [OUT]     # D: $AIAYN_DATA_DIR or ../shared/data
set -euo pipefail
WORK=${1:?usage: benchmarks/tutorial_run.sh WORKDIR [MINUTES] [OUT]}
MINUTES=${2:-30}
REPO=$(cd "$(dirname "$0")/.." && pwd)
DATA=${AIAYN_DATA_DIR:-$REPO/../shared/data}
D=$(cd "$DATA/tatoeba/en-es" && pwd)
mkdir -p "$WORK"; cd "$WORK"
OUT=$(mkdir -p "${3:-out}" && cd "${3:-out}" && pwd)
TEXT="I learned a lot this week."
# a finished run (its results.json written) is kept: rerunning the script redoes the later steps
if [ ! -f runs/en-es/results.json ]; then
    aiayn train --train-src $D/train.en.gz --train-tgt $D/train.es.gz \
        --valid-src $D/valid.en.gz --valid-tgt $D/valid.es.gz \
        --test-src $D/test_v2020.en.gz --test-tgt $D/test_v2020.es.gz \
        --minutes "$MINUTES" --out runs/en-es > train.stdout 2> train.stderr
fi
aiayn plot curves runs/en-es --x minutes --out curves.png > "$OUT/curves.out" 2>&1
# `head` closing the pipe ends zcat with SIGPIPE, which pipefail would turn into the script's exit
{ zcat $D/test_v2020.en.gz || true; } | head -300 > test300.en
{ zcat $D/test_v2020.es.gz || true; } | head -300 > test300.es
aiayn evaluate --model runs/en-es --input test300.en --ref test300.es --report report.html > "$OUT/eval.out" 2>&1
aiayn translate --model runs/en-es --text "$TEXT" --nbest 3 > "$OUT/nbest.out" 2>&1
aiayn translate --model runs/en-es --text "$TEXT" --format jsonl --scores > "$OUT/scores.out" 2>&1
aiayn average runs/en-es --last 5 --out runs/en-es-avg > "$OUT/avg.out" 2>&1
aiayn export ctranslate2 --model runs/en-es-avg --out runs/en-es-ct2 > "$OUT/export.out" 2>&1
aiayn translate --model runs/en-es-ct2 --text "$TEXT" > "$OUT/ct2.out" 2>&1
aiayn serve --model runs/en-es-avg > "$OUT/serve.out" 2> "$OUT/serve.err" &
SERVER=$!
for _ in $(seq 120); do curl -s localhost:8000/health > /dev/null && break; sleep 1; done
curl -s localhost:8000/v1/translate -H 'Content-Type: application/json' \
    -d "{\"text\": [\"$TEXT\"], \"nbest\": 2}" > "$OUT/curl.out"
kill "$SERVER"; wait "$SERVER" || true
python3 - "$WORK" "$OUT" <<'PY'
import json, os, sys
work, out = sys.argv[1:]
results = json.load(open(os.path.join(work, "runs/en-es/results.json")))
results.pop("examples", None)
steps = {name[:-4]: open(os.path.join(out, name)).read() for name in sorted(os.listdir(out)) if name.endswith(".out")}
json.dump({"results": results, "steps": steps}, open(os.path.join(out, "tutorial_en_es.json"), "w"), indent=1)
PY
echo "wrote $OUT/tutorial_en_es.json"
