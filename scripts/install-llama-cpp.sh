#!/usr/bin/env bash
# Install llama-cpp-python (with its OpenAI-compatible server) into a virtualenv, built with CPU
# flags that run on this machine. The default -march=native build dies with "Illegal
# instruction" at the first prompt on some of these machines (the CPU advertises AMX it cannot
# run), and a fixed AVX-512 build dies at load on machines without AVX-512 (seen on AMD EPYC
# with AVX2 only). So we never build native: we list the SIMD extensions the CPU reports (never
# AMX), build our own wheel once, keep it in a cache folder named by version AND flags, and
# install only from there: pip can never pick up a wheel built with other flags.
#
# Usage: scripts/install-llama-cpp.sh VENV_PYTHON
set -euo pipefail
PY=${1:?usage: $0 VENV_PYTHON}
VERSION=0.3.36

cpu_flags=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || true)
has() { [[ " $cpu_flags " == *" $1 "* ]]; }
CMAKE_FLAGS="-DGGML_NATIVE=OFF"
for pair in avx:AVX avx2:AVX2 fma:FMA f16c:F16C avx512f:AVX512 avx512_vbmi:AVX512_VBMI \
            avx512_vnni:AVX512_VNNI avx512_bf16:AVX512_BF16; do
  if has "${pair%%:*}"; then CMAKE_FLAGS+=" -DGGML_${pair#*:}=ON"; else CMAKE_FLAGS+=" -DGGML_${pair#*:}=OFF"; fi
done
HASH=$(printf '%s' "$CMAKE_FLAGS" | sha256sum | cut -c1-12)
WHEELS="${BRANCHPOINT_WHEELS:-$HOME/.cache/branchpoint/wheels}/llama-cpp-python-$VERSION-$HASH"

if ! ls "$WHEELS"/llama_cpp_python-$VERSION-*.whl >/dev/null 2>&1; then
  echo "building llama-cpp-python $VERSION with $CMAKE_FLAGS"
  echo "(about 8-11 minutes on 2 cores; once per machine and set of CPU flags) ..."
  mkdir -p "$WHEELS"
  tmp=$(mktemp -d)
  CMAKE_ARGS="$CMAKE_FLAGS" FORCE_CMAKE=1 "$PY" -m pip wheel --no-deps --no-cache-dir \
    --no-binary llama-cpp-python -w "$tmp" "llama-cpp-python==$VERSION"
  mv "$tmp"/llama_cpp_python-*.whl "$WHEELS"/
  rm -rf "$tmp"
fi
# --force-reinstall: a llama-cpp-python of the same version built with other flags may be there.
"$PY" -m pip install -q --force-reinstall --no-deps "$WHEELS"/llama_cpp_python-$VERSION-*.whl
"$PY" -m pip install -q --find-links "$WHEELS" --only-binary llama-cpp-python \
  "llama-cpp-python[server]==$VERSION"
"$PY" -c "import llama_cpp, uvicorn; print('llama-cpp-python', llama_cpp.__version__, 'ready')"
