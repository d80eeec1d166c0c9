#!/usr/bin/env bash
# One GPU check (issue 59), at most 8 minutes on one GPU; every figure goes to one JSON file.
#
#   benchmarks/gpu_check.sh [OUT.json]       # default benchmarks/results/gpu_check_<gpu>.json
#
# 1. `small` and `base` at two batch sizes, fp32 eager against bf16 compiled: target tokens/s and
#    MFU against the device's peak for the dtype (benchmarks/gpu_check.py throughput);
# 2. 3 minutes of `auto` on Tatoeba en-es (configs/tatoeba_en_es.yaml, every setting auto, data
#    from tatoeba/en-es/ under the data root): the precision and batch it chose, test BLEU,
#    expected against reached updates, the validations' share (benchmarks/gpu_check.py auto).
#
# Every part can be shrunk to run anywhere (a test runs it on a CPU with tiny settings):
#   PRESETS="small base" BATCHES="3000 16000" STEPS=10 BACKEND=inductor MINUTES=3 PEAK_SIZE=2048 VOCAB=8000
#   CONFIG=configs/tatoeba_en_es.yaml AUTO_SET="" (more --set options for the auto run)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-python3}
WORK=${WORK:-/tmp/aiayn_gpu_check}
PRESETS=${PRESETS:-small base}
BATCHES=${BATCHES:-3000 16000}
STEPS=${STEPS:-10}
BACKEND=${BACKEND:-inductor}
MINUTES=${MINUTES:-3}
CONFIG=${CONFIG:-configs/tatoeba_en_es.yaml}
AUTO_SET=${AUTO_SET:-}
export PYTHONUNBUFFERED=1 AIAYN_CACHE=${AIAYN_CACHE:-$WORK/.cache}
mkdir -p "$WORK"
if [[ $# -ge 1 ]]; then
  out=$1
else
  gpu=$("$PY" -c "import torch; print(torch.cuda.get_device_name().split()[1].lower() \
if torch.cuda.is_available() else 'cpu')")  # "NVIDIA H100 80GB HBM3" -> h100
  out=benchmarks/results/gpu_check_$gpu.json
fi
rm -f "$out"
started=$(date +%s)
# shellcheck disable=SC2086  # the lists are word lists
timeout 200 "$PY" benchmarks/gpu_check.py throughput --out "$out" --presets $PRESETS --batch-tokens $BATCHES \
  --steps "$STEPS" --backend "$BACKEND" --peak-size "${PEAK_SIZE:-2048}" --vocab "${VOCAB:-8000}"
command="$PY -m aiayn train $CONFIG --out $WORK/auto --overwrite --set train.max_minutes=$MINUTES \
--set train.progress=plain $AUTO_SET"
# shellcheck disable=SC2086
timeout 270 $command > "$WORK/auto.log" 2>&1 || { tail -20 "$WORK/auto.log"; exit 1; }
grep -E "auto:|timed|updates:|compiled|eager|cap" "$WORK/auto.log" || true
"$PY" benchmarks/gpu_check.py auto "$WORK/auto" --out "$out" --command "$command"
echo "gpu_check: $(( $(date +%s) - started )) s"
