"""Kiln from Python: load a .kiln program, read its shape contract, run it on numpy arrays
at any shape the contract admits, and export ONNX models with bounded dims.

    import kiln, numpy as np
    program = kiln.load("examples/cnn.kiln")
    forward = program.methods["forward"]
    print(forward.inputs)                  # [TensorInfo('x', float32, [batch, 3, H, W] ...)]
    forward.check([(1, 3, 256, 256)])      # raises kiln.ContractError with the runtime's message
    y = forward(np.zeros((1, 3, 32, 32), np.float32))

Errors: kiln.ContractError (a ValueError) when shapes or dtypes break the contract, with the
runtime's message word for word; kiln.ProgramError (an OSError) for a file that cannot be
loaded; kiln.ExportError (a ValueError) when export refuses; kiln.ExecutionError for the rest.
All derive from kiln.KilnError. The exporter is an optional part (kiln._kiln_export, which
links the ONNX importer); a runtime-only install raises ImportError from export_onnx.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Iterable, Mapping, Optional, Sequence, Union

import numpy as np

from . import _kiln
from ._errors import ALL as _ALL_ERRORS
from ._errors import ContractError, ExecutionError, ExportError, KilnError, ProgramError

_kiln.set_error_types(*_ALL_ERRORS)

try:
    from importlib.metadata import version as _version
    __version__ = _version("kiln")
except Exception:  # run from a source tree without installing
    __version__ = "0.0.0+local"
__all__ = ["load", "Program", "Method", "Dim", "TensorInfo", "export_onnx", "quantize", "export", "ExportResult",
           "ContractError", "ExecutionError", "ExportError", "KilnError", "ProgramError", "__version__"]


@dataclass(frozen=True)
class Dim:
    """A named dynamic dimension: sizes min..max in multiples of step. Axes that share a Dim
    (the same name) must be equal."""
    name: str
    min: int = 1
    max: int = 1
    step: int = 1

    def __repr__(self) -> str:
        step = f", step={self.step}" if self.step != 1 else ""
        return f"Dim({self.name!r}, min={self.min}, max={self.max}{step})"

    def spec(self) -> str:
        """The `kiln export --dim` text: NAME=MIN..MAX[:STEP]."""
        return f"{self.name}={self.min}..{self.max}" + (f":{self.step}" if self.step != 1 else "")


Axis = Union[int, Dim, str]  # static size, a Dim, or (outputs) an expression over dims


@dataclass(frozen=True)
class TensorInfo:
    """An input or output of a method: its name, numpy dtype and per-axis contract."""
    name: str
    dtype: np.dtype
    shape: tuple  # of Axis
    shape_text: str

    def __repr__(self) -> str:
        return f"TensorInfo({self.name!r}, {self.dtype}, {self.shape_text})"


def _axis(a) -> Axis:
    if isinstance(a, tuple):
        return Dim(*a)
    return a


def _tensor(d: dict) -> TensorInfo:
    return TensorInfo(d["name"], np.dtype(d["dtype"]), tuple(_axis(a) for a in d["axes"]), d["shape_text"])


class Method:
    """One method of a program, ready to run. Calling it binds the arrays' shapes (checking
    the contract), copies them into the method's arena, executes with the GIL released, and
    returns new arrays (copies: they stay valid after the next call). A Method keeps the
    loaded program alive. One Method must not run on two threads at once; make one per thread
    (program.method(name)), they share the program's weights."""

    def __init__(self, program: "Program", name: str, cpu_threads: int = 1, use_delegate: bool = True,
                 max_shapes: Optional[Sequence[Sequence[int]]] = None):
        # The extension's Method holds the program (shared_ptr): no Python reference back to
        # the Program, so program.methods makes no reference cycle.
        caps = [list(map(int, s)) for s in max_shapes] if max_shapes else []
        self._impl = _kiln.Method(program._impl, name, cpu_threads, use_delegate, caps)
        self._meta = self._impl.meta()
        self.name = name
        self.inputs = [_tensor(t) for t in self._meta["inputs"]]
        self.outputs = [_tensor(t) for t in self._meta["outputs"]]
        self.dims = [Dim(*d) for d in self._meta["dims"]]
        self.guards = [g["text"] for g in self._meta["guards"]]
        self.arena_bytes = self._meta["arena_bytes"]

    def __repr__(self) -> str:
        ins = ", ".join(f"{t.name}: {t.dtype} {t.shape_text}" for t in self.inputs)
        return f"<kiln.Method {self.name}({ins})>"

    @property
    def cpu_threads(self) -> int:
        """Threads of this method's pool; setting it re-creates the method (cheap)."""
        return self._impl.cpu_threads

    @cpu_threads.setter
    def cpu_threads(self, n: int) -> None:
        self._impl.cpu_threads = int(n)
        self._meta = self._impl.meta()

    @property
    def arena_bytes_in_use(self) -> int:
        """Arena bytes the values take at the shapes of the last call, bind or check (before
        any: at the bound). Follows the shape; `arena_bytes` is what was allocated."""
        return self._impl.arena_bytes_in_use()

    @property
    def live_lower_bound_bytes(self) -> int:
        """The most bytes alive at one step at the current shapes: no arena can be smaller."""
        return self._impl.live_lower_bound_bytes()

    @property
    def coverage(self) -> dict:
        """Delegated coverage: backend, instructions and FLOPs delegated (at the bound), what
        the delegate declined and why, and whether it runs (with its warning when it does not)."""
        d = dict(self._meta["delegate"])
        d["flops_fraction"] = d["delegated_flops"] / d["flops"] if d["flops"] else 0.0
        return d

    def check(self, shapes: Sequence[Sequence[int]]) -> None:
        """Checks input shapes against the contract without running; raises ContractError."""
        self._impl.check([list(map(int, s)) for s in shapes])

    def run(self, *arrays) -> list:
        """Runs at the arrays' shapes; returns every output as a new numpy array."""
        return self._impl.run(_prepare([(t.name, t.dtype) for t in self.inputs], arrays))

    def bind(self, *shapes) -> list:
        """Binds to `shapes` (checking the contract, as check() does) and returns each input as a
        writable numpy view into the method's arena: write the input there (np.copyto, or have a
        decoder write into it) and call execute(), with no copy of the input. A view keeps the
        method's memory alive; it is the input until the next bind, call or cpu_threads change
        (after one, the program reuses that memory: write the views bind returns again)."""
        return self._impl.bind([list(map(int, s)) for s in shapes])

    def execute(self) -> list:
        """Runs at the shapes of the last bind() on what was written into its views; returns
        every output as a new numpy array."""
        return self._impl.execute()

    def __call__(self, *arrays):
        """run(); a single output is returned alone, several as a tuple."""
        out = self.run(*arrays)
        return out[0] if len(out) == 1 else tuple(out)


