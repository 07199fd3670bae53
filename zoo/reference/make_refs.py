"""Reference outputs for the Kiln model zoo, computed by ONNX Runtime (CPU, 1 thread).

    python3 -m pip install -r zoo/reference/requirements.txt   # onnxruntime 1.31.1, numpy
    python3 zoo/reference/make_refs.py [MODEL ...]

Reads ../manifest.json (written by zoo/make_zoo.py), and for every model and case makes
deterministic inputs (seeded PRNG), runs ONNX Runtime and writes
zoo/cases/<model>/<case>/input_<i>.npy and output_<i>.npy (npy format 1.0, C order,
float32 '<f4' / int64 '<i8'). Optional arguments: model names to restrict to.

The inputs are bit-for-bit those of the former Node tool (make_refs.mjs): mulberry32 seeded
by the FNV-1a hash of "model/case", Box-Muller in double precision rounded to float32.
Use an interpreter that has onnxruntime (the pyenv `python3`, not Debian's /usr/bin/python3).
"""

import json
import math
import os
import shutil
import struct
import sys
import time

import numpy as np
import onnxruntime as ort

HERE = os.path.dirname(os.path.abspath(__file__))
ZOO = os.path.dirname(HERE)

U32 = 0xFFFFFFFF

# ---- Math.log and Math.cos as JavaScript computes them -----------------------------------
# V8 (Node 20) computes Math.log and Math.cos with fdlibm. The platform libm behind math.log
# and math.cos (glibc here) differs in the last bit for about 5% of the draws below, which
# could, rarely, flip a float32 rounding, and varies between platforms. These pure-Python
# ports of fdlibm's double arithmetic give V8's bits on any platform. Only the domains
# Box-Muller needs are covered: log on (0, 1], cos on [0, 2*pi).

_D = struct.Struct("<d")
_Q = struct.Struct("<Q")


def _hi(x):
    return _Q.unpack(_D.pack(x))[0] >> 32


def _set_hi(x, hi):
    return _D.unpack(_Q.pack((hi << 32) | (_Q.unpack(_D.pack(x))[0] & 0xFFFFFFFF)))[0]


def _from_words(hi, lo):
    return _D.unpack(_Q.pack((hi << 32) | lo))[0]


_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10
_LG1 = 6.666666666666735130e-01
_LG2 = 3.999999999940941908e-01
_LG3 = 2.857142874366239149e-01
_LG4 = 2.222219843214978396e-01
_LG5 = 1.818357216161805012e-01
_LG6 = 1.531383769920937332e-01
_LG7 = 1.479819860511658591e-01


def js_log(x):
    """fdlibm __ieee754_log, as V8's Math.log, for normal positive finite x."""
    hx = _hi(x)
    if hx < 0x00100000 or hx >= 0x7FF00000:
        raise ValueError(f"log: {x} outside the normal positive range")
    k = (hx >> 20) - 1023
    hx &= 0x000FFFFF
    i = (hx + 0x95F64) & 0x100000
    x = _set_hi(x, hx | (i ^ 0x3FF00000))  # normalize x or x/2
    k += i >> 20
    f = x - 1.0
    if (0x000FFFFF & (2 + hx)) < 3:  # |f| < 2**-20
        if f == 0.0:
            if k == 0:
                return 0.0
            dk = float(k)
            return dk * _LN2_HI + dk * _LN2_LO
        R = f * f * (0.5 - 0.33333333333333333 * f)
        if k == 0:
            return f - R
        dk = float(k)
        return dk * _LN2_HI - ((R - dk * _LN2_LO) - f)
    s = f / (2.0 + f)
    dk = float(k)
    z = s * s
    i = hx - 0x6147A
    w = z * z
    j = 0x6B851 - hx
    t1 = w * (_LG2 + w * (_LG4 + w * _LG6))
    t2 = z * (_LG1 + w * (_LG3 + w * (_LG5 + w * _LG7)))
    i |= j
    R = t2 + t1
    if i > 0:
        hfsq = 0.5 * f * f
        if k == 0:
            return f - (hfsq - s * (hfsq + R))
        return dk * _LN2_HI - ((hfsq - (s * (hfsq + R) + dk * _LN2_LO)) - f)
    if k == 0:
        return f - s * (f - R)
    return dk * _LN2_HI - ((s * (f - R) - dk * _LN2_LO) - f)


