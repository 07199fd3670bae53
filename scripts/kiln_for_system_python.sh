#!/usr/bin/env bash
# Makes the kiln package of this machine's `python3` (pyenv's 3.11, where setup.sh installs it)
# importable from Debian's /usr/bin/python3 (3.11, with python3-torch 1.13 and torchvision
# 0.14 from apt) without pyenv's other packages: DIR gets a copy of the kiln package only.
# Putting pyenv's whole site-packages on PYTHONPATH instead shadows Debian's numpy and friends
# (import torchvision then aborts with std::system_error).
#   bash scripts/kiln_for_system_python.sh [DIR]     (default /opt/kiln-system-python)
#   PYTHONPATH=DIR /usr/bin/python3 -c "import kiln, torch"
set -euo pipefail
DIR="${1:-/opt/kiln-system-python}"
SRC="$(cd / && python3 -c 'import kiln, os; print(os.path.dirname(kiln.__file__))')"
mkdir -p "$DIR"
rm -rf "$DIR/kiln"
cp -r "$SRC" "$DIR/kiln"
rm -rf "$DIR/kiln/__pycache__"
echo "PYTHONPATH=$DIR /usr/bin/python3"