class Program:
    """A loaded .kiln program (the file is mapped, weights are never copied)."""

    def __init__(self, impl, path: str):
        self._impl = impl
        self.path = path
        self._methods = None

    @property
    def method_names(self) -> list:
        return list(_kiln.method_names(self._impl))

    @property
    def methods(self) -> Mapping[str, Method]:
        """Each method by name, made on first use with 1 thread and the delegate on."""
        if self._methods is None:
            self._methods = {n: Method(self, n) for n in self.method_names}
        return self._methods

    def method(self, name: str = "forward", cpu_threads: int = 1, use_delegate: bool = True,
               max_shapes: Optional[Sequence[Sequence[int]]] = None):
        """A new Method with its own arena and options. `max_shapes` (one shape per input)
        tightens the bounds: the arena is allocated for them and larger shapes are refused.
        For a bucketed name (kiln export --bucket), a BucketedMethod."""
        if name not in self.method_names and _kiln.has_buckets(self._impl, name):
            return BucketedMethod(self, name, cpu_threads, use_delegate)
        return Method(self, name, cpu_threads, use_delegate, max_shapes)

    def __repr__(self) -> str:
        return f"<kiln.Program {self.path!r} methods={self.method_names}>"


def _prepare(inputs, arrays) -> list:
    """The arrays as the inputs' dtypes ((name, dtype) pairs), C-contiguous: float64 -> float32 is
    converted (numpy's default float), integers only when no value can change; anything else
    is refused."""
    prepared = []
    for i, a in enumerate(arrays):
        a = np.asarray(a)
        if i < len(inputs) and a.dtype != inputs[i][1]:
            name, want = inputs[i]
            if (a.dtype.kind == "f" and want.kind == "f") or np.can_cast(a.dtype, want, casting="safe"):
                a = a.astype(want)
            else:
                raise ContractError(f"input '{name}' must be {want}, got {a.dtype}")
        prepared.append(np.asarray(a, order="C"))  # no copy when already C-contiguous; keeps rank 0
    return prepared