_C1 = 4.16666666666666019037e-02
_C2 = -1.38888888888741095749e-03
_C3 = 2.48015872894767294178e-05
_C4 = -2.75573143513906633035e-07
_C5 = 2.08757232129817482790e-09
_C6 = -1.13596475577881948265e-11
_S1 = -1.66666666666666324348e-01
_S2 = 8.33333333332248946124e-03
_S3 = -1.98412698298579493134e-04
_S4 = 2.75573137070700676789e-06
_S5 = -2.50507602534068634195e-08
_S6 = 1.58969099521155010221e-10
_INVPIO2 = 6.36619772367581382433e-01
_PIO2_1 = 1.57079632673412561417e+00
_PIO2_1T = 6.07710050650619224932e-11
_PIO2_2 = 6.07710050630396597660e-11
_PIO2_2T = 2.02226624879595063154e-21
_PIO2_3 = 2.02226624871116645580e-21
_PIO2_3T = 8.47842766036889956997e-32
_NPIO2_HW = (0x3FF921FB, 0x400921FB, 0x4012D97C, 0x401921FB, 0x401F6A7A, 0x4022D97C)


def _kernel_cos(x, y):
    ix = _hi(x) & 0x7FFFFFFF
    if ix < 0x3E400000 and int(x) == 0:
        return 1.0
    z = x * x
    r = z * (_C1 + z * (_C2 + z * (_C3 + z * (_C4 + z * (_C5 + z * _C6)))))
    if ix < 0x3FD33333:
        return 1.0 - (0.5 * z - (z * r - x * y))
    qx = 0.28125 if ix > 0x3FE90000 else _from_words(ix - 0x00200000, 0)
    hz = 0.5 * z - qx
    a = 1.0 - qx
    return a - (hz - (z * r - x * y))


def _kernel_sin1(x, y):  # __kernel_sin(x, y, iy=1)
    ix = _hi(x) & 0x7FFFFFFF
    if ix < 0x3E400000 and int(x) == 0:
        return x
    z = x * x
    v = z * x
    r = _S2 + z * (_S3 + z * (_S4 + z * (_S5 + z * _S6)))
    return x - ((z * (0.5 * y - v * r) - y) - v * _S1)


def _rem_pio2(x):
    """fdlibm __ieee754_rem_pio2 for 0 <= x < 8 (n, y0, y1)."""
    hx = _hi(x)
    ix = hx & 0x7FFFFFFF
    if hx >> 31 or ix >= 0x40200000:
        raise ValueError(f"rem_pio2: {x} outside [0, 8)")
    if ix <= 0x3FE921FB:
        return 0, x, 0.0
    if ix < 0x4002D97C:  # |x| < 3pi/4, n = 1
        z = x - _PIO2_1
        if ix != 0x3FF921FB:
            y0 = z - _PIO2_1T
            return 1, y0, (z - y0) - _PIO2_1T
        z -= _PIO2_2
        y0 = z - _PIO2_2T
        return 1, y0, (z - y0) - _PIO2_2T
    t = x
    n = int(t * _INVPIO2 + 0.5)
    fn = float(n)
    r = t - fn * _PIO2_1
    w = fn * _PIO2_1T
    if n < 32 and ix != _NPIO2_HW[n - 1]:
        y0 = r - w
    else:
        j = ix >> 20
        y0 = r - w
        i = j - ((_hi(y0) >> 20) & 0x7FF)
        if i > 16:
            t = r
            w = fn * _PIO2_2
            r = t - w
            w = fn * _PIO2_2T - ((t - r) - w)
            y0 = r - w
            i = j - ((_hi(y0) >> 20) & 0x7FF)
            if i > 49:
                t = r
                w = fn * _PIO2_3
                r = t - w
                w = fn * _PIO2_3T - ((t - r) - w)
                y0 = r - w
    return n, y0, (r - y0) - w


