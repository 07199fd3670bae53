"""Runs one ONNX model under ONNX Runtime (CPU, 1 thread) on .npy inputs (float32 '<f4' or
int64 '<i8', one per graph input in order) and prints each output as JSON
[{"name", "dims", "data"}, ...]. A development aid for checking a model outside the zoo
against Kiln:

    python3 zoo/reference/run_ort.py MODEL.onnx a.npy [b.npy ...]

Needs onnxruntime (zoo/reference/requirements.txt), so run it with the pyenv `python3`,
not Debian's /usr/bin/python3. The JSON is what the former run_ort.mjs printed
(JSON.stringify): compact, numbers as JavaScript writes them (shortest round-trip, integral
values without '.0'), non-finite values as null, no trailing newline.
"""

import json
import math
import sys

import numpy as np
import onnxruntime as ort


def read_npy(path):
    a = np.load(path, allow_pickle=False)
    if a.dtype.str not in ("<f4", "<i8"):
        raise ValueError(f"{path}: dtype {a.dtype.str} not handled")
    return a


def js_number(x):
    """JSON.stringify of a JavaScript Number with value x (a Python float)."""
    if not math.isfinite(x):
        return "null"
    if x == 0:
        return "0"
    if x < 0:
        return "-" + js_number(-x)
    # Shortest round-trip digits s (no leading/trailing zeros) and n with x = 0.s * 10^n.
    mant, _, exp = repr(x).partition("e")
    whole, _, frac = mant.partition(".")
    digits = whole + frac
    n = len(whole) + (int(exp) if exp else 0)
    stripped = digits.lstrip("0")
    n -= len(digits) - len(stripped)
    s = stripped.rstrip("0")
    k = len(s)
    if k <= n <= 21:
        return s + "0" * (n - k)
    if 0 < n <= 21:
        return s[:n] + "." + s[n:]
    if -6 < n <= 0:
        return "0." + "0" * -n + s
    e = n - 1
    return (s if k == 1 else s[0] + "." + s[1:]) + "e" + ("+" if e >= 0 else "-") + str(abs(e))


def main():
    model, inputs = sys.argv[1], sys.argv[2:]
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    feeds = {i.name: read_npy(inputs[k]) for k, i in enumerate(session.get_inputs())}
    names = [o.name for o in session.get_outputs()]
    results = session.run(names, feeds)
    out = []
    for name, t in zip(names, results):
        data = ",".join(js_number(v) for v in np.asarray(t).ravel().astype(np.float64).tolist())
        dims = ",".join(str(d) for d in t.shape)
        out.append(f'{{"name":{json.dumps(name, ensure_ascii=False)},"dims":[{dims}],"data":[{data}]}}')
    sys.stdout.write("[" + ",".join(out) + "]")


if __name__ == "__main__":
    main()
