#!/usr/bin/env bash
# JoeyNMT 2.3 beside aiayn on Tatoeba en-es: MINUTES (30) of training each, one thread each, side
# by side (JoeyNMT on core 1, aiayn `auto` at fp32 on core 0), test BLEU (sacreBLEU, cased, 13a)
# and chrF of both on Tatoeba-Challenge test_v2020, scored by the same sacreBLEU.
#
#   benchmarks/peers/joeynmt.sh setup    # JoeyNMT's own virtual environment (pip only)
#   benchmarks/peers/joeynmt.sh probe    # data, BPE, the timed probe only: the updates it would run
#   benchmarks/peers/joeynmt.sh run      # data, BPE, a timed probe, both trainings, the scores
#   benchmarks/peers/joeynmt.sh test CORE  # one more test-decoding worker (run starts two)
#   benchmarks/peers/joeynmt.sh score    # the scores, once every test chunk is decoded
# (TRAIN_LINES=N: the first N training pairs only, for a quick check of the setup.)
#
# setup: a venv at JOEY_VENV (default ../peers/joeynmt-venv, outside the repository); torch comes
# first, from the local CPU wheel pinned in constraints.txt (so no install pulls PyPI's multi-GB
# CUDA build), then joeynmt==2.3.0 under the same constraints.
#
# The recipe is JoeyNMT's IWSLT14 de-en Transformer (configs/iwslt14_deen_bpe.yaml at its v2.3
# tag: 6+6 pre-LN layers, d_model 256, 4 heads, ff 1024, dropout 0.3, AdamW (0.9, 0.999) at 3e-4,
# label smoothing 0.1, 4096-token batches, joint subword-nmt BPE, tied embeddings, beam 5 with
# alpha 1.0), scaled to the budget, since JoeyNMT has no wall-clock stop and the recipe assumes
# far more updates:
# - the same vocabulary size as aiayn's `auto` (VOCAB, default 8000: what it picks for en-es):
#   VOCAB merges learned on both sides (as its get_iwslt14_bpe.sh does), a joint vocabulary file of
#   the VOCAB - 4 most frequent BPE tokens (so the embeddings can be tied), voc_limit the same;
# - `updates` from a timed probe of its own speed here (PROBE_UPDATES updates, seconds per update
#   from its log's timestamps after the first 20, then one greedy validation on the 2,000-pair dev
#   set, timed by its log): the budget less four validations, each taken at three times the
#   probe's (whose untrained model stops after a word), over the seconds per update, rounded so
#   that the last of the four validations falls on the last update (JoeyNMT keeps the checkpoint
#   its validations choose); the learning rate warms up over 6% of the updates to the recipe's
#   3e-4, then decays as the inverse square root (its `warmupinversesquareroot`): JoeyNMT 2.3's
#   schedules with a warmup all decay after it (and its `warmupexponentialdecay` cannot be built
#   in 2.3.0, whose builder omits the optimizer), where the recipe's plateau schedule, without a
#   warmup, would hold 3e-4 through so few validations;
# - outputs up to 1.5 x the batch's longest source (JoeyNMT's default, max_output_length -1), where
#   the recipe allows 100 tokens: a model this short of training repeats itself up to the limit,
#   and at 100 tokens one validation on one thread outlasted eight minutes;
# - cased (the recipe lowercases, and the test is cased BLEU), fp32, CPU (use_cuda false).
set -euo pipefail
cd "$(dirname "$0")/../.."
MODE=${1:-run}
MINUTES=${MINUTES:-30}
VOCAB=${VOCAB:-8000}
CHUNKS=${CHUNKS:-20}  # test decoding in chunks, claimed by workers one core each
BATCH=${JOEY_BATCH:-4096}
PROBE_UPDATES=${PROBE_UPDATES:-80}  # a multiple of 10, the probe's logging_freq
VENV=${JOEY_VENV:-../peers/joeynmt-venv}
WORK=${JOEY_WORK:-benchmarks/runs/joeynmt_en_es}
OUT=${OUT:-benchmarks/results}
AIAYN=${AIAYN:-.venv/bin/aiayn}
PY=${PY:-.venv/bin/python}
DATA=${AIAYN_DATA_DIR:-../shared/data}/tatoeba/en-es
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}

