"""The README's Python promises, each as a test (issue 26): one call form for shapes in check and
bind, inputs by name, bounded Dims, dims as ints, views that stop being the input at the next
call, and a bucketed method with Method's interface in program.methods."""
import os

import numpy as np
import pytest

import kiln

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CNN = os.path.join(ROOT, "examples", "cnn.kiln")  # pixels: f32 [batch, 3, H, W]


def masked_sum():
    """y[b, s, :] = x[b, s, :] @ w * mask[b, s]: two inputs sharing b and seq."""
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["xw"]), helper.make_node("Unsqueeze", ["mask", "axis"], ["m3"]),
         helper.make_node("Mul", ["xw", "m3"], ["y"])], "masked",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", "seq", 4]),
         helper.make_tensor_value_info("mask", TensorProto.FLOAT, ["b", "seq"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["b", "seq", 4])],
        [onnx.numpy_helper.from_array(np.arange(16, dtype=np.float32).reshape(4, 4) / 8, "w"),
         onnx.numpy_helper.from_array(np.array([2], np.int64), "axis")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    d = tmp_path_factory.mktemp("paths")
    dynamic, bucketed = d / "dynamic.kiln", d / "bucketed.kiln"
    kiln.export_onnx(masked_sum(), dynamic, dims={"b": (1, 2), "seq": (1, 8)})
    kiln.export_onnx(masked_sum(), bucketed, dims={"b": (1, 2)}, bucket={"seq": [4, 8]}, pads={"mask": 0})
    return kiln.load(dynamic), kiln.load(bucketed)


def test_check_and_bind_take_the_same_shapes():
    m = kiln.load(CNN).methods["forward"]
    m.check((1, 3, 7, 5))  # one shape per input, as bind takes it (was TypeError: 'int' object is not iterable)
    m.check([(1, 3, 7, 5)])  # or one list of them
    m.bind((1, 3, 7, 5))
    m.bind([(1, 3, 7, 5)])
    for call in (m.check, m.bind):
        with pytest.raises(kiln.ContractError, match="outside its range"):
            call((1, 3, 7, 500))
        with pytest.raises(TypeError, match="a shape is a sequence of ints"):
            call("1x3x7x5")


def test_inputs_by_name_or_position(programs):
    dynamic, _ = programs
    f = dynamic.methods["forward"]
    x = np.random.default_rng(1).standard_normal((2, 3, 4)).astype(np.float32)
    mask = np.array([[1, 0, 1], [1, 1, 0]], np.float32)
    want = f(x, mask)
    np.testing.assert_array_equal(f(x=x, mask=mask), want)
    np.testing.assert_array_equal(f(mask=mask, x=x), want)
    np.testing.assert_array_equal(f(x, mask=mask), want)
    with pytest.raises(TypeError, match="unexpected keyword argument 'masks'; its inputs are 'x', 'mask'"):
        f(x=x, masks=mask)
    with pytest.raises(TypeError, match="missing input 'mask'"):
        f(x=x)
    with pytest.raises(TypeError, match="got input 'x' both by position and by name"):
        f(x, x=x)


def test_a_dim_states_its_bound():
    with pytest.raises(TypeError, match=r"kiln.Dim\('batch'\) needs max=: every dynamic dim is bounded"):
        kiln.Dim("batch")
    with pytest.raises(ValueError, match="needs 0 <= min <= max"):
        kiln.Dim("batch", 4, 2)
    assert kiln.Dim("batch", max=8) == kiln.Dim("batch", 1, 8, 1)


def test_a_bare_int_in_dims_pins_the_dim(tmp_path):
    kiln.export_onnx(masked_sum(), tmp_path / "pinned.kiln", dims={"b": 2, "seq": (1, 8)})
    m = kiln.load(tmp_path / "pinned.kiln").methods["forward"]
    assert m.inputs[0].shape == (2, kiln.Dim("seq", 1, 8), 4)  # static 2, not 1..2
    with pytest.raises(TypeError, match=r"dims\['b'\] is 2.5: give an int to pin the dim"):
        kiln.export_onnx(masked_sum(), tmp_path / "bad.kiln", dims={"b": 2.5, "seq": (1, 8)})


def test_a_view_stops_being_the_input_at_the_next_call():
    m = kiln.load(CNN).methods["forward"]
    x = np.random.default_rng(2).standard_normal((1, 3, 8, 8)).astype(np.float32)
    (view,) = m.bind((1, 3, 8, 8))
    view[...] = x
    (first,) = m.execute()
    (again,) = m.execute()  # the views are still the input: the same result
    np.testing.assert_array_equal(first, again)
    m(np.zeros((1, 3, 8, 8), np.float32))  # a call: its input replaces what the view held
    view[...] = x
    with pytest.raises(kiln.ExecutionError, match=r"execute\(\) runs on what the views of the last bind\(\) hold"):
        m.execute()
    m.check((1, 3, 8, 8))  # check rebinds the shapes too
    with pytest.raises(kiln.ExecutionError, match="bind\\(\\) again"):
        m.execute()
    (view,) = m.bind((1, 3, 8, 8))
    view[...] = x
    np.testing.assert_array_equal(m.execute()[0], first)


def test_unknown_method_is_a_key_error_naming_the_methods(programs):
    dynamic, _ = programs
    with pytest.raises(KeyError, match="no method 'backward' in the program; it has 'forward'"):
        dynamic.methods["backward"]


def test_a_bucketed_method_has_the_interface_of_a_method(programs):
    dynamic, bucketed = programs
    f = bucketed.methods["forward"]  # was KeyError: the buckets are one method
    assert isinstance(f, kiln.BucketedMethod) and "forward" in bucketed.methods
    assert [t.name for t in f.inputs] == ["x", "mask"]
    assert f.inputs[0].shape == (kiln.Dim("b", 1, 2), kiln.Dim("seq", 1, 8), 4)
    assert f.inputs[1].shape_text == "[b, seq]" and f.outputs[0].shape[1] == kiln.Dim("seq", 1, 8)
    assert "the smallest bucket with seq >= the inputs' seq" in f.dispatch
    assert f.check((2, 3, 4), (2, 3)) == "forward@seq=4"
    assert f.check([(1, 5, 4), (1, 5)]) == "forward@seq=8"
    with pytest.raises(kiln.ContractError, match="'seq' is 9, above the largest bucket 8"):
        f.check((1, 9, 4), (1, 9))
    with pytest.raises(kiln.ContractError, match="'b'"):
        f.check((3, 3, 4), (3, 3))
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    mask = np.array([[1, 1, 0], [0, 1, 1]], np.float32)
    want = dynamic.methods["forward"](x, mask)
    np.testing.assert_allclose(f(x, mask), want, rtol=1e-6)
    np.testing.assert_allclose(f(mask=mask, x=x), want, rtol=1e-6)
    # bind: views of each input's corner in the bucket (strided; the rest holds the pad value).
    vx, vm = f.bind((2, 3, 4), (2, 3))
    assert vx.shape == (2, 3, 4) and vm.shape == (2, 3) and vx.flags.writeable and f.last_bucket == "forward@seq=4"
    vx[...] = x
    vm[...] = mask
    (y,) = f.execute()
    np.testing.assert_allclose(y, want, rtol=1e-6)
    f(x, mask)
    with pytest.raises(kiln.ExecutionError, match="bind\\(\\) again"):
        f.execute()
