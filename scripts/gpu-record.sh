#!/usr/bin/env bash
# On a real GPU node: record the GPU path's outputs that docs/gpu.md and the parser tests need, into
# one directory (default build/gpu-record). Run it through `make gpu-record` (which builds what it uses).
#   nvidia-smi -q and the link query, the node type (from-host, its topology saved), mpibind's mapping,
#   then the GPU health check and FWQ on `--system local:gpu` (ReFrame's report and output dirs).
# Exit status: ReFrame's (run.py's); everything recorded up to a failure stays in the directory.
set -uo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
OUT=${GPU_RECORD:-$REPO/build/gpu-record}
PY=$REPO/.venv/bin/python
CUDA_HOME=${CUDA_HOME:-$REPO/build/cuda-toolchain/nvidia/cu13}
export CUDA_HOME

if ! command -v nvidia-smi >/dev/null; then
  echo "gpu-record: nvidia-smi not found: run this on a GPU node with NVIDIA's driver" >&2
  exit 2
fi
mkdir -p "$OUT"
echo "gpu-record: writing $OUT"
{
  echo "date: $(date -u +%FT%TZ)"; echo "host: $(hostname)"; echo "kernel: $(uname -r)"
  echo "os: $(. /etc/os-release && echo "$PRETTY_NAME")"
  echo "CUDA_HOME: $CUDA_HOME"; "$CUDA_HOME/bin/nvcc" --version 2>&1 | tail -n 2
  echo "lstopo: $(command -v lstopo-no-graphics || echo none)"
} > "$OUT/node.txt"
nvidia-smi -q > "$OUT/nvidia-smi-q.txt" 2>&1
nvidia-smi --query-gpu=index,name,pci.bus_id,uuid,memory.total,pcie.link.gen.max,pcie.link.width.max \
  --format=csv,noheader > "$OUT/nvidia-smi-gpus.csv" 2>&1
ngpus=$(grep -c . "$OUT/nvidia-smi-gpus.csv" || true)

"$REPO/.venv/bin/stackproof" nodetype from-host --name gpunode --save-xml "$OUT/node.xml" \
  -o "$OUT/nodetype.yaml" 2> "$OUT/nodetype.log" || { cat "$OUT/nodetype.log" >&2; exit 1; }
"$REPO/build/mpibind/bin/mpibind" --topology "$OUT/node.xml" --ntasks "$(( ngpus > 0 ? ngpus : 1 ))" --env \
  > "$OUT/mpibind.txt" 2>&1 || echo "gpu-record: mpibind failed (see $OUT/mpibind.txt)" >&2

STACKPROOF_LOCAL_NODETYPE="$OUT/nodetype.yaml" STACKPROOF_RFM_PREFIX="$OUT/rfm" \
STACKPROOF_RESULTS_DB="$OUT/rfm/results.db" \
  "$PY" "$REPO/reframe-tests/run.py" --system local:gpu --stack commodity -- \
  -n "${GPU_RECORD_CHECKS:-^(GPUHealth|FWQNoise)}" --report-file "$OUT/reframe-report.json" 2>&1 | tee "$OUT/reframe.log"
rc=${PIPESTATUS[0]}
echo "gpu-record: done (run.py exit $rc). Outputs: $OUT (each case's rfm_job.out: rfm/output/local/gpu/commodity/<case>/ when it passed, rfm/stage/... when it failed)"
exit "$rc"
