#!/usr/bin/env bash
# Creates the virtualenv the ExecuTorch comparison runs in (default /work/venv-et) and puts
# the kiln package of an existing build into it, without rebuilding anything; copies that
# build's kiln and kiln_runner to VENV/kiln-build (the harness's --build).
#   bash bench/compare/setup_venv.sh [VENV] [BUILD_DIR]
# Never run by CI: ExecuTorch and torch 2.x stay out of the tests' interpreter.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
VENV="${1:-${KILN_COMPARE_VENV:-/work/venv-et}}"
BUILD="$(cd "${2:-${KILN_BUILD:-$ROOT/build}}" && pwd)"
BASE_PY="$(command -v python3)"   # pyenv's 3.11: ExecuTorch 1.5.1 ships cp311 wheels

if [ ! -x "$VENV/bin/python" ]; then
  "$BASE_PY" -m venv "$VENV"
fi
PY="$VENV/bin/python"
# Check first that nothing multi-GB would be fetched (a CUDA torch pulls nvidia-* wheels).
if ! "$PY" -c "import torch, executorch, onnxruntime, onnx, onnxscript, torchvision" 2>/dev/null; then
  "$PY" -m pip install -q --dry-run --report "$VENV/pip-report.json" -r "$HERE/requirements.txt"
  "$PY" - "$VENV/pip-report.json" <<'PYEOF'
import json, sys
names = [i["metadata"]["name"].lower() for i in json.load(open(sys.argv[1]))["install"]]
cuda = [n for n in names if n.startswith(("nvidia-", "triton"))]
if cuda:
    sys.exit(f"refusing: the resolver wants CUDA packages {cuda}; install the CPU torch first")
PYEOF
  "$PY" -m pip install -q -r "$HERE/requirements.txt"
fi

# kiln: the package's Python files from this tree and the two extensions of BUILD (the same
# files `pip install --no-build-isolation -Cbuild-dir=BUILD .` would copy, without letting
# scikit-build-core re-configure that build for another interpreter).
SITE="$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
for so in _kiln _kiln_export; do
  if ! ls "$BUILD"/$so.cpython-311-*.so >/dev/null 2>&1; then
    echo "no $so extension in $BUILD: configure it with -DKILN_PYTHON=ON (scripts/setup.sh does)" >&2
    exit 1
  fi
done
rm -rf "$SITE/kiln"
mkdir -p "$SITE/kiln"
cp "$ROOT"/python/kiln/*.py "$SITE/kiln/"
cp "$BUILD"/_kiln.cpython-311-*.so "$BUILD"/_kiln_export.cpython-311-*.so "$SITE/kiln/"
# The CLIs beside it, copied too: the harness reads one snapshot even if BUILD is rebuilt meanwhile.
mkdir -p "$VENV/kiln-build"
cp "$BUILD/kiln" "$BUILD/kiln_runner" "$VENV/kiln-build/"
SRC="$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$BUILD/CMakeCache.txt" 2>/dev/null || true)"
REV="$(git -C "${SRC:-$ROOT}" rev-parse --short HEAD 2>/dev/null || echo unknown)"
if [ -n "$(git -C "${SRC:-$ROOT}" status --porcelain --untracked-files=no 2>/dev/null)" ]; then REV="$REV (working tree modified)"; fi
(cd "$VENV/kiln-build" && md5sum kiln kiln_runner "$SITE"/kiln/_kiln*.so > SNAPSHOT && echo "source: ${SRC:-$ROOT} at $REV, built in $BUILD" >> SNAPSHOT)
"$PY" -c "import kiln, torch, executorch.version as v, onnxruntime; print('venv ready:', 'torch', torch.__version__, 'executorch', v.__version__, 'onnxruntime', onnxruntime.__version__)" 2>&1 | tail -1
