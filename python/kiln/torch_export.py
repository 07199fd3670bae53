"""kiln.export: a torch module to a .kiln program, with torch.export's way of saying which
axes are dynamic (`dynamic_shapes=` with `torch.export.Dim`, or `kiln.Dim` where torch 2.x is
absent) and torch.export's rules:

- the same Dim (the same name) on two inputs means the axes are equal;
- an axis left out is static, at the example input's size;
- `Dim.AUTO` / `Dim.DYNAMIC` carry no bounds: Kiln needs them, and the error names each such
  axis with the Dim to write instead.

The module goes to ONNX first: with torch 2.x and onnxscript, through torch's dynamo exporter
(`torch.onnx.export(..., dynamo=True, dynamic_shapes=...)`); otherwise (Debian's torch 1.13)
through `torch.onnx.export` with `dynamic_axes`. Kiln then exports that ONNX with the same
names and bounds, so the program's signature shows the user's Dims.
"""
from __future__ import annotations

import contextlib
import inspect
import io
import os
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

from . import Dim, ExportError, export_onnx


@dataclass
class ExportResult:
    """What kiln.export did: the program's path, Kiln's export summary, the dims it declared,
    the ONNX exporter used, and the range constraints torch recorded (dynamo exporter only),
    each compared with Kiln's bounds."""
    path: str
    summary: str
    dims: List[Dim]
    exporter: str
    torch_ranges: Dict[str, Tuple[int, Optional[int]]] = field(default_factory=dict)
    notes: List[str] = field(default_factory=list)


def _is_torch_dim(d) -> bool:
    return type(d).__name__ in ("Dim", "_Dim") and hasattr(d, "min") and hasattr(d, "max") and hasattr(d, "__name__")


def _dim_hint(d) -> Optional[str]:
    """'AUTO' / 'DYNAMIC' / 'STATIC' for torch's Dim hints, else None."""
    if type(d).__name__ == "_DimHint":
        text = str(d)
        for h in ("AUTO", "DYNAMIC", "STATIC"):
            if h in text:
                return h
    return None


def _to_kiln_dim(d, where: str) -> Dim:
    if isinstance(d, Dim):
        return d
    if type(d).__name__ == "_DerivedDim":
        raise ExportError(f"{where}: derived Dims ({d.__name__}) are not supported; declare the axis with its own Dim")
    if _is_torch_dim(d):
        lo, hi = d.min, d.max
        if not isinstance(hi, int) or hi >= 2**62:
            raise ExportError(f"{where}: Dim '{d.__name__}' has no max; Kiln plans memory at the bound: write "
                              f"Dim('{d.__name__}', min={max(1, int(lo))}, max=...)")
        return Dim(d.__name__, max(1, int(lo)), int(hi))
    raise ExportError(f"{where}: expected a Dim, None or an int, got {d!r}")


def _normalize(dynamic_shapes, names: Sequence[str], shapes: Sequence[Sequence[int]]) -> List[List[Any]]:
    """Per input, per axis: an int (static) or a kiln Dim. Raises naming every unbounded axis."""
    per_input: List[Any] = [None] * len(names)
    if dynamic_shapes is None:
        pass
    elif isinstance(dynamic_shapes, dict):
        unknown = [k for k in dynamic_shapes if k not in names]
        if unknown:
            raise ExportError(f"dynamic_shapes names {unknown}, which are not inputs of forward; its inputs are {list(names)}")
        for i, n in enumerate(names):
            per_input[i] = dynamic_shapes.get(n)
    else:
        spec = list(dynamic_shapes)
        if len(spec) != len(names):
            raise ExportError(f"dynamic_shapes has {len(spec)} entries for {len(names)} inputs ({list(names)})")
        per_input = spec
    axes: List[List[Any]] = []
    unbounded: List[str] = []
    by_name: Dict[str, Dim] = {}
    for i, (name, shape) in enumerate(zip(names, shapes)):
        spec = per_input[i]
        row: List[Any] = list(shape)
        if spec is None:
            axes.append(row)
            continue
        items = spec.items() if isinstance(spec, dict) else enumerate(spec)
        for axis, d in items:
            where = f"input '{name}' axis {axis}"
            if not 0 <= axis < len(shape):
                raise ExportError(f"{where}: the example input has rank {len(shape)}")
            if d is None:
                continue
            hint = _dim_hint(d)
            if hint == "STATIC":
                continue
            if hint in ("AUTO", "DYNAMIC"):
                unbounded.append(f"{where} is Dim.{hint}: write Dim('{name}_{axis}', min=1, max=<the largest size>) "
                                 f"(example size {shape[axis]})")
                continue
            kd = _to_kiln_dim(d, where)
            prev = by_name.get(kd.name)
            if prev is not None and prev != kd:
                raise ExportError(f"{where}: Dim '{kd.name}' is declared twice with different bounds ({prev} and {kd})")
            by_name[kd.name] = kd
            if not kd.min <= shape[axis] <= kd.max:
                raise ExportError(f"{where}: the example size {shape[axis]} is outside {kd}")
            row[axis] = kd
        axes.append(row)
    if unbounded:
        raise ExportError("Kiln needs bounds for every dynamic axis:\n  " + "\n  ".join(unbounded))
    return axes


