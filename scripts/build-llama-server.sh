#!/usr/bin/env bash
# Build llama.cpp's llama-server from the llama.cpp tree vendored in PyPI's llama-cpp-python sdist
# (the only route to llama.cpp's source from the package registries this project can reach).
# Cached under ~/.cache/poolconsole: a second run is a no-op. Prints the binary's path.
set -euo pipefail
VERSION="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
CACHE="${POOLCONSOLE_CACHE:-$HOME/.cache/poolconsole}"
ROOT="$CACHE/llama-cpp-$VERSION"
BIN="$ROOT/llama_cpp_python-$VERSION/vendor/llama.cpp/build/bin/llama-server"
if [[ -x "$BIN" ]]; then echo "$BIN"; exit 0; fi
PY="${PYTHON:-python3}"
mkdir -p "$ROOT" && cd "$ROOT"
if [[ ! -d "llama_cpp_python-$VERSION" ]]; then
  "$PY" -m pip download -q --no-deps --no-binary :all: -d dl "llama-cpp-python==$VERSION" >&2
  tar xzf "dl/llama_cpp_python-$VERSION.tar.gz"
fi
cd "llama_cpp_python-$VERSION/vendor/llama.cpp"
cmake -B build -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF \
  -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TOOLS=ON >&2
cmake --build build --target llama-server -j"$(nproc)" >&2
echo "$BIN"
