"""ONNX Runtime references for the sweeps: they run under Debian's /usr/bin/python3 (torch
1.13), which has no onnxruntime, so reference/run_ort.py runs under a second interpreter."""

import json
import os
import shutil
import subprocess
import sys

import numpy as np

ZOO = os.path.dirname(os.path.abspath(__file__))


def ort_python(path):
    """The interpreter for reference/run_ort.py: `path`, $KILN_ORT_PYTHON or python3 on PATH."""
    path = path or os.environ.get("KILN_ORT_PYTHON") or shutil.which("python3")
    if not path or subprocess.run([path, "-c", "import onnxruntime"], capture_output=True).returncode:
        sys.exit(f"{path or 'python3'} cannot import onnxruntime: pass --ort-python (or set KILN_ORT_PYTHON) "
                 "naming an interpreter with zoo/reference/requirements.txt installed")
    return path


def ort_outputs(ort_py, onnx_path, inputs):
    """ONNX Runtime's outputs of `onnx_path` on the .npy files `inputs`, as float64 arrays."""
    run = subprocess.run([ort_py, os.path.join(ZOO, "reference", "run_ort.py"), onnx_path] + list(inputs),
                         capture_output=True, text=True, check=True)
    return [np.array(o["data"], dtype=np.float64).reshape(o["dims"]) for o in json.loads(run.stdout)]
