#!/usr/bin/env bash
# Install llama-cpp-python (with its OpenAI-compatible server) into a virtualenv, built with CPU
# flags that run on these machines. The default -march=native build dies with "Illegal
# instruction" at the first prompt (the CPU advertises AMX it cannot run), so we build our own
# wheel once, keep it in a cache folder named by version AND flags, and install only from there:
# pip can never pick up a wheel built with other flags.
#
# Usage: scripts/install-llama-cpp.sh VENV_PYTHON
set -euo pipefail
PY=${1:?usage: $0 VENV_PYTHON}
VERSION=0.3.36
CMAKE_FLAGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_VNNI=ON -DGGML_AVX512_BF16=ON"
HASH=$(printf '%s' "$CMAKE_FLAGS" | sha256sum | cut -c1-12)
WHEELS="${BRANCHPOINT_WHEELS:-$HOME/.cache/branchpoint/wheels}/llama-cpp-python-$VERSION-$HASH"

if ! ls "$WHEELS"/llama_cpp_python-$VERSION-*.whl >/dev/null 2>&1; then
  echo "building llama-cpp-python $VERSION (about 11 minutes on 2 cores; once per machine) ..."
  mkdir -p "$WHEELS"
  tmp=$(mktemp -d)
  CMAKE_ARGS="$CMAKE_FLAGS" FORCE_CMAKE=1 "$PY" -m pip wheel --no-deps --no-cache-dir \
    --no-binary llama-cpp-python -w "$tmp" "llama-cpp-python==$VERSION"
  mv "$tmp"/llama_cpp_python-*.whl "$WHEELS"/
  rm -rf "$tmp"
fi
"$PY" -m pip install -q --find-links "$WHEELS" --only-binary llama-cpp-python \
  "llama-cpp-python[server]==$VERSION"
"$PY" -c "import llama_cpp, uvicorn; print('llama-cpp-python', llama_cpp.__version__, 'ready')"
