#!/usr/bin/env bash
# Why Kiln binds with nanobind: build time and per-call overhead of the same one-function
# module (float32 array in, float out) with nanobind 2.4.0 and pybind11 (pinned), in one run.
#   bash bench/binding_choice/run.sh
set -euo pipefail
cd "$(dirname "$0")"
PY="$(command -v python3)"
"$PY" -m pip install -q "nanobind==2.4.0" "pybind11==3.1.0" >/dev/null 2>&1
out=$(mktemp -d)
cmake -S . -B "$out" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPython_EXECUTABLE="$PY" >/dev/null
t() { local s e; s=$(date +%s.%N); ninja -C "$out" -j1 "$1" >/dev/null; e=$(date +%s.%N); echo "$e - $s" | bc; }
echo "nanobind's own static library (built once per project, -j1): $(t nanobind-static) s"
echo "nb_mod, the module's own source (-j1): $(t nb_mod) s"
echo "pb_mod, the module's own source (-j1): $(t pb_mod) s"
PYTHONPATH="$out" "$PY" - <<'PYEOF'
import timeit, numpy as np, nb_mod, pb_mod
a = np.ones(1, np.float32)
for name, f in (("nanobind", nb_mod.first), ("pybind11", pb_mod.first)):
    n = 200000
    best = min(timeit.repeat(lambda: f(a), number=n, repeat=5)) / n * 1e9
    print(f"{name}: {best:.0f} ns per call (1-element float32 array in, float out)")
PYEOF
rm -rf "$out"