setup() {
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -c constraints.txt torch==2.13.0
  # joeynmt 2.3.0 imports importlib_metadata without declaring it
  "$VENV/bin/pip" install -c constraints.txt joeynmt==2.3.0 importlib-metadata
  "$VENV/bin/python" -c "import joeynmt, torch; print('joeynmt', joeynmt.__version__, 'torch', torch.__version__)"
}

joey_config() {  # NAME UPDATES WARMUP VALIDATION_FREQ LOGGING_FREQ: a JoeyNMT config on stdout
  "$PY" - "$WORK" "$@" "$VOCAB" "$BATCH" <<'PYEOF'
import sys
import yaml
work, name, updates, warmup, validation, logging, vocab, batch = sys.argv[1:]
side = lambda lang: {
    "lang": lang, "max_length": 62, "lowercase": False, "normalize": False, "level": "bpe",
    "voc_limit": int(vocab) - 4, "voc_min_freq": 1, "voc_file": f"{work}/vocab.txt",
    "tokenizer_type": "subword-nmt",
    "tokenizer_cfg": {"num_merges": int(vocab), "codes": f"{work}/bpe.codes", "pretokenizer": "none"},
}
layers = lambda: {
    "type": "transformer", "num_layers": 6, "num_heads": 4,
    "embeddings": {"embedding_dim": 256, "scale": True, "dropout": 0.0},
    "hidden_size": 256, "ff_size": 1024, "dropout": 0.3, "layer_norm": "pre", "activation": "relu",
}
config = {
    "name": name, "joeynmt_version": "2.3.0", "model_dir": f"{work}/{name}", "use_cuda": False,
    "fp16": False, "random_seed": 42,
    "data": {
        "train": f"{work}/data/train", "dev": f"{work}/data/dev", "test": f"{work}/data/test",
        "dataset_type": "plain", "src": side("en"), "trg": side("es"),
        "special_symbols": {"unk_token": "<unk>", "unk_id": 0, "pad_token": "<pad>", "pad_id": 1,
                            "bos_token": "<s>", "bos_id": 2, "eos_token": "</s>", "eos_id": 3},
    },
    "testing": {"n_best": 1, "beam_size": 5, "beam_alpha": 1.0, "batch_size": 1024, "batch_type": "token",
                "max_output_length": -1, "eval_metrics": ["bleu"],
                "sacrebleu_cfg": {"tokenize": "13a", "lowercase": False}},
    "training": {
        "optimizer": "adamw", "normalization": "tokens", "adam_betas": [0.9, 0.999],
        "scheduling": "warmupinversesquareroot", "learning_rate_warmup": int(warmup),
        "learning_rate": 0.0003, "learning_rate_peak": 0.0003, "learning_rate_min": 1e-8,
        "weight_decay": 0.0, "label_smoothing": 0.1, "loss": "crossentropy",
        "batch_size": int(batch), "batch_type": "token", "early_stopping_metric": "bleu",
        "epochs": 1000, "updates": int(updates), "validation_freq": int(validation),
        "logging_freq": int(logging), "overwrite": True, "shuffle": True, "keep_best_ckpts": 1,
        "print_valid_sents": [0, 1],
    },
    "model": {
        "initializer": "xavier_uniform", "embed_initializer": "xavier_uniform", "embed_init_gain": 1.0,
        "init_gain": 1.0, "bias_initializer": "zeros", "tied_embeddings": True, "tied_softmax": True,
        "encoder": layers(), "decoder": layers(),
    },
}
print(yaml.safe_dump(config, sort_keys=False))
PYEOF
}

