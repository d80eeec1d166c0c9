#!/usr/bin/env bash
# `auto` on a GPU, and fp32 against bf16 over whole runs there (issue 43): Tatoeba en-es.
#
#   benchmarks/tatoeba_gpu.sh auto [MINUTES]       # configs/tatoeba_en_es.yaml, every setting auto
#   benchmarks/tatoeba_gpu.sh precision [MINUTES]  # fp32, bf16, bf16 without cuDNN attention, auto
#
# `auto` records benchmarks/results/tatoeba_en_es_auto_<gpu>.json (as tatoeba_grid.sh records a
# run). `precision` trains the `small` model with every setting fixed (vocabulary 8000, batches of
# 3000 tokens, no validation before the end, no test set) once in each precision and prints the
# target tokens/s of each whole run, beside the rates `train.precision: auto` timed at start-up.
# "bf16 without cuDNN attention" turns off scaled_dot_product_attention's cuDNN backend
# (torch.backends.cuda.enable_cudnn_sdp(False)) through a sitecustomize.py on PYTHONPATH, so the
# other backends (flash, memory-efficient) serve bf16.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-python3}
WORK=${WORK:-/tmp/aiayn_gpu}
OUT=${OUT:-benchmarks/results}
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 AIAYN_CACHE=$WORK/.cache
mkdir -p "$WORK" "$OUT"
stage=${1:?usage: tatoeba_gpu.sh auto|precision [MINUTES]}
minutes=${2:-4}
case $stage in
auto)
  gpu=$("$PY" -c "import torch; print(torch.cuda.get_device_name().split()[1].lower() \
if torch.cuda.is_available() else 'cpu')")  # "NVIDIA H100 80GB HBM3" -> h100
  command="$PY -m aiayn train configs/tatoeba_en_es.yaml --out $WORK/en_es_auto --overwrite \
--set train.max_minutes=$minutes --set train.progress=none"
  $command > "$WORK/en_es_auto.log" 2>&1
  grep -E "auto:|timed|trained|held-out" "$WORK/en_es_auto.log"
  "$PY" benchmarks/tatoeba_summary.py record "$WORK/en_es_auto" "$OUT/tatoeba_en_es_auto_$gpu.json" \
    --command "$command" --label "name=en_es_auto_$gpu" > /dev/null
  ;;
precision)
  mkdir -p "$WORK/no_cudnn_attention"
  echo 'import torch; torch.backends.cuda.enable_cudnn_sdp(False)' \
    > "$WORK/no_cudnn_attention/sitecustomize.py"
  sed '/test_src\|test_tgt/d' configs/tatoeba_en_es.yaml > "$WORK/en_es_no_test.yaml"
  fixed=(--set model.preset=small --set data.vocab_size=8000 --set train.batch_tokens=3000
    --set model.dropout=0.3 --set train.warmup=300 --set train.eval_every=1000000
    --set train.bleu_max_sentences=200 --set train.progress=none --set train.max_minutes="$minutes")
  "$PY" -m aiayn prepare "$WORK/en_es_no_test.yaml" "${fixed[@]}" > /dev/null
  for run in fp32 bf16 bf16_no_cudnn_attention auto; do
    path=$PYTHONPATH
    [[ $run == *no_cudnn_attention ]] && path=$WORK/no_cudnn_attention:$PYTHONPATH
    PYTHONPATH=$path "$PY" -m aiayn train "$WORK/en_es_no_test.yaml" --out "$WORK/$run" --overwrite \
      "${fixed[@]}" --set train.precision="${run%_no_cudnn_attention}" > "$WORK/$run.log" 2>&1
    echo "$run: $(grep -E 'train.precision auto: fp32|trained .* steps' "$WORK/$run.log" | tr '\n' ' ')"
  done
  ;;
*) echo "tatoeba_gpu.sh: unknown stage '$stage' (auto or precision)" >&2; exit 2 ;;
esac