class BucketedMethod:
    """The buckets of a method (kiln export --bucket DIM=S1,S2,...) called as one: the smallest
    bucket that fits runs, inputs padded along the axes that carry the dim, outputs cut back."""

    def __init__(self, program: "Program", name: str, cpu_threads: int = 1, use_delegate: bool = True):
        self._impl = _kiln.Bucketed(program._impl, name, cpu_threads, use_delegate)
        self.name = name
        self.dim = self._impl.dim()
        self.sizes = list(self._impl.sizes())
        self.buckets = list(self._impl.bucket_names())
        self._inputs = [(n, np.dtype(t)) for n, t in self._impl.inputs()]

    @property
    def last_bucket(self) -> str:
        """The bucket the last call ran."""
        return self._impl.last_bucket()

    def run(self, *arrays) -> list:
        """Runs the bucket that fits; returns every output, cut back, as a new numpy array."""
        return self._impl.run(_prepare(self._inputs, arrays))

    def __call__(self, *arrays):
        out = self.run(*arrays)
        return out[0] if len(out) == 1 else tuple(out)

    def __repr__(self) -> str:
        return f"<kiln.BucketedMethod {self.name} over {self.dim} in {self.sizes}>"


def load(path: Union[str, os.PathLike], verify_constants: bool = True) -> Program:
    """Maps and verifies a .kiln file (checksums included; verify_constants=False skips the
    pass over the weights)."""
    path = os.fspath(path)
    return Program(_kiln.load(path, verify_constants), path)


def _exporter():
    """kiln._kiln_export, imported on first use (a runtime-only build does not have it)."""
    try:
        from . import _kiln_export
    except ImportError as e:
        raise ImportError("this kiln was built without the exporter (KILN_PYTHON_EXPORT=OFF); "
                          "reinstall with it to export") from e
    _kiln_export.set_error_types(*_ALL_ERRORS)
    return _kiln_export


def _dim_specs(dims) -> list:
    specs = []
    if dims is None:
        return specs
    items = dims.items() if isinstance(dims, Mapping) else ((None, d) for d in dims)
    for name, d in items:
        if isinstance(d, Dim):
            specs.append(d.spec() if name is None or name == d.name else Dim(name, d.min, d.max, d.step).spec())
        elif isinstance(d, str):
            specs.append(d if name is None else f"{name}={d}")
        else:  # (min, max) or (min, max, step)
            lo, hi, *step = d
            specs.append(Dim(name, int(lo), int(hi), int(step[0]) if step else 1).spec())
    return specs


def _number(v) -> str:
    """A --const or --pad value as text: Python's shortest round-trip spelling (bool as 0/1)."""
    if isinstance(v, str):
        return v
    if isinstance(v, (bool, np.bool_)) or isinstance(v, (int, np.integer)):
        return str(int(v))
    return repr(float(v))