joey() {  # CORE ARGS...: JoeyNMT on one core, one thread
  OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 taskset -c "$1" "$VENV/bin/python" -m joeynmt "${@:2}"
}

prepare_and_probe() {  # sets UPDATES WARMUP VALIDATION PER_UPDATE PER_VALIDATION
  mkdir -p "$WORK/data" "$OUT"
  if [[ -f $WORK/probe/train.log && -f $WORK/vocab.txt ]]; then
    echo "kept: the data, BPE and probe in $WORK (delete $WORK/probe to probe again)"
  else
    prepare_data
    # The probe: seconds per update of this recipe on one thread, from the log's timestamps.
    joey_config probe "$PROBE_UPDATES" 10 "$PROBE_UPDATES" 10 > "$WORK/probe.yaml"
    joey 1 train "$WORK/probe.yaml" --skip-test > "$WORK/probe.out" 2>&1
  fi
  size_from_probe
  joey_config joeynmt "$UPDATES" "$WARMUP" "$VALIDATION" 1 > "$WORK/joeynmt.yaml"
}

prepare_data() {  # the training, dev and test text, the joint BPE and its vocabulary
  for LANG_ in en es; do
    gunzip -c "$DATA/train.$LANG_.gz" | sed -n "1,${TRAIN_LINES:-\$}p" > "$WORK/data/train.$LANG_"
    gunzip -c "$DATA/valid.$LANG_.gz" > "$WORK/data/dev.$LANG_"
    gunzip -c "$DATA/test_v2020.$LANG_.gz" > "$WORK/data/test.$LANG_"
  done
  cat "$WORK/data/train.en" "$WORK/data/train.es" \
    | "$VENV/bin/python" -m subword_nmt.learn_bpe -s "$VOCAB" -o "$WORK/bpe.codes"
  "$VENV/bin/python" - "$WORK" "$VOCAB" <<'PYEOF'
import collections, sys
from subword_nmt.apply_bpe import BPE
work, vocab = sys.argv[1], int(sys.argv[2])
with open(f"{work}/bpe.codes", encoding="utf-8") as codes:
    bpe = BPE(codes, separator="@@")
counts = collections.Counter()
for lang in ("en", "es"):
    with open(f"{work}/data/train.{lang}", encoding="utf-8") as lines:
        for line in lines:
            counts.update(bpe.process_line(line.strip()).split())
tokens = [token for token, _ in counts.most_common(vocab - 4)]
open(f"{work}/vocab.txt", "w", encoding="utf-8").write("".join(t + "\n" for t in tokens))
print(f"joint vocabulary: {len(tokens)} BPE tokens + 4 special")
PYEOF
}

size_from_probe() {  # UPDATES WARMUP VALIDATION PER_UPDATE PER_VALIDATION from the probe's log
  read -r UPDATES WARMUP VALIDATION PER_UPDATE PER_VALIDATION < <("$PY" - "$WORK/probe/train.log" "$MINUTES" <<'PYEOF'
import re, sys
from datetime import datetime
log = open(sys.argv[1]).read()
steps = [(datetime.strptime(m[1], "%Y-%m-%d %H:%M:%S,%f"), int(m[2])) for m in re.finditer(
    r"^(\S+ \S+) - INFO - joeynmt.training - Epoch +\d+, Step: +(\d+),", log, re.M)]
steps = [(t, s) for t, s in steps if s >= 20]
per_update = (steps[-1][0] - steps[0][0]).total_seconds() / (steps[-1][1] - steps[0][1])
# a validation: its greedy generation plus its scoring, as its log times them
per_validation = (float(re.findall(r"Generation took ([\d.]+)\[sec\]", log)[-1])
                  + float(re.findall(r"Evaluation result \(greedy\).*, ([\d.]+)\[sec\]", log)[-1]))
budget = 60 * float(sys.argv[2])
# The probe's model stops after a word or two; a trained one writes whole sentences, so a later
# validation is taken to cost three times the probe's. Four validations, the last on the last update.
validations, cost = 4, 3 * per_validation
every = int((budget - validations * cost) / per_update / validations)
updates = every * validations
print(updates, max(1, round(0.06 * updates)), every, f"{per_update:.3f}", f"{per_validation:.1f}")
PYEOF
)
  echo "probe: $PER_UPDATE s per update, $PER_VALIDATION s per validation -> updates $UPDATES," \
    "warmup $WARMUP, validation every $VALIDATION"
}

