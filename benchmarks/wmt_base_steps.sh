#!/usr/bin/env bash
# The paper's base recipe (configs/wmt14_en_de_base.yaml) end to end on the synthetic WMT-shaped
# corpus of benchmarks/corpus_scale.py: prepare the token store, train 20 steps of the base model,
# checkpoint, resume to 30 steps from the store without re-encoding, average, evaluate.
#
#   benchmarks/wmt_base_steps.sh [PAIRS] [WORK]        (defaults: 300000, /tmp/aiayn_wmt_base)
#
# On a CPU the base model's 25,000-token batches take minutes a step, so the batch is cut to
# 2,000 tokens (BATCH_TOKENS) and validation/test decode 20 sentences; every other setting is
# the config's own (base preset, 37k joint BPE, noam warmup 4000, label smoothing 0.1).
# The log shows "found, not re-encoded" for the store on the resumed run.
set -euo pipefail
cd "$(dirname "$0")/.."
PAIRS=${1:-300000}
WORK=${2:-/tmp/aiayn_wmt_base}
PY=${PY:-.venv/bin/python}
AIAYN=${AIAYN:-.venv/bin/aiayn}
RUN=$WORK/run
mkdir -p "$WORK"
CORPUS=$("$PY" - "$WORK" "$PAIRS" <<'EOF'
import sys
from pathlib import Path
sys.path.insert(0, "benchmarks")
from corpus_scale import make_corpus
print(make_corpus(Path(sys.argv[1]), int(sys.argv[2]), 1_200_000))
EOF
)
SETS=(
  --set "data.train_src=$CORPUS/train.en" --set "data.train_tgt=$CORPUS/train.de"
  --set "data.valid_src=$CORPUS/valid.en" --set "data.valid_tgt=$CORPUS/valid.de"
  --set "data.test_src=$CORPUS/test.en" --set "data.test_tgt=$CORPUS/test.de"
  --set "data.cache_dir=$WORK/cache" --set "train.batch_tokens=${BATCH_TOKENS:-2000}"
  --set train.eval_every=10 --set train.log_every=1 --set train.progress=none
  --set train.bleu_max_sentences=20 --set train.test_max_sentences=20
)
time "$AIAYN" prepare configs/wmt14_en_de_base.yaml "${SETS[@]}"
time "$AIAYN" train configs/wmt14_en_de_base.yaml --out "$RUN" --overwrite "${SETS[@]}" --set train.max_steps=20
time "$AIAYN" train --resume "$RUN" --set train.max_steps=30
"$AIAYN" average "$RUN" --last 3 --out "$RUN/averaged"
head -n 20 "$CORPUS/test.en" > "$WORK/test20.en"
head -n 20 "$CORPUS/test.de" > "$WORK/test20.de"
"$AIAYN" evaluate --model "$RUN/averaged" --input "$WORK/test20.en" --ref "$WORK/test20.de" --max-len 20
