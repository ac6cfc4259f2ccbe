#!/usr/bin/env bash
# GPU benchmark: the same workloads in dygraph (eager, and static Programs run by an Executor)
# and, when a Python with torch is found (.venv-compare/bin/python, then python3), PyTorch
# (eager, and CUDA graphs when torch.cuda.is_available()), printed as one markdown table with
# the machine above it. Offline: nothing is downloaded or installed. Exits non-zero when a
# workload failed, the build failed or there is no usable GPU.
#
#   bash benches/gpu/run.sh            # sizes by adapter: reduced on software ones (lavapipe)
#   bash benches/gpu/run.sh --quick    # reduced sizes anywhere
#   bash benches/gpu/run.sh --full     # full sizes, even on a software adapter (slow)
#   bash benches/gpu/run.sh --repeats 9
#   DYGRAPH_PEAK_TFLOPS=51 bash benches/gpu/run.sh   # the card's float32 peak, if not in the table
#   DYGRAPH_BENCH_BIN=path/to/gpu bash benches/gpu/run.sh   # a bench executable built elsewhere
#                                  # (`cargo bench --bench gpu --no-run`), for machines without Rust
#
# Vulkan on a bare Debian/Ubuntu machine with an NVIDIA GPU (dygraph reaches the GPU through
# wgpu's Vulkan backend; the CUDA driver alone is not enough). Run as root or with sudo:
#
#   apt-get update && apt-get install -y libvulkan1 vulkan-tools   # the loader, vulkaninfo
#   nvidia-smi --query-gpu=driver_version --format=csv,noheader      # e.g. 550.90.07 -> 550
#   # the driver's Vulkan ICD, same major version as the kernel driver:
#   apt-get install -y libnvidia-gl-550            # Ubuntu (libnvidia-gl-550-server for -server drivers)
#   apt-get install -y nvidia-vulkan-icd           # Debian (non-free, with the nvidia-driver packages)
#   # in a container (NVIDIA Container Toolkit), start it with NVIDIA_DRIVER_CAPABILITIES=all
#   # (or compute,utility,graphics) so libGLX_nvidia.so.0 and nvidia_icd.json are mounted.
#   # If libGLX_nvidia.so.0 is there but no nvidia_icd.json is, write the ICD file by hand:
#   mkdir -p /usr/share/vulkan/icd.d
#   printf '%s\n' '{ "file_format_version": "1.0.0",' \
#     '  "ICD": { "library_path": "libGLX_nvidia.so.0", "api_version": "1.3.0" } }' \
#     > /usr/share/vulkan/icd.d/nvidia_icd.json
#   vulkaninfo --summary                           # must list the NVIDIA GPU
#
# Without a GPU, Mesa's software driver (lavapipe) runs everything on the CPU:
#   apt-get install -y libvulkan1 mesa-vulkan-drivers
set -uo pipefail
SELF="$(cd "$(dirname "$0")" && pwd)/$(basename "$0")"
cd "$(dirname "$0")/../.."
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp}"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

die() {
  echo "benches/gpu/run.sh: $*" >&2
  exit 1
}

vulkan_steps() {
  echo "Vulkan set-up on Debian/Ubuntu with an NVIDIA GPU (also at the top of benches/gpu/run.sh):" >&2
  sed -n '/^# Vulkan on a bare/,/^#   apt-get install -y libvulkan1 mesa/p' "$SELF" | sed 's/^# \{0,1\}/  /' >&2
}