run() {
  prepare_and_probe

  local start joey_pid aiayn_pid
  start=$(date +%s)
  (joey 1 train "$WORK/joeynmt.yaml" --skip-test > "$WORK/joeynmt.out" 2>&1; echo $(( $(date +%s) - start )) \
    > "$WORK/joeynmt.seconds") & joey_pid=$!
  local aiayn_command="$AIAYN train configs/tatoeba_en_es.yaml --out $WORK/aiayn --set train.max_minutes=$MINUTES \
--set train.threads=1 --set train.precision=fp32 --set train.progress=none"
  # shellcheck disable=SC2086
  taskset -c 0 $aiayn_command --overwrite > "$WORK/aiayn.out" 2>&1 & aiayn_pid=$!
  wait "$joey_pid"; wait "$aiayn_pid"
  echo "$aiayn_command" > "$WORK/aiayn.command"
  test_worker 0 & local first=$!
  test_worker 1 & local second=$!
  wait "$first"; wait "$second"
  score
}

split_test() {  # the test set in CHUNKS files of whole lines, once (two workers may race here)
  [[ -f $WORK/chunks/split.done ]] && return
  local tmp="$WORK/chunks.$BASHPID" lines
  mkdir -p "$tmp"
  lines=$(wc -l < "$WORK/data/test.en")
  for LANG_ in en es; do
    split -d -a 2 -l $(( (lines + CHUNKS - 1) / CHUNKS )) "$WORK/data/test.$LANG_" "$tmp/part"
    for f in "$tmp"/part[0-9][0-9]; do mv "$f" "${f/part/test}.$LANG_"; done
  done
  touch "$tmp/split.done"
  mv -T "$tmp" "$WORK/chunks" 2> /dev/null || rm -r "$tmp"  # the first to finish wins
}

test_worker() {  # CORE: decode the test chunks no other worker has claimed (a worker may join late)
  split_test
  local chunk name
  for chunk in "$WORK"/chunks/test[0-9][0-9].en; do
    name=$(basename "$chunk" .en)
    [[ -f $WORK/chunks/$name.hyp.test ]] && continue
    if ! mkdir "$WORK/chunks/$name.claimed" 2> /dev/null; then  # mkdir is the atomic claim
      # a claim whose worker is gone (an interrupted call) is taken over
      local owner
      owner=$(cat "$WORK/chunks/$name.claimed/pid" 2> /dev/null || echo "")
      if [[ -n $owner ]] && kill -0 "$owner" 2> /dev/null; then continue; fi
      if [[ -z $owner && -z $(find "$WORK/chunks/$name.claimed" -maxdepth 0 -mmin +1) ]]; then continue; fi
      rm -r "$WORK/chunks/$name.claimed"
      mkdir "$WORK/chunks/$name.claimed" 2> /dev/null || continue
    fi
    echo "$BASHPID" > "$WORK/chunks/$name.claimed/pid"
    # the trained model on this chunk only (no dev set, so `test` decodes the chunk alone)
    "$PY" - "$WORK/joeynmt.yaml" "$WORK/chunks/$name" > "$WORK/chunks/$name.yaml" <<'PYEOF'
import sys
import yaml
config = yaml.safe_load(open(sys.argv[1]))
config["data"].pop("dev")
config["data"]["test"] = sys.argv[2]
print(yaml.safe_dump(config, sort_keys=False))
PYEOF
    joey "$1" test "$WORK/chunks/$name.yaml" -o "$WORK/chunks/$name.hyp" > "$WORK/chunks/$name.out" 2>&1
    echo "$(date -u +%H:%M:%S) core $1: $name decoded"
  done
}

