#!/usr/bin/env bash
# On the CPU machine, before a device call: what the GPU machine lacks, into folders git ignores and the device
# tool carries (infra/gpu/README.md): the Python wheels its image does not have (.whl/) and the bench's corpus,
# since the GPU image has no Apache Beam to run the corpus stage (.carry/bench-gpu-corpus; `prepare.sh transfer`:
# .carry/transfer-gpu for `lmforge bench transfer --gpu`). Safe to rerun.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-.venv/bin/python}
for d in /.whl/ /.carry/; do grep -qxF "$d" .git/info/exclude || echo "$d" >> .git/info/exclude; done
mkdir -p .whl .carry
# the image has torch 2.11 (Python 3.12), numpy, psutil, msgpack, ninja, einops, py-cpuinfo, tqdm, tokenizers 0.23,
# huggingface_hub, safetensors, pyarrow (device README's package list); not these:
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl \
  transformers==5.23.0 hjson==3.1.0 pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 \
  typing-inspection==0.4.5
# DeepSpeed is published as a source archive: a pure-Python wheel without its C++/CUDA ops (they JIT-build there)
ls .whl/deepspeed-0.19.8-*.whl >/dev/null 2>&1 || DS_BUILD_OPS=0 "$PY" -m pip wheel -q --no-deps -w .whl deepspeed==0.19.8
case "${1:-bench}" in
  bench)
    if [ ! -f .carry/bench-gpu-corpus/manifest.json ]; then
      .venv/bin/lmforge corpus --input samples/crawl --output .carry/bench-gpu-corpus --num-shards 2 --line-dedup
    fi ;;
  transfer)  # lmforge bench transfer --gpu: the transfer corpus (its data steps, ~8 minutes the first time), its
             # kept documents, tokenizer and the tasks' labelled files into .carry/transfer-gpu (~30 MB)
    .venv/bin/python - <<'PY'
from pathlib import Path
from bench.kit.steps import Steps
from bench.transfer.payoff import TransferBenchConfig, data_steps
cfg = TransferBenchConfig(rows=["lmforge", "lmforge_scratch", "tfidf_lr", "majority"])
data_steps(Steps("transfer", Path(cfg.work, "logs"), resume=True, keep_partial=True, append_logs=True), cfg)
PY
    .venv/bin/lmforge bench transfer --gpu --prepare ;;
  *) echo "usage: prepare.sh [bench|transfer]"; exit 2 ;;
esac
du -sh .whl .carry/*
