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
from collections.abc import Mapping as _AbcMapping
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
    max: Optional[int] = None
    step: int = 1

    def __post_init__(self):
        if self.max is None:  # no default bound: Kiln plans memory at it, so the user states it
            raise TypeError(f"kiln.Dim({self.name!r}) needs max=: every dynamic dim is bounded, "
                            f"e.g. kiln.Dim({self.name!r}, min={self.min}, max=8)")
        if not 0 <= self.min <= self.max or self.step < 1:
            raise ValueError(f"kiln.Dim({self.name!r}, min={self.min}, max={self.max}, step={self.step}): "
                             "needs 0 <= min <= max and step >= 1")

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

    def check(self, *shapes) -> None:
        """Checks input shapes against the contract without running; raises ContractError.
        Takes shapes as bind() does: one per input, or one list of them."""
        self._impl.check(_shapes(shapes))

    def run(self, *arrays, **named) -> list:
        """Runs at the arrays' shapes; returns every output as a new numpy array. Inputs by
        position, or by name (run(input_ids=a, attention_mask=b))."""
        return self._impl.run(_prepare([(t.name, t.dtype) for t in self.inputs], _by_position(self, arrays, named)))

    def bind(self, *shapes) -> list:
        """Binds to `shapes` (one per input, or one list of them; checked as check() does) and
        returns each input as a writable numpy view into the method's arena: write the input
        there (np.copyto, or have a decoder write into it) and call execute(), with no copy of
        the input. A view keeps the method's memory alive; it is the input until the next bind,
        call or cpu_threads change. After a call, execute() refuses until the next bind: the
        call's inputs replaced what the views held."""
        return self._impl.bind(_shapes(shapes))

    def execute(self) -> list:
        """Runs at the shapes of the last bind() on what was written into its views; returns
        every output as a new numpy array."""
        return self._impl.execute()

    def __call__(self, *arrays, **named):
        """run(); a single output is returned alone, several as a tuple."""
        out = self.run(*arrays, **named)
        return out[0] if len(out) == 1 else tuple(out)


def _is_shape(x) -> bool:
    return isinstance(x, (list, tuple, np.ndarray)) and all(isinstance(v, (int, np.integer)) for v in x)


def _shapes(args: tuple) -> list:
    """check()/bind() arguments as a list of shapes: one shape per input (bind((1, 3, 8, 8))),
    or one list of them (check([(1, 3, 8, 8)])). A scalar input's shape is ()."""
    if len(args) == 1 and isinstance(args[0], (list, tuple)) and args[0] and not _is_shape(args[0]):
        args = tuple(args[0])
    for s in args:
        if not _is_shape(s):
            raise TypeError(f"a shape is a sequence of ints, one per input (e.g. (1, 3, 224, 224)); got {s!r}")
    return [[int(v) for v in s] for s in args]


def _by_position(method, arrays: tuple, named: dict) -> tuple:
    """The inputs in the method's order, from positional arrays and/or arrays by input name.
    Mistakes in the call itself (an unknown name, an input given twice or missing) are
    TypeError, as for a Python function."""
    if not named:
        return arrays
    names = [t.name for t in method.inputs]
    unknown = [k for k in named if k not in names]
    if unknown:
        raise TypeError(f"{method.name}() got an unexpected keyword argument {unknown[0]!r}; its inputs are "
                        + ", ".join(repr(n) for n in names))
    if len(arrays) > len(names):
        raise TypeError(f"{method.name}() takes {len(names)} inputs, got {len(arrays)} positional")
    twice = [n for n in names[:len(arrays)] if n in named]
    if twice:
        raise TypeError(f"{method.name}() got input {twice[0]!r} both by position and by name")
    missing = [n for n in names[len(arrays):] if n not in named]
    if missing:
        raise TypeError(f"{method.name}() is missing input " + ", ".join(repr(n) for n in missing))
    return tuple(arrays) + tuple(named[n] for n in names[len(arrays):])


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
    def methods(self) -> Mapping[str, Union[Method, "BucketedMethod"]]:
        """Each method by name, made on first use with 1 thread and the delegate on: the
        file's methods, and each bucketed method by its own name (a BucketedMethod)."""
        if self._methods is None:
            self._methods = _LazyMethods(self, self.method_names + list(_kiln.bucketed_names(self._impl)))
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


