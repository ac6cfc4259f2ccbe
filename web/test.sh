#!/usr/bin/env bash
# The browser tests, in headless Chromium:
#   1. wasm-bindgen-test: the GPU-against-CPU op checks (WebGPU vs the wasm CPU backend) and
#      every WGSL variant compiled by the browser;
#   2. the demo page end to end (playwright-core): draw digits, train, check on WebGPU; then on
#      the CPU fallback, with WebGPU offering no adapter and with navigator.gpu gone (there also
#      Stop). Screenshots and timings go to target/web-e2e/.
# Needs chromium + chromium-driver, wasm-bindgen-cli at Cargo.lock's wasm-bindgen version,
# wasm-pack, Node.js and python3; ../test.sh installs them.
set -euo pipefail
cd "$(dirname "$0")"

need() {
  command -v "$1" >/dev/null 2>&1 || { echo "web/test.sh: $1 not found; $2" >&2; exit 1; }
}
need chromedriver "install chromium and chromium-driver (apt-get install chromium chromium-driver)"
need wasm-bindgen-test-runner "install wasm-bindgen-cli at the wasm-bindgen version in Cargo.lock"
need wasm-pack "cargo install wasm-pack"
need node "install Node.js 18 or later"
need python3 "install Python 3"

export CHROMEDRIVER="${CHROMEDRIVER:-$(command -v chromedriver)}"
export CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner
export WASM_BINDGEN_TEST_TIMEOUT=600
# webdriver.json (read from this directory) gives Chromium its WebGPU flag. The shader test
# prints how many variants it compiled and how many (float16's, without `shader-f16`) it skipped.
cargo test --release --locked --target wasm32-unknown-unknown --lib --test browser
cargo test --release --locked --target wasm32-unknown-unknown --test shaders -- --nocapture

wasm-pack build --target web --release -- --locked
python3 make_data.py
[ -d e2e/node_modules/playwright-core ] || npm ci --prefix e2e --no-audit --no-fund
node e2e/e2e.mjs