def _export_flags(dims, inputs, consts, method, delegate, require_coverage, bucket, pads, max_arena, warn_arena,
                  fusion) -> list:
    """export_onnx's arguments as (option, text) pairs for the parser `kiln export` uses (in its
    --help order), named as Python spells them: ("dim", "N=1..8"), ("max_arena", "512M")."""
    flags = [("input", f"{k}=" + ",".join(str(a.name if isinstance(a, Dim) else a) for a in v))
             for k, v in (inputs or {}).items()]
    flags += [("dim", s) for s in _dim_specs(dims)]
    flags += [("const", f"{k}={_number(v)}") for k, v in (consts or {}).items()]
    flags += [("method_name", method), ("delegate", delegate), ("require_coverage", repr(float(require_coverage)))]
    flags += [("bucket", f"{d}=" + ",".join(str(int(s)) for s in sizes)) for d, sizes in (bucket or {}).items()]
    flags += [("pad", f"{k}={_number(v)}") for k, v in (pads or {}).items()]
    flags += [("max_arena", str(max_arena)), ("warn_arena", str(warn_arena))]
    return flags if fusion else flags + [("no_fusion", "")]


def export_onnx(model, path: Union[str, os.PathLike], dims=None, inputs: Mapping[str, Iterable] | None = None,
                method: str = "forward", delegate: str = "xnnpack", fusion: bool = True,
                require_coverage: float = 0.0, max_arena: Union[int, str] = "64GiB",
                warn_arena: Union[int, str] = "1GiB", consts: Mapping[str, float] | None = None,
                bucket: Mapping[str, Sequence[int]] | None = None, pads: Mapping[str, float] | None = None) -> str:
    """`kiln export` from Python: every option of `kiln export`, parsed by the same parser, so
    the same options write the same bytes. `model` is a path, the bytes of a ModelProto, or an
    onnx.ModelProto. Writes `path` and returns export's summary.

    dims              --dim: maps names to (min, max[, step]) or Dims, e.g. {"H": (32, 224, 32)};
                      or a list of Dims or "NAME=MIN..MAX[:STEP]" texts; (v, v) pins a dim
    inputs            --input: maps input names to axes (ints or dim names), e.g. {"x": (1, 3, "H", "W")}
    consts            --const: maps scalar inputs to the value pinned as a constant, e.g. {"sr": 16000}
    method            --method_name
    delegate          --delegate: "xnnpack" (partitioned for XNNPACK; the portable path stays) or "none"
    fusion            False is --no-fusion: LayerNorm/GELU/attention chains kept as the model wrote them
    require_coverage  --require-coverage: the share of FLOPs (0..1) the delegate must take
    bucket            --bucket: {dim: sizes}, e.g. {"seq": [16, 32, 64]} is --bucket seq=16,32,64:
                      one static method per size, called as one (Program.method gives a BucketedMethod)
    pads              --pad: maps inputs to what a bucket pads them with (default 0), e.g. {"mask": 0}
    max_arena         --max-arena: bytes, or a size such as "512M", "2G", "1.5GiB"; 0: no limit. A
                      contract whose arena at the bound is larger raises ExportError naming the dims
                      and a smaller bound that fits
    warn_arena        --warn-arena: above it a UserWarning says the same

    Raises ValueError for an option that does not parse, ExportError when export refuses."""
    if hasattr(model, "SerializeToString"):
        model = model.SerializeToString()
    elif not isinstance(model, (bytes, bytearray)):
        model = os.fspath(model)
    if isinstance(model, bytearray):
        model = bytes(model)
    flags = _export_flags(dims, inputs, consts, method, delegate, require_coverage, bucket, pads, max_arena, warn_arena,
                          fusion)
    return _exporter().export_onnx(model, os.fspath(path), flags)


from .torch_export import ExportResult, export  # noqa: E402  (torch is imported only when called)
from . import image  # noqa: E402,F401  (kiln.image: host normalization)
from .quantize import quantize  # noqa: E402  (onnxruntime is imported only when called)