def js_cos(x):
    """fdlibm cos, as V8's Math.cos, for 0 <= x < 8."""
    ix = _hi(x) & 0x7FFFFFFF
    if ix <= 0x3FE921FB:
        return _kernel_cos(x, 0.0)
    n, y0, y1 = _rem_pio2(x)
    n &= 3
    if n == 0:
        return _kernel_cos(y0, y1)
    if n == 1:
        return -_kernel_sin1(y0, y1)
    if n == 2:
        return -_kernel_cos(y0, y1)
    return _kernel_sin1(y0, y1)


# ---- deterministic PRNG ------------------------------------------------------------------


def fnv1a(text):
    """32-bit FNV-1a over the UTF-16 code units of text (as JavaScript's charCodeAt)."""
    units = text.encode("utf-16-le")
    h = 0x811C9DC5
    for i in range(0, len(units), 2):
        h ^= units[i] | (units[i + 1] << 8)
        h = (h * 0x01000193) & U32
    return h


def mulberry32(seed):
    """mulberry32: uniform doubles k / 2^32 in [0, 1). Math.imul and `>>> 0` are exact
    arithmetic mod 2^32, so unsigned 32-bit values reproduce the JavaScript bits."""
    a = seed & U32

    def next_():
        nonlocal a
        a = (a + 0x6D2B79F5) & U32
        t = a
        t = ((t ^ (t >> 15)) * (t | 1)) & U32
        t ^= (t + (((t ^ (t >> 7)) * (t | 61)) & U32)) & U32
        return (t ^ (t >> 14)) / 4294967296

    return next_


def normal(rand):
    # Box-Muller; u1 in (0, 1].
    u1 = 1 - rand()
    u2 = rand()
    return math.sqrt(-2 * js_log(u1)) * js_cos(2 * math.pi * u2)


# ---- npy writer --------------------------------------------------------------------------

NPY_DESCR = {"float32": "<f4", "int64": "<i8", "int32": "<i4", "uint8": "|u1", "bool": "|b1"}


