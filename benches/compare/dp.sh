#!/usr/bin/env bash
# Data-parallel MNIST on 1, 2 and 4 ranks: dygraph's examples/mnist_dp beside PyTorch DDP
# (gloo), both launched by mpirun with the same global batch of 64, interleaved so the
# ratios compare the same minutes. Needs OpenMPI and the peer venv of run.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
VENV=.venv-compare
STEPS="${STEPS:-300}"
MPIRUN=(mpirun --oversubscribe --allow-run-as-root)
# Mesa warns on every device open when this is unset.
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp}"
cargo build --release --locked --features mpi --example mnist_dp
"$VENV/bin/python" -c "import torch" 2>/dev/null || { echo "run benches/compare/run.sh first (it builds $VENV)" >&2; exit 1; }
for n in 1 2 4; do
  echo "== $n rank(s)"
  "${MPIRUN[@]}" -np "$n" target/release/examples/mnist_dp --steps "$STEPS" --checkpoint /tmp/mnist_dp_bench.safetensors \
    | grep -E "^trained|^all-reduced"
  (cd benches/compare && "${MPIRUN[@]}" -np "$n" "../../$VENV/bin/python" mnist_torch_ddp.py --steps "$STEPS" 2>&1 \
    | grep -v -i warn)
done
# The network fits one bucket; smaller buckets show how much all-reduce hides behind backward.
for n in 2 4; do
  echo "== $n ranks, 0.05 MiB buckets"
  "${MPIRUN[@]}" -np "$n" target/release/examples/mnist_dp --steps "$STEPS" --bucket-mb 0.05 \
    --checkpoint /tmp/mnist_dp_bench.safetensors | grep -E "^trained|^all-reduced"
done
