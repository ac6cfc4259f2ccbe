#!/usr/bin/env bash
# Every test, on a fresh machine: finds or installs what the suite needs (Mesa's lavapipe so
# every WGSL kernel runs without a GPU, Chromium and its WebDriver, OpenMPI and libclang for
# the data-parallel tests, wasm-bindgen-cli at Cargo.lock's version, wasm-pack, the wasm32
# target, a Python venv with safetensors and numpy in the user cache directory), then runs the
# native suite (with the `mpi` feature) and the browser suite.
#
# Without a GPU adapter the GPU checks fail; DYGRAPH_TEST_SKIP=gpu (and =python for the
# safetensors interop check, comma-separated) skips them instead, printing each skip.
set -euo pipefail
cd "$(dirname "$0")"

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

# Debian/Ubuntu packages: lavapipe (a software Vulkan driver), Chromium and its WebDriver,
# OpenMPI (mpirun, and the headers rsmpi builds against) and libclang (rsmpi's bindgen).
if ! ls /usr/share/vulkan/icd.d/lvp_icd*.json >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1 \
  || ! command -v chromium >/dev/null 2>&1 || ! command -v mpirun >/dev/null 2>&1 \
  || ! command -v mpicc >/dev/null 2>&1 || ! ls /usr/lib/llvm-*/lib/libclang*.so* >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq mesa-vulkan-drivers libvulkan1 chromium chromium-driver \
      openmpi-bin libopenmpi-dev libclang-dev >/dev/null
  else
    echo "test.sh: no apt-get; install a Vulkan/Metal/DX12 driver (or Mesa's lavapipe), Chromium," \
      "chromedriver, an MPI (mpirun, mpicc) and libclang yourself" >&2
  fi
fi

# wasm-bindgen's test runner at exactly the wasm-bindgen version Cargo.lock pins (the CLI and
# the library must match; --locked would pin the CLI's own dependencies to ones that may not
# build here), and wasm-pack, which builds the page's module.
WASM_BINDGEN_VERSION="$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/version = |"/, ""); print; exit }' Cargo.lock)"
if ! wasm-bindgen --version 2>/dev/null | grep -qF " $WASM_BINDGEN_VERSION"; then
  cargo install -q wasm-bindgen-cli --version "$WASM_BINDGEN_VERSION"
fi
command -v wasm-pack >/dev/null 2>&1 || cargo install -q wasm-pack
rustup target add wasm32-unknown-unknown >/dev/null 2>&1 || true

# Python's safetensors + numpy, for the checkpoint interoperability test, in a venv in the user's
# cache directory (made once per machine, not per clone).
VENV="${XDG_CACHE_HOME:-$HOME/.cache}/dygraph/venv"
if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c "import safetensors, numpy" 2>/dev/null; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check safetensors numpy
fi
export DYGRAPH_PYTHON="${DYGRAPH_PYTHON:-$VENV/bin/python}"

# Mesa warns on every device open when this is unset.
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp}"
# The `mpi` feature adds `distributed` and its tests (mpirun at 2 and 4 ranks on loopback),
# which also run the `mnist_dp` example: it is the one example built as a program (the others
# are compiled into the test binaries that run them).
cargo build --release --locked --features mpi --example mnist_dp
cargo test --release --locked --features mpi --tests
cargo test --release --locked --features mpi --doc
# The sweep's GPU checks again with float16 through float32 (the path of devices without
# SHADER_F16; lavapipe has it, so the run above took the native float16 kernels).
DYGRAPH_NATIVE_FLOAT16=0 cargo test --release --locked --features mpi --test ops sweep::gpu_against_cpu
# Where there is a hardware GPU it is the default place; software adapters are not. The layers
# binary runs again with the GPU as the default place, as it would there: a layer left on the
# default place beside CPU data fails only then.
DYGRAPH_DEVICE=gpu cargo test --release --locked --features mpi --test layers
bash web/test.sh
