"""kiln.export_onnx from Python, Dim equality across inputs, and the diagnosis loop end to end."""
import os
import sys

import numpy as np
import pytest

import kiln

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "..", "examples"))


def two_inputs_sharing_a_dim() -> "onnx.ModelProto":
    """y = x * 2 + z, with x and z both [N, 4]: one dim N shared by both inputs."""
    g = helper.make_graph(
        [helper.make_node("Mul", ["x", "two"], ["x2"]), helper.make_node("Add", ["x2", "z"], ["y"])], "shared",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4]),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])],
        [onnx.numpy_helper.from_array(np.array(2.0, np.float32), "two")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_export_and_run_with_a_shared_dim(tmp_path):
    path = tmp_path / "shared.kiln"
    summary = kiln.export_onnx(two_inputs_sharing_a_dim(), path, dims={"N": (1, 8)}, delegate="none")
    assert "N in [1, 8]" in summary
    m = kiln.load(path).methods["forward"]
    assert m.inputs[0].shape == (kiln.Dim("N", 1, 8), 4) and m.inputs[1].shape == (kiln.Dim("N", 1, 8), 4)
    for n in (1, 3, 8):
        x = np.arange(n * 4, dtype=np.float32).reshape(n, 4)
        z = np.ones((n, 4), np.float32)
        assert np.array_equal(m(x, z), x * 2 + z)
    with pytest.raises(kiln.ContractError, match="N"):
        m(np.zeros((3, 4), np.float32), np.zeros((5, 4), np.float32))  # the two N differ
    with pytest.raises(kiln.ContractError):
        m(np.zeros((9, 4), np.float32), np.zeros((9, 4), np.float32))  # above the bound


def test_export_from_bytes_and_path_agree(tmp_path):
    model = two_inputs_sharing_a_dim()
    onnx.save(model, tmp_path / "m.onnx")
    kiln.export_onnx(tmp_path / "m.onnx", tmp_path / "a.kiln", dims=[kiln.Dim("N", 2, 8, 2)])
    kiln.export_onnx(model.SerializeToString(), tmp_path / "b.kiln", dims=["N=2..8:2"])
    assert (tmp_path / "a.kiln").read_bytes() == (tmp_path / "b.kiln").read_bytes()
    m = kiln.load(tmp_path / "a.kiln").methods["forward"]
    assert m.dims == [kiln.Dim("N", 2, 8, 2)]
    with pytest.raises(kiln.ContractError, match="step"):
        m.check([(3, 4), (3, 4)])


def test_export_errors(tmp_path):
    model = two_inputs_sharing_a_dim()
    with pytest.raises(kiln.ExportError, match="use N=8..96:8 or N=8..104:8"):
        kiln.export_onnx(model, tmp_path / "x.kiln", dims={"N": (8, 100, 8)})
    with pytest.raises(kiln.ExportError, match="N"):
        kiln.export_onnx(model, tmp_path / "x.kiln")  # N is dynamic in the model and undeclared
    with pytest.raises(ValueError):
        kiln.export_onnx(model, tmp_path / "x.kiln", dims=["N=oops"])
    with pytest.raises(kiln.ExportError):
        kiln.export_onnx(b"not a model", tmp_path / "x.kiln")
    assert not (tmp_path / "x.kiln").exists()


def test_diagnosis_loop(tmp_path, capsys):
    import diagnosis_loop

    assert diagnosis_loop.main(str(tmp_path)) == 0
    out = capsys.readouterr().out
    assert "kiln.ContractError:" in out and "256" in out
    assert "logits at 256x256: (1, 10)" in out
    assert "delegated: " in out


def test_buckets_called_as_one_method(tmp_path):
    """kiln export --bucket N=4,8: program.method("forward") is a BucketedMethod; N = 3 runs the
    bucket of 4 and the output, cut back to 3 rows, equals the dynamic program's."""
    import subprocess
    build = os.environ.get("KILN_BUILD_DIR", os.path.join(HERE, "..", "..", "build"))
    src = tmp_path / "shared.onnx"
    onnx.save(two_inputs_sharing_a_dim(), str(src))
    bucketed, dynamic = tmp_path / "b.kiln", tmp_path / "d.kiln"
    r = subprocess.run([os.path.join(build, "kiln"), "export", str(src), "-o", str(bucketed), "--bucket", "N=4,8"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    kiln.export_onnx(str(src), dynamic, dims={"N": (1, 8)})
    m = kiln.load(bucketed).method("forward")
    assert isinstance(m, kiln.BucketedMethod) and m.sizes == [4, 8] and m.dim == "N"
    x, z = np.arange(12, dtype=np.float32).reshape(3, 4), np.ones((3, 4), np.float32)
    y = m(x, z)
    assert y.shape == (3, 4) and m.last_bucket == "forward@N=4"
    np.testing.assert_array_equal(y, kiln.load(dynamic).methods["forward"](x, z))
    with pytest.raises(kiln.ContractError, match="'N' is 9, above the largest bucket 8"):
        m(np.ones((9, 4), np.float32), np.ones((9, 4), np.float32))


def test_scalar_input_runtime_branch_and_empty_tensors(tmp_path):
    """A scalar input (inputs={"sr": ()}) chooses a branch at run time; a dim may be 0."""
    then_g = helper.make_graph([helper.make_node("Mul", ["x", "two"], ["t"])], "then", [],
                               [helper.make_tensor_value_info("t", TensorProto.FLOAT, None)])
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [],
                               [helper.make_tensor_value_info("e", TensorProto.FLOAT, None)])
    g = helper.make_graph(
        [helper.make_node("Equal", ["sr", "k16"], ["is16"]),
         helper.make_node("If", ["is16"], ["y"], then_branch=then_g, else_branch=else_g)], "rate",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3]),
         helper.make_tensor_value_info("sr", TensorProto.INT64, None)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])],
        [onnx.numpy_helper.from_array(np.array(16000, np.int64), "k16"),
         onnx.numpy_helper.from_array(np.array(2.0, np.float32), "two")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "rate.kiln"
    summary = kiln.export_onnx(model, path, dims={"N": (0, 8)}, inputs={"x": ("N", 3), "sr": ()})
    assert "runtime branches: 1 If node" in summary
    m = kiln.load(path).methods["forward"]
    assert m.inputs[1].shape == ()
    for n in (0, 1, 8):
        x = np.arange(n * 3, dtype=np.float32).reshape(n, 3)
        assert np.array_equal(m(x, np.array(16000, np.int64)), x * 2)
        assert np.array_equal(m(x, np.array(8000, np.int64)), -x)


def relu_nchw() -> "onnx.ModelProto":
    """y = Relu(x) over x [batch, 3, H, W]: the arena holds x and y, 24 bytes per batch*H*W."""
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "relu",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, "H", "W"])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3, "H", "W"])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


