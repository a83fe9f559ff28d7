#!/usr/bin/env bash
# `pip install ./python` into a fresh virtual environment, as the README says,
# then the README's Python example with that environment's python and commrun
# (nothing from the build tree: no PYTHONPATH, no build/bin).
#   pip_install.sh <source dir> <work dir> <python> <transport>
# Exit 77 (skipped) when the package index cannot be reached: pip's build
# isolation fetches scikit-build-core and nanobind.
set -euo pipefail
src=$1 work=$2 python=$3 transport=$4
unset PYTHONPATH
rm -rf "$work/venv"
mkdir -p "$work"
"$python" -m venv "$work/venv"
pip=("$work/venv/bin/pip" --disable-pip-version-check)
if ! "${pip[@]}" index versions nanobind >/dev/null 2>&1; then
  echo "SKIPPED: the package index is unreachable, and pip's build isolation needs scikit-build-core and nanobind"
  exit 77
fi
# The NCCL plugin is left out to keep this short; ccache (when present) and a
# fixed build directory make repeated runs incremental.
settings=(-C cmake.define.COMM_WITH_NCCL=OFF -C "build-dir=$work/wheel-build")
if command -v ccache >/dev/null; then
  settings+=(-C cmake.define.CMAKE_CXX_COMPILER_LAUNCHER=ccache -C cmake.define.CMAKE_C_COMPILER_LAUNCHER=ccache)
fi
start=$SECONDS
"${pip[@]}" install -q "${settings[@]}" "$src/python" numpy
echo "pip install ./python numpy: $((SECONDS - start)) s"
"$work/venv/bin/python" -c "import comm, sys; print('installed comm', comm.__version__, 'at', comm.__file__)"
cmake -DREADME="$src/README.md" -DLANG=python -DWORK_DIR="$work" -DCOMMRUN="$work/venv/bin/commrun" \
      -DTRANSPORT="$transport" -DPYTHON="$work/venv/bin/python" \
      "-DEXPECT=rank 0: x\\[0\\] = 3.0, gathered \\[0, 1\\]@@rank 1: x\\[0\\] = 3.0, gathered \\[0, 1\\]" \
      -P "$src/tests/c/readme_example.cmake"