def npy_bytes(dtype, shape, data):
    descr = NPY_DESCR.get(dtype)
    if not descr:
        raise ValueError(f"npy: unsupported dtype {dtype}")
    if len(shape) == 0:
        shape_str = "()"
    elif len(shape) == 1:
        shape_str = f"({shape[0]},)"
    else:
        shape_str = "(" + ", ".join(str(d) for d in shape) + ")"
    header = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape_str}, }}"
    # magic(6) + version(2) + header_len(2) + header, padded with spaces, ending in '\n',
    # total a multiple of 64. (Not numpy.save: it pads differently.)
    total = -(-(10 + len(header) + 1) // 64) * 64
    header = header + " " * (total - 10 - len(header) - 1) + "\n"
    prefix = b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little")
    count = math.prod(shape)
    if data.size != count:
        raise ValueError(f"npy: {data.size} elements for shape {','.join(map(str, shape))}")
    body = np.ascontiguousarray(data, dtype=np.dtype(descr)).tobytes()
    return prefix + header.encode("latin1") + body


def write_npy(file, dtype, shape, data):
    os.makedirs(os.path.dirname(file), exist_ok=True)
    with open(file, "wb") as f:
        f.write(npy_bytes(dtype, shape, data))


# ---- inputs ------------------------------------------------------------------------------


def parse_shapes(s):
    return [[int(v) for v in t.split("x")] for t in s.split(",")]


def mask_lengths(batch, seq):
    """Valid (unpadded) length of each row of an attention mask [batch, seq]: row 0 is full,
    later rows are shorter (zeros at the end), every row keeps at least one 1. With batch 1
    and seq > 8 the single row is padded by a quarter."""
    lens = []
    for r in range(batch):
        if batch == 1:
            lens.append(seq - seq // 4 if seq > 8 else seq)
        else:
            lens.append(max(1, seq - (r * seq) // batch))
    return lens


def make_input(dtype, gen, shape, rand, others=()):
    """`others`: the shapes of the inputs before this one (for the lengths generator)."""
    count = math.prod(shape)
    kind = gen["kind"]
    if kind == "normal":
        if dtype != "float32":
            raise ValueError(f"normal generator needs float32, got {dtype}")
        # Doubles rounded once to float32 (round to nearest even), as a Float32Array store.
        return np.array([normal(rand) for _ in range(count)], dtype=np.float64).astype(np.float32)
    if kind == "int":
        span = gen["high"] - gen["low"]
        vals = [gen["low"] + math.floor(rand() * span) for _ in range(count)]
        if dtype == "int64":
            return np.array(vals, dtype=np.int64)
        if dtype == "int32":
            return np.array(vals, dtype=np.int32)
        raise ValueError(f"int generator needs int64 or int32, got {dtype}")
    if kind in ("mask", "left_mask"):
        if len(shape) != 2:
            raise ValueError(f"{kind} generator needs [batch, seq]")
        batch, seq = shape
        lens = mask_lengths(batch, seq)
        if kind == "mask":  # padding at the end of each row
            vals = [1 if c < lens[r] else 0 for r in range(batch) for c in range(seq)]
        else:  # padding at the start (a decoder's prompt, left-padded)
            vals = [1 if c >= seq - lens[r] else 0 for r in range(batch) for c in range(seq)]
        if dtype == "int64":
            return np.array(vals, dtype=np.int64)
        if dtype == "float32":
            return np.array(vals, dtype=np.float32)
        return np.array(vals, dtype=np.int32)
    if kind == "lengths":  # per batch row, the valid length of another input's axis
        if len(shape) != 1 or len(others) <= gen["input"]:
            raise ValueError("lengths generator needs [batch] after the input it measures")
        lens = mask_lengths(shape[0], others[gen["input"]][gen["axis"]])
        return np.array(lens, dtype=np.int64 if dtype == "int64" else np.int32)
    raise ValueError(f"unknown generator {kind}")


# ---- main --------------------------------------------------------------------------------


def main():
    with open(os.path.join(ZOO, "manifest.json"), encoding="utf-8") as f:
        manifest = json.load(f)
    only = set(sys.argv[1:])
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    # Literal graph semantics: no fusions that could change rounding.
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    failures = 0
    for model in manifest["models"]:
        if only and model["name"] not in only:
            continue
        session = ort.InferenceSession(os.path.join(ZOO, model["onnx"]), options,
                                       providers=["CPUExecutionProvider"])
        input_names = [i.name for i in session.get_inputs()]
        output_names = [o.name for o in session.get_outputs()]
        if input_names != model["inputs"] or output_names != model["outputs"]:
            raise RuntimeError(f"{model['name']}: ORT io names {input_names}/{output_names} "
                               f"differ from the manifest {model['inputs']}/{model['outputs']}")
        model_cases = os.path.join(ZOO, "cases", model["name"])
        if os.path.exists(model_cases):
            shutil.rmtree(model_cases)
        for c in model["cases"]:
            rand = mulberry32(fnv1a(f"{model['name']}/{c['name']}"))
            shapes = parse_shapes(c["input_shapes"])
            feeds = {}
            for i, name in enumerate(model["inputs"]):
                dtype = model["input_dtypes"][i]
                data = make_input(dtype, model["input_generators"][i], shapes[i], rand, shapes[:i])
                feeds[name] = data.reshape(shapes[i])
                write_npy(os.path.join(ZOO, c["inputs"][i]), dtype, shapes[i], data)
            t0 = time.perf_counter_ns()
            results = session.run(model["outputs"], feeds)
            ms = (time.perf_counter_ns() - t0) / 1e6
            summary = []
            for i, name in enumerate(model["outputs"]):
                t = results[i]
                dims = list(t.shape)
                if c.get("output_shapes") and dims != c["output_shapes"][i]:
                    print(f"  MISMATCH {model['name']}/{c['name']} output '{name}': ORT shape "
                          f"[{','.join(map(str, dims))}] but manifest says "
                          f"[{','.join(map(str, c['output_shapes'][i]))}]", file=sys.stderr)
                    failures += 1
                if t.dtype == np.float32 and not np.isfinite(t).all():
                    print(f"  NON-FINITE values in {model['name']}/{c['name']} output '{name}'",
                          file=sys.stderr)
                    failures += 1
                write_npy(os.path.join(ZOO, c["outputs"][i]), str(t.dtype), dims, t)
                summary.append(f"{name}[{'x'.join(map(str, dims))}]")
            print(f"{model['name']:<14} {c['name']:<12} {c['input_shapes']:<22} "
                  f"-> {' '.join(summary)}  ({ms:.1f} ms)", flush=True)
        del session
    if failures:
        print(f"{failures} problem(s)", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