class _LazyMethods(_AbcMapping):
    """program.methods: each Method (or BucketedMethod) made when first looked up."""

    def __init__(self, program: "Program", names: list):
        self._program, self._names, self._made = program, names, {}

    def __getitem__(self, name: str):
        if name not in self._names:
            raise KeyError(f"no method {name!r} in the program; it has " + ", ".join(repr(n) for n in self._names))
        if name not in self._made:
            self._made[name] = self._program.method(name)
        return self._made[name]

    def __iter__(self):
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


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
    """The buckets of a method (kiln export --bucket DIM=S1,S2,...) called as one, with Method's
    interface: the smallest bucket that fits runs, inputs padded along the axes that carry the
    dim, outputs cut back. `inputs` show the bucketed axes as Dim(dim, 1, largest bucket)."""

    def __init__(self, program: "Program", name: str, cpu_threads: int = 1, use_delegate: bool = True):
        self._impl = _kiln.Bucketed(program._impl, name, cpu_threads, use_delegate)
        self.name = name
        self.dim = self._impl.dim()
        self.sizes = list(self._impl.sizes())
        self.buckets = list(self._impl.bucket_names())
        meta = self._impl.meta()
        bucket_dim = Dim(self.dim, 1, self.sizes[-1])
        self.inputs = _with_bucket_dim([_tensor(t) for t in meta["inputs"]], meta["input_axes"], bucket_dim)
        self.outputs = _with_bucket_dim([_tensor(t) for t in meta["outputs"]], meta["output_axes"], bucket_dim)
        self.dims = [Dim(*d) for d in meta["dims"]] + [bucket_dim]
        self.guards = list(meta["guards"])
        self.arena_bytes = meta["arena_bytes"]
        self.dispatch = meta["dispatch"]

    @property
    def last_bucket(self) -> str:
        """The bucket the last call, check or bind chose."""
        return self._impl.last_bucket()

    def check(self, *shapes) -> str:
        """Checks shapes (as Method.check takes them) without running; returns the bucket they
        run, e.g. 'forward@seq=32'; raises ContractError."""
        return self._impl.check(_shapes(shapes))

    def bind(self, *shapes) -> list:
        """As Method.bind: picks the bucket and returns each input as a writable numpy view of
        its corner in that bucket (the rest holds the pad value); write there, then execute()."""
        return self._impl.bind(_shapes(shapes))

    def execute(self) -> list:
        """Runs the bucket of the last bind() on what its views hold; outputs cut back."""
        return self._impl.execute()

    def run(self, *arrays, **named) -> list:
        """Runs the bucket that fits; returns every output, cut back, as a new numpy array."""
        return self._impl.run(_prepare([(t.name, t.dtype) for t in self.inputs], _by_position(self, arrays, named)))

    def __call__(self, *arrays, **named):
        out = self.run(*arrays, **named)
        return out[0] if len(out) == 1 else tuple(out)

    def __repr__(self) -> str:
        return f"<kiln.BucketedMethod {self.name} over {self.dim} in {self.sizes}>"


def _with_bucket_dim(tensors: list, axes, dim: Dim) -> list:
    """The tensors with the bucketed axes ((index, axis) pairs) shown as `dim`."""
    out = list(tensors)
    for index, axis in axes:
        t = out[index]
        shape = tuple(dim if k == axis else a for k, a in enumerate(t.shape))
        text = "[" + ", ".join(a.name if isinstance(a, Dim) else str(a) for a in shape) + "]"
        out[index] = TensorInfo(t.name, t.dtype, shape, text)
    return out


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
        elif isinstance(d, (int, np.integer)) and not isinstance(d, bool) and name is not None:
            specs.append(f"{name}={int(d)}")  # a bare int pins the dim (--dim NAME=V); a range is (min, max)
        elif not isinstance(d, (tuple, list)) or len(d) not in (2, 3):
            raise TypeError(f"dims[{name!r}] is {d!r}: give an int to pin the dim, (min, max[, step]), a Dim, "
                            "or a 'MIN..MAX[:STEP]' text")
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
                  fusion, explain_fusion=False) -> list:
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
    flags += [] if fusion else [("no_fusion", "")]
    return flags + [("explain_fusion", "")] if explain_fusion else flags


def export_onnx(model, path: Union[str, os.PathLike], dims=None, inputs: Mapping[str, Iterable] | None = None,
                method: str = "forward", delegate: str = "xnnpack", fusion: bool = True,
                require_coverage: float = 0.0, max_arena: Union[int, str] = "64GiB",
                warn_arena: Union[int, str] = "1GiB", consts: Mapping[str, float] | None = None,
                bucket: Mapping[str, Sequence[int]] | None = None, pads: Mapping[str, float] | None = None,
                explain_fusion: bool = False) -> str:
    """`kiln export` from Python: every option of `kiln export`, parsed by the same parser, so
    the same options write the same bytes. `model` is a path, the bytes of a ModelProto, or an
    onnx.ModelProto. Writes `path` and returns export's summary.

    dims              --dim: maps names to (min, max[, step]) or Dims, e.g. {"H": (32, 224, 32)};
                      or a list of Dims or "NAME=MIN..MAX[:STEP]" texts; a bare int pins the
                      dim ({"batch": 4} is --dim batch=4, static 4; (1, 4) is the range 1..4)
    inputs            --input: maps input names to axes (ints or dim names), e.g. {"x": (1, 3, "H", "W")}
    consts            --const: maps scalar inputs to the value pinned as a constant, e.g. {"sr": 16000}
    method            --method_name
    delegate          --delegate: "xnnpack" (partitioned for XNNPACK; the portable path stays) or "none"
    fusion            False is --no-fusion: LayerNorm/GELU/attention chains kept as the model wrote them
    explain_fusion    --explain-fusion: the summary names each chain that did not fuse and where it stopped
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
                          fusion, explain_fusion)
    return _exporter().export_onnx(model, os.fspath(path), flags)


from .torch_export import ExportResult, export  # noqa: E402  (torch is imported only when called)
from . import image  # noqa: E402,F401  (kiln.image: host normalization)
from .quantize import quantize  # noqa: E402  (onnxruntime is imported only when called)