HUGE = {"batch": (1, 256), "H": (1, 4096), "W": (1, 4096)}  # 96 GiB of arena at the bound


def test_export_refuses_an_arena_over_max_arena(tmp_path):
    with pytest.raises(kiln.ExportError, match=r"^arena at the bound is 96 GiB \(batch=256, H=4096, W=4096\), over the "
                                               r"limit of 64 GiB .*; lower the bounds, e.g. --dim H=1..2048, or raise "
                                               r"--max-arena$"):
        kiln.export_onnx(relu_nchw(), tmp_path / "x.kiln", dims=HUGE, delegate="none")
    assert not (tmp_path / "x.kiln").exists()
    with pytest.raises(kiln.ExportError, match="over the limit of 512 MiB"):
        kiln.export_onnx(relu_nchw(), tmp_path / "x.kiln", dims={"batch": (1, 8), "H": (1, 2048), "W": (1, 2048)},
                         delegate="none", max_arena="512M")
    with pytest.raises(ValueError, match="max_arena: cannot parse the size 'lots'"):
        kiln.export_onnx(relu_nchw(), tmp_path / "x.kiln", dims=HUGE, max_arena="lots")


def test_export_warns_over_warn_arena_and_max_arena_raises_the_limit(tmp_path):
    with pytest.warns(UserWarning, match=r"arena at the bound is 96 GiB .* over the warning threshold of 1 GiB"):
        summary = kiln.export_onnx(relu_nchw(), tmp_path / "big.kiln", dims=HUGE, delegate="none", max_arena=100 << 30)
    assert "memory: arena 96 GiB at the bound (103079215104 bytes), 128 bytes at the minimum" in summary
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kiln.export_onnx(relu_nchw(), tmp_path / "big.kiln", dims=HUGE, delegate="none", max_arena=0, warn_arena=0)


