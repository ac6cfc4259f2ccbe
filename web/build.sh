#!/usr/bin/env bash
# Builds the demo page: the wasm module into web/pkg/ (wasm-pack) and the MNIST slice the
# "Train here" panel fetches into web/data/. Serve web/ with any static file server.
set -euo pipefail
cd "$(dirname "$0")/.."
wasm-pack build web --target web --release
python3 web/make_data.py "$@"
echo "built; serve it with: python3 -m http.server 8000 --bind 127.0.0.1 -d web"
