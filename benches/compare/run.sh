#!/usr/bin/env bash
# The MNIST workload of BENCHMARKS.md (seed 002's conv net, batch 64, Adam 1e-3, training
# steps only) in dygraph, PaddlePaddle and PyTorch on this machine. Installs the peers into a
# virtual environment with pip on first use (about 6 GB: PyPI's torch pulls its CUDA libraries).
#
#   bash benches/compare/run.sh            # 300 steps each
#   STEPS=937 bash benches/compare/run.sh  # a full epoch
set -euo pipefail
cd "$(dirname "$0")/../.."
VENV="${VENV:-.venv-compare}"
STEPS="${STEPS:-300}"
if ! "$VENV/bin/python" -c "import torch, paddle" 2>/dev/null; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check numpy paddlepaddle torch
fi
cargo build --release --example mnist
echo "== dygraph"
target/release/examples/mnist --place cpu --steps "$((STEPS + 10))" --checkpoint /tmp/compare-mnist.safetensors --plot /tmp/compare-mnist.png | grep -E "trained|acc is" | head -2
if target/release/examples/mnist --place gpu --steps 1 --checkpoint /tmp/compare-probe.safetensors --plot /tmp/compare-probe.png >/dev/null 2>&1; then
  target/release/examples/mnist --place gpu --steps "$((STEPS + 10))" --checkpoint /tmp/compare-mnist-gpu.safetensors --plot /tmp/compare-mnist-gpu.png | grep -E "trained|acc is" | head -2
fi
echo "== PaddlePaddle"
(cd benches/compare && "../../$VENV/bin/python" mnist_paddle.py --steps "$STEPS" 2>&1 | grep -v -i warn)
echo "== PyTorch"
(cd benches/compare && "../../$VENV/bin/python" mnist_torch.py --steps "$STEPS" 2>&1 | grep -v -i warn)
# The sequence examples against the same models in PyTorch (SEQ_STEPS steps each).
if [ "${SEQUENCE:-1}" = 1 ]; then
  SEQ_STEPS="${SEQ_STEPS:-200}"
  cargo build --release --example lstm_mnist --example vit_mnist
  for model in lstm vit; do
    echo "== ${model}_mnist: dygraph, then PyTorch"
    target/release/examples/${model}_mnist --place cpu --steps "$((SEQ_STEPS + 10))" | tail -1
    (cd benches/compare && "../../$VENV/bin/python" sequence_torch.py --model "$model" --steps "$SEQ_STEPS" 2>&1 | grep -v -i warn)
  done
fi