MEMORY_CHILD = r"""
import resource, sys
import kiln
resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))  # 2 GiB of address space: the arena cannot fit
program = kiln.load(sys.argv[1])
try:
    program.method("forward")
except MemoryError as e:
    print("MemoryError:", e)
    sys.exit(0)
except BaseException as e:
    print("wrong exception:", type(e).__name__, e)
    sys.exit(1)
print("no exception")
sys.exit(1)
"""


def test_an_arena_that_cannot_be_allocated_raises_memory_error(tmp_path):
    """README: MemoryError when memory runs out (issue 26 saw ExecutionError). The child caps its
    address space, so the 96 GiB arena fails whatever the machine's memory or overcommit policy."""
    import subprocess
    path = tmp_path / "huge.kiln"
    kiln.export_onnx(relu_nchw(), path, dims=HUGE, delegate="none", max_arena=0, warn_arena=0)
    r = subprocess.run([sys.executable, "-c", MEMORY_CHILD, str(path)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert ("MemoryError: cannot allocate the arena for method 'forward': 96 GiB (103079215104 bytes, planned at the "
            "bound 256x3x4096x4096)") in r.stdout, r.stdout


ZOO = os.path.join(HERE, "..", "..", "zoo")

# (name, model under zoo/, `kiln export` flags, the same options as export_onnx's keywords)
SAME_OPTIONS = [
    ("dynamic_dims", "models/bert_tiny.onnx", ["--dim", "batch=1..4", "--dim", "seq=1..128"],
     dict(dims={"batch": (1, 4), "seq": (1, 128)})),
    ("inputs_and_dims", "models/mobilenet_v2.onnx",
     ["--input", "pixels=1x3xHxW", "--dim", "H=32..224:32", "--dim", "W=32..224:32"],
     dict(inputs={"pixels": ["1x3xHxW"]}, dims={"H": (32, 224, 32), "W": (32, 224, 32)})),
    ("const", "ops/models/if_sample_rate.onnx", ["--dim", "N=0..8", "--const", "sr=16000"],
     dict(dims={"N": (0, 8)}, consts={"sr": 16000})),
    ("bucket_and_pad", "models/gpt_tiny.onnx",
     ["--dim", "batch=1..2", "--bucket", "seq=8,16,32", "--pad", "attention_mask=0", "--pad", "input_ids=3"],
     dict(dims={"batch": (1, 2)}, bucket={"seq": [8, 16, 32]}, pads={"attention_mask": 0, "input_ids": 3})),
    ("no_delegate_no_fusion", "models/bert_tiny.onnx",
     ["--dim", "batch=1..4", "--dim", "seq=1..128", "--delegate", "none", "--no-fusion"],
     dict(dims={"batch": (1, 4), "seq": (1, 128)}, delegate="none", fusion=False)),
    ("method_coverage_arena", "models/resnet_small.onnx",
     ["--dim", "batch=1..8", "--method_name", "infer", "--require-coverage", "0.5", "--max-arena", "2G",
      "--warn-arena", "512M"],
     dict(dims={"batch": (1, 8)}, method="infer", require_coverage=0.5, max_arena="2G", warn_arena="512M")),
]


@pytest.mark.parametrize("name,model,flags,keywords", SAME_OPTIONS, ids=[c[0] for c in SAME_OPTIONS])
def test_cli_and_python_write_the_same_bytes(tmp_path, name, model, flags, keywords):
    """kiln export and kiln.export_onnx parse options with one parser and export through one
    pipeline: the same options write the same .kiln bytes and the same summary."""
    import subprocess
    build = os.environ.get("KILN_BUILD_DIR", os.path.join(HERE, "..", "..", "build"))
    src = os.path.join(ZOO, model)
    cli, py = tmp_path / "cli.kiln", tmp_path / "py.kiln"
    r = subprocess.run([os.path.join(build, "kiln"), "export", src, "-o", str(cli)] + flags, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    summary = kiln.export_onnx(src, py, **keywords)
    assert cli.read_bytes() == py.read_bytes()
    assert r.stdout.endswith(summary), r.stdout + "\n---\n" + summary
    with open(src, "rb") as f:  # the model's bytes go through the same pipeline as its path
        kiln.export_onnx(f.read(), tmp_path / "bytes.kiln", **keywords)
    assert (tmp_path / "bytes.kiln").read_bytes() == py.read_bytes()


def test_export_options_refused_as_the_cli_refuses(tmp_path):
    model = two_inputs_sharing_a_dim()
    with pytest.raises(ValueError, match=r"^bucket is given for dims 'N' and 'M'; buckets go over one dim"):
        kiln.export_onnx(model, tmp_path / "x.kiln", bucket={"N": [4], "M": [8]})
    with pytest.raises(ValueError, match=r"^cannot parse require_coverage '1.5': write the share of FLOPs"):
        kiln.export_onnx(model, tmp_path / "x.kiln", dims={"N": (1, 8)}, require_coverage=1.5)
    with pytest.raises(kiln.ExportError, match=r"^--const x=oops: the value is not a number$"):
        kiln.export_onnx(model, tmp_path / "x.kiln", dims={"N": (1, 8)}, consts={"x": "oops"})
    with pytest.raises(kiln.ExportError, match=r"^--pad names 'w', which is not an input$"):
        kiln.export_onnx(model, tmp_path / "x.kiln", bucket={"N": [4, 8]}, pads={"w": 1})
    with pytest.raises(kiln.ExportError, match=r"^unknown --delegate 'gpu'; use xnnpack or none$"):
        kiln.export_onnx(model, tmp_path / "x.kiln", dims={"N": (1, 8)}, delegate="gpu")
    assert not (tmp_path / "x.kiln").exists()


def test_detection_outputs_have_the_actual_count(tmp_path):
    """NonMaxSuppression's count is data-dependent: each call returns arrays of the size found
    (0, 1, some, the bound), equal to ONNX Runtime's references in the op zoo, also when one
    bind serves calls whose counts go down and up again."""
    import json
    zoo = os.path.join(HERE, "..", "..", "zoo")
    with open(os.path.join(zoo, "ops", "manifest.json")) as f:
        model = next(m for m in json.load(f)["models"] if m["name"] == "yolo_nms")
    path = tmp_path / "yolo_nms.kiln"
    kiln.export_onnx(os.path.join(zoo, model["onnx"]), path, dims={"N": (1, 6)},
                     inputs={"boxes": [1, "N", 4], "scores": [1, 2, "N"]})
    m = kiln.load(path).methods["forward"]
    counts = []
    for case in model["cases"]:
        ins = [np.load(os.path.join(zoo, p)) for p in case["inputs"]]
        want = [np.load(os.path.join(zoo, p)) for p in case["outputs"]]
        got = m(*ins)
        for g, w in zip(got, want):
            assert g.shape == w.shape and np.allclose(g, w, atol=1e-5), case["name"]
        counts.append(got[0].shape[0])
    assert sorted(set(counts)) == [0, 1, 7, 12]
    # One bind at N = 6, then executes whose count goes 12, 0, 12: each sees the whole reservation.
    big = next(c for c in model["cases"] if c["input_shapes"].startswith("1x6x4") and c["output_shapes"][0] == "12x3")
    none = next(c for c in model["cases"] if c["input_shapes"].startswith("1x6x4") and c["output_shapes"][0] == "0x3")
    views = m.bind((1, 6, 4), (1, 2, 6))
    for case in (big, none, big):
        for v, p in zip(views, case["inputs"]):
            np.copyto(v, np.load(os.path.join(zoo, p)))
        assert m.execute()[0].shape == (int(case["output_shapes"][0].split("x")[0]), 3)