score() {  # both systems' test BLEU and chrF, once every chunk is decoded
  local aiayn_command
  aiayn_command=$(cat "$WORK/aiayn.command")
  cat "$WORK"/chunks/test[0-9][0-9].hyp.test > "$WORK/joeynmt.hyp"
  "$PY" benchmarks/tatoeba_summary.py record "$WORK/aiayn" "$OUT/tatoeba_en_es_aiayn_fp32.json" \
    --command "taskset -c 0 $aiayn_command" --label name=aiayn_fp32 > /dev/null
  size_from_probe > /dev/null
  "$PY" - "$WORK" "$OUT" "$UPDATES" "$WARMUP" "$PER_UPDATE" "$PER_VALIDATION" "$VALIDATION" <<'PYEOF'
import json, re, statistics, sys
from pathlib import Path
from sacrebleu.metrics import BLEU, CHRF
from aiayn.training.run import cpu_model
from aiayn.core.files import atomic_write_text
work, out, updates, warmup, per_update, per_validation, validation = Path(sys.argv[1]), Path(sys.argv[2]), *sys.argv[3:]
hyps = (work / "joeynmt.hyp").read_text(encoding="utf-8").splitlines()
refs = (work / "data" / "test.es").read_text(encoding="utf-8").splitlines()
if len(hyps) != len(refs):
    sys.exit(f"{work / 'joeynmt.hyp'}: {len(hyps)} lines for {len(refs)} references")
bleu_metric, chrf_metric = BLEU(), CHRF()  # sacreBLEU's defaults: cased, 13a
bleu = bleu_metric.corpus_score(hyps, [refs])
chrf = chrf_metric.corpus_score(hyps, [refs])
aiayn = json.loads((out / "tatoeba_en_es_aiayn_fp32.json").read_text())
figures = {
    "joeynmt": {"bleu": bleu.score, "chrf": chrf.score, "signature": str(bleu_metric.get_signature()),
                "updates": int(updates), "warmup": int(warmup), "validation_every": int(validation),
                "probe_seconds_per_update": float(per_update), "probe_seconds_per_validation": float(per_validation),
                "wall_seconds": int((work / "joeynmt.seconds").read_text()), "config": str(work / "joeynmt.yaml"),
                "target_tokens_per_second": statistics.mean(float(rate) for rate in re.findall(
                    r"Tokens per Sec: +(\d+)", (work / "joeynmt" / "train.log").read_text())),
                "test_chunks": len(list((work / "chunks").glob("test[0-9][0-9].hyp.test")))},
    "aiayn": {key: aiayn[key] for key in ("bleu", "chrf", "signature", "settings", "auto_settings", "steps",
                                          "train_minutes", "precision", "command")},
    "bleu_ratio_aiayn_to_joeynmt": aiayn["bleu"] / max(bleu.score, 1e-9),
    "cpu_model": cpu_model(), "test": "Tatoeba-Challenge test_v2020 en-es (10,000 sentences)",
}
atomic_write_text(out / "tatoeba_en_es_joeynmt.json", json.dumps(figures, indent=2, ensure_ascii=False) + "\n")
print(json.dumps(figures, indent=2, ensure_ascii=False))
PYEOF
}

case $MODE in
  setup) setup ;;
  probe) prepare_and_probe ;;
  run) run ;;
  test) test_worker "${2:?test CORE}" ;;
  score) score ;;
  *) echo "usage: benchmarks/peers/joeynmt.sh setup|probe|run|test CORE|score" >&2; exit 2 ;;
esac