def _torch_dim(kd: Dim, cache: dict):
    from torch.export import Dim as TorchDim

    if kd.name not in cache:
        cache[kd.name] = TorchDim(kd.name, min=kd.min, max=kd.max)
    return cache[kd.name]


def _has_dynamo_exporter() -> bool:
    try:
        import onnxscript  # noqa: F401
        import torch

        return int(torch.__version__.split(".")[0]) >= 2
    except Exception:
        return False


def export(module, example_inputs, dynamic_shapes=None, path=None, *, opset: int = 17, method: str = "forward",
           delegate: str = "xnnpack", fusion: bool = True, exporter: Optional[str] = None) -> ExportResult:
    """Exports `module` (a torch.nn.Module, put in eval mode) at `example_inputs` (a tuple of
    tensors) to the .kiln file `path`. `dynamic_shapes` is torch.export's: a dict by
    forward's argument names, or a sequence by position, each {axis: Dim} or [Dim | None per
    axis]. `exporter` forces "dynamo" or "torchscript". Raises kiln.ExportError."""
    import torch

    if path is None:
        raise ExportError("export needs path=, the .kiln file to write")
    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    example_inputs = tuple(example_inputs)
    if not all(isinstance(t, torch.Tensor) for t in example_inputs):
        raise ExportError("example_inputs must be tensors (nested inputs are not supported)")
    params = [p for p in inspect.signature(module.forward).parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(params) < len(example_inputs):
        raise ExportError(f"forward takes {len(params)} inputs, example_inputs has {len(example_inputs)}")
    names = [p.name for p in params[:len(example_inputs)]]
    shapes = [list(t.shape) for t in example_inputs]
    axes = _normalize(dynamic_shapes, names, shapes)
    dims: Dict[str, Dim] = {a.name: a for row in axes for a in row if isinstance(a, Dim)}
    module = module.eval()
    if exporter is None:
        exporter = "dynamo" if _has_dynamo_exporter() else "torchscript"
    result = ExportResult(os.fspath(path), "", list(dims.values()), exporter)
    if exporter == "dynamo":
        cache: dict = {}
        spec = {n: {k: _torch_dim(a, cache) for k, a in enumerate(row) if isinstance(a, Dim)} or None
                for n, row in zip(names, axes)}
        try:
            program = torch.export.export(module, example_inputs, dynamic_shapes=spec)
        except Exception as e:  # torch's own refusal: its message, with the suggested fixes
            raise ExportError(f"torch.export refused the module: {e}") from e
        # torch keys its ranges by symbol (s0, s77, ...): the example inputs' placeholders say
        # which symbol each Dim axis became.
        symbol_to_dim = {}
        user_inputs = set(program.graph_signature.user_inputs)
        placeholders = [n for n in program.graph.nodes if n.op == "placeholder" and n.name in user_inputs]
        for node, row in zip(placeholders, axes):
            val = node.meta.get("val")
            for k, a in enumerate(row):
                if isinstance(a, Dim) and val is not None:
                    symbol_to_dim[str(val.shape[k])] = a.name
        for sym, vr in program.range_constraints.items():
            try:
                hi = int(vr.upper)
            except (TypeError, ValueError, OverflowError):
                hi = None
            result.torch_ranges[symbol_to_dim.get(str(sym), str(sym))] = (int(vr.lower), hi)
        try:
            onnx_program = torch.onnx.export(program, (), dynamo=True, opset_version=max(opset, 18), verbose=False)
        except Exception as e:
            raise ExportError(_torch_failure("torch.onnx.export (dynamo exporter)", max(opset, 18), e)) from e
        model_bytes = onnx_program.model_proto.SerializeToString()
    elif exporter == "torchscript":
        buf = io.BytesIO()
        dynamic_axes = {n: {k: a.name for k, a in enumerate(row) if isinstance(a, Dim)} for n, row in zip(names, axes)}
        extra = {}
        if "dynamo" in inspect.signature(torch.onnx.export).parameters:
            extra["dynamo"] = False  # torch 2.x: the TorchScript exporter, as torch 1.13 has it
        with _no_fast_paths(module):
            try:
                torch.onnx.export(module, example_inputs, buf, input_names=names, opset_version=opset,
                                  dynamic_axes={n: d for n, d in dynamic_axes.items() if d}, **extra)
            except Exception as e:  # torch's refusal, as ExportError naming the op and the opset
                raise ExportError(_torch_failure("torch.onnx.export (TorchScript exporter)", opset, e)) from e
        model_bytes = buf.getvalue()
    else:
        raise ExportError(f"exporter must be 'dynamo' or 'torchscript', got {exporter!r}")
    inputs = {n: [a.name if isinstance(a, Dim) else int(a) for a in row] for n, row in zip(names, axes)}
    result.summary = export_onnx(model_bytes, path, dims=list(dims.values()), inputs=inputs, method=method,
                                 delegate=delegate, fusion=fusion)
    _compare_ranges(result)
    return result


@contextlib.contextmanager
def _no_fast_paths(module):
    """Grad enabled and every float parameter requiring grad while torch traces: torch 1.13's
    nn.TransformerEncoder (and MultiheadAttention) otherwise take their inference fast path
    under no_grad or frozen weights (nested tensors, aten::logical_not, _transformer_encoder_layer_fwd),
    which the TorchScript exporter cannot write. The parameters' flags are restored after."""
    import torch

    frozen = [p for p in module.parameters() if not p.requires_grad and p.is_floating_point()]
    for p in frozen:
        p.requires_grad_(True)
    try:
        with torch.enable_grad():
            yield
    finally:
        for p in frozen:
            p.requires_grad_(False)


def _torch_failure(exporter: str, opset: int, e: Exception) -> str:
    """torch's exception as one sentence naming the op (when torch names one) and the opset."""
    text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    op = re.search(r"operator '([\w:.]+)'|(aten::\w+|prim::\w+|onnx::\w+)", str(e))
    name = (op.group(1) or op.group(2)) if op else None
    what = f"op '{name}'" if name else "the module"
    return (f"{exporter} cannot write {what} at ONNX opset {opset} ({type(e).__name__}: {text}); try another opset "
            "(kiln.export(..., opset=N)), or torch 2.x with onnxscript for the dynamo exporter")


def _compare_ranges(result: ExportResult) -> None:
    """Notes where torch's recorded range of a dim differs from the bounds Kiln declared, where
    the model's guards narrowed a dim, and the guards Kiln kept on each dim (constraints torch
    did not state)."""
    from . import load

    method = load(result.path).methods["forward"] if result.path else None
    for d in result.dims:
        torch_range = result.torch_ranges.get(d.name)
        if torch_range is not None and (torch_range[0] > d.min or (torch_range[1] is not None and torch_range[1] < d.max)):
            result.notes.append(f"{d.name}: torch recorded [{torch_range[0]}, {torch_range[1]}], Kiln declared "
                                f"[{d.min}, {d.max}]")
        if method is not None:
            for pd in method.dims:
                if pd.name == d.name and (pd.min, pd.max, pd.step) != (d.min, d.max, d.step):
                    result.notes.append(f"{d.name}: declared {d!r}, Kiln's contract admits {pd!r} (narrowed by the "
                                        f"model's guards; the summary says which node needs what)")
            for g in method.guards:
                if re.search(rf"\b{re.escape(d.name)}\b", g):
                    result.notes.append(f"{d.name}: Kiln guards '{g}' (checked at bind)")