if [ "$(uname -s)" = Linux ]; then
  loader=0
  if ldconfig -p 2>/dev/null | grep -q 'libvulkan\.so\.1'; then loader=1; fi
  for f in /usr/lib/*/libvulkan.so.1 /usr/lib64/libvulkan.so.1 /usr/lib/libvulkan.so.1; do
    [ -e "$f" ] && loader=1
  done
  icds=()
  for f in ${VK_DRIVER_FILES:-} ${VK_ICD_FILENAMES:-}; do
    for g in ${f//:/ }; do [ -e "$g" ] && icds+=("$g"); done
  done
  for d in /etc/vulkan/icd.d /usr/share/vulkan/icd.d /usr/local/share/vulkan/icd.d \
    "${XDG_DATA_HOME:-$HOME/.local/share}/vulkan/icd.d"; do
    for f in "$d"/*.json; do [ -e "$f" ] && icds+=("$f"); done
  done
  if [ "$loader" = 0 ] || [ "${#icds[@]}" = 0 ]; then
    [ "$loader" = 0 ] && echo "benches/gpu/run.sh: no Vulkan loader (libvulkan.so.1)" >&2
    [ "${#icds[@]}" = 0 ] && echo "benches/gpu/run.sh: no Vulkan ICD (driver) JSON in /etc/vulkan/icd.d, /usr/share/vulkan/icd.d, /usr/local/share/vulkan/icd.d or VK_DRIVER_FILES" >&2
    vulkan_steps
    exit 3
  fi
fi

if [ -n "${DYGRAPH_BENCH_BIN:-}" ]; then
  BIN="$DYGRAPH_BENCH_BIN"
  [ -x "$BIN" ] || die "DYGRAPH_BENCH_BIN=$BIN is not an executable"
else
  echo "building: cargo bench --bench gpu --locked --no-run" >&2
  cargo bench --bench gpu --locked --no-run 2>&1 | tee "$TMP/build.log" >&2 || die "the build failed"
  BIN="$(sed -n 's/^ *Executable .*(\(.*\))$/\1/p' "$TMP/build.log" | tail -1)"
  [ -x "$BIN" ] || die "cannot find the bench executable in cargo's output"
fi

INFO="$("$BIN" --info "$@" 2>"$TMP/info.err")"
rc=$?
if [ "$rc" = 2 ]; then # a bad argument
  cat "$TMP/info.err" >&2
  exit 2
elif [ "$rc" != 0 ]; then
  cat "$TMP/info.err" >&2
  echo "benches/gpu/run.sh: dygraph found no usable GPU adapter" >&2
  vulkan_steps
  exit 1
fi
if [[ "$INFO" == *"device type: Cpu"* ]] && command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1 \
  && [ "${DYGRAPH_ALLOW_SOFTWARE:-0}" != 1 ]; then
  echo "benches/gpu/run.sh: there is an NVIDIA GPU but Vulkan only offers a software adapter ($INFO):" >&2
  echo "the NVIDIA Vulkan ICD is missing (DYGRAPH_ALLOW_SOFTWARE=1 runs on the software adapter anyway)" >&2
  vulkan_steps
  exit 1
fi

cpu="$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -1)"
[ -n "$cpu" ] || cpu="$(sysctl -n machdep.cpu.brand_string 2>/dev/null || uname -m)"
echo "## dygraph GPU benchmark, $(date -u '+%Y-%m-%d %H:%M UTC')"
echo
echo "- GPU: $INFO"
if command -v nvidia-smi >/dev/null 2>&1; then
  echo "- nvidia-smi: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)"
fi
echo "- CPU: $cpu, $(getconf _NPROCESSORS_ONLN 2>/dev/null || echo '?') cores"
echo "- $(uname -sr), $(rustc --version 2>/dev/null), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD -- src 2>/dev/null || echo ' (src modified)')"
echo

"$BIN" --spec "$@" >"$TMP/spec.jsonl" || die "the workload list (--spec) failed"
PY=""
for p in .venv-compare/bin/python python3; do
  if command -v "$p" >/dev/null 2>&1 && "$p" -c "import torch" >/dev/null 2>&1; then
    PY="$p"
    break
  fi
done
torch_failed=0
if [ -n "$PY" ]; then
  echo "PyTorch: $PY benches/gpu/torch_bench.py" >&2
  # Bounded like the Rust side's watchdog: a hung CUDA call must not hold the machine.
  limit=()
  command -v timeout >/dev/null 2>&1 && limit=(timeout "${DYGRAPH_BENCH_TORCH_TIMEOUT_S:-1800}")
  "${limit[@]}" "$PY" benches/gpu/torch_bench.py "$TMP/spec.jsonl" >"$TMP/torch.jsonl" 2>"$TMP/torch.err"
  rc=$?
  if [ "$rc" != 0 ]; then
    torch_failed=1
    echo "benches/gpu/run.sh: torch_bench.py exited with $rc:" >&2
    tail -20 "$TMP/torch.err" >&2
  fi
  torch_args=(--torch "$TMP/torch.jsonl")
else
  torch_args=(--torch-missing "no Python with torch (tried .venv-compare/bin/python, python3)")
fi

"$BIN" "$@" "${torch_args[@]}"
rc=$?
[ "$rc" = 0 ] && [ "$torch_failed" = 0 ] || exit 1
