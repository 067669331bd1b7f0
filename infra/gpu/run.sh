#!/usr/bin/env bash
# On the GPU machine (the device tool runs it in the repository's copy): install the carried wheels, then
#   bash infra/gpu/run.sh bench    # lmforge bench gpu: nine variants, ~8 minutes on an H100 (VARIANTS='a b' for some;
#                                  # OBJECTIVE=causal: the Llama-style decoder, smollm_135m, its own section)
#   bash infra/gpu/run.sh transfer # lmforge bench transfer --gpu: pretrain, fine-tune, HF time to quality, ~9 minutes
#   bash infra/gpu/run.sh doctor   # lmforge doctor --gpu-run (make gpu-check): ~3 minutes
# Everything worth keeping goes to $OUT (the device tool brings back at most 8 files): the report section, gpu.json,
# the full report data and the logs as one archive.
set -uo pipefail
cd "$(dirname "$0")/../.."
what=${1:-bench}
OUT=${OUT:-runs/gpu-out}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
if [ -d .whl ] && [ -z "${SKIP_WHEELS:-}" ]; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || { echo "run.sh: installing the carried wheels failed"; exit 1; }
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH} LMFORGE_CARRIED="$(cd .whl && ls | tr '\n' ' ')"
fi
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | tee "$OUT/gpu.txt"
case "$what" in
  bench)
    "$PY" -m bench.train.gpu --corpus .carry/bench-gpu-corpus --work /tmp/bench-gpu --minutes "${MINUTES:-7.5}" \
      ${VARIANTS:+--variants $VARIANTS} ${OBJECTIVE:+--objective $OBJECTIVE} 2>&1 \
      | tee "$OUT/bench-gpu.log"
    rc=${PIPESTATUS[0]}
    cp docs/BENCHMARKS.md docs/benchmarks/gpu*.json /tmp/bench-gpu/report.json "$OUT/" 2>/dev/null
    tar czf "$OUT/bench-gpu-logs.tgz" -C /tmp/bench-gpu logs $(cd /tmp/bench-gpu && ls -d */profile/summary.json 2>/dev/null)
    ;;
  transfer)
    "$PY" -m bench.transfer.gpu --work /tmp/bench-transfer-gpu ${MINUTES:+--minutes $MINUTES} 2>&1 | tee "$OUT/transfer-gpu.log"
    rc=${PIPESTATUS[0]}
    cp docs/BENCHMARKS.md docs/benchmarks/transfer-on-one-gpu-does-pretraining-pay.json "$OUT/" 2>/dev/null
    tar czf "$OUT/transfer-gpu-logs.tgz" -C /tmp/bench-transfer-gpu logs transfer-gpu.json pretrain/metrics.json \
      pretrain/metrics.jsonl hf/result.json $(cd /tmp/bench-transfer-gpu && ls finetune/*/metrics.json 2>/dev/null)
    ;;
  doctor)
    "$PY" -m lmforge.cli doctor --gpu-run 2>&1 | tee "$OUT/doctor.log"
    rc=${PIPESTATUS[0]}
    cp runs/doctor/doctor.json runs/doctor/doctor.md "$OUT/" 2>/dev/null
    ;;
  *) echo "usage: run.sh bench|transfer|doctor"; exit 2 ;;
esac
exit "$rc"
