"""kiln's Python runtime bindings: contract, runs at many shapes (bit-identical to kiln_runner),
contract errors as kiln.ContractError with the runtime's message, threads, and export."""
import os
import subprocess

import numpy as np
import pytest

import kiln

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("KILN_BUILD_DIR", os.path.join(ROOT, "build"))
RUNNER = os.path.join(BUILD, "kiln_runner")
MLP = os.path.join(ROOT, "examples", "mlp.kiln")  # x: f32 [batch, 16], batch in [1, 64]
CNN = os.path.join(ROOT, "examples", "cnn.kiln")


def runner(*args):
    return subprocess.run([RUNNER, *args], capture_output=True, text=True)


def test_version():
    assert kiln.__version__.count(".") >= 2


def test_contract_is_readable():
    p = kiln.load(MLP)
    assert p.method_names == ["forward"]
    m = p.methods["forward"]
    (x,) = m.inputs
    assert x.name == "x" and x.dtype == np.float32
    assert x.shape == (kiln.Dim("batch", 1, 64), 16)
    assert m.outputs[0].shape[0] == kiln.Dim("batch", 1, 64)
    assert m.arena_bytes > 0
    assert "batch" in repr(m)


@pytest.mark.parametrize("batch", [1, 2, 7, 33, 64])
def test_runs_bit_identical_to_kiln_runner(tmp_path, batch):
    m = kiln.load(MLP).methods["forward"]
    x = np.random.default_rng(batch).standard_normal((batch, 16)).astype(np.float32)
    (y,) = m.run(x)
    assert y.shape == (batch, 10) and y.dtype == np.float32
    np.save(tmp_path / "x.npy", x)
    r = runner(f"--model_path={MLP}", f"--inputs={tmp_path / 'x.npy'}", f"--output_file={tmp_path / 'y'}",
               "--output_format=npy", "--print_output=none")
    assert r.returncode == 0, r.stdout + r.stderr
    want = np.load(tmp_path / "y-0.npy")
    assert np.array_equal(y, want)  # bit for bit: same program, same kernels


def test_outputs_are_copies():
    m = kiln.load(MLP).methods["forward"]
    a = m(np.ones((2, 16), np.float32))
    b = m(np.zeros((3, 16), np.float32))
    assert a.shape == (2, 10) and b.shape == (3, 10)
    assert not np.array_equal(a[:2], b[:2])  # the first result was not overwritten


def runner_error(*args):
    r = runner(f"--model_path={MLP}", *args)
    assert r.returncode != 0
    line = [l for l in (r.stderr + r.stdout).splitlines() if l.startswith("error: ")][0]
    return line[len("error: "):]


def test_contract_errors_carry_the_runtime_message():
    m = kiln.load(MLP).methods["forward"]
    with pytest.raises(kiln.ContractError) as e:
        m(np.zeros((65, 16), np.float32))
    assert isinstance(e.value, ValueError)
    assert "65" in str(e.value) and "64" in str(e.value)
    # The same words kiln_runner prints for the same shape.
    assert str(e.value) in runner_error("--input_shapes=65x16")
    with pytest.raises(kiln.ContractError) as e:
        m.check([(4, 15)])
    assert str(e.value) in runner_error("--input_shapes=4x15")
    with pytest.raises(kiln.ContractError, match="rank"):
        m(np.zeros((4,), np.float32))
    with pytest.raises(kiln.ContractError, match="takes 1 inputs"):
        m(np.zeros((4, 16), np.float32), np.zeros((4, 16), np.float32))
    with pytest.raises(kiln.ContractError, match="must be float32"):
        m(np.zeros((4, 16), np.complex64))
    m.check([(64, 16)])  # admissible: no error


def test_zero_copy_input_views():
    m = kiln.load(CNN).methods["forward"]
    x = np.random.default_rng(3).standard_normal((2, 3, 24, 20)).astype(np.float32)
    (view,) = m.bind((2, 3, 24, 20))
    assert view.shape == x.shape and view.dtype == np.float32 and view.flags.writeable
    addr = view.__array_interface__["data"][0]
    np.copyto(view, x)
    (y,) = m.execute()
    np.testing.assert_array_equal(y, m(x))  # the same as a call that copies the input
    (again,) = m.bind((2, 3, 24, 20))
    assert again.__array_interface__["data"][0] == addr  # the same arena memory: no copy is made
    m.cpu_threads = 2  # re-creates the method; the old view stays valid memory (kept alive)
    view[...] = 0
    with pytest.raises(kiln.ContractError):
        m.bind((2, 3, 24, 65))


def test_dtype_conversion_and_layout():
    m = kiln.load(MLP).methods["forward"]
    x = np.random.default_rng(0).standard_normal((8, 16))
    assert np.array_equal(m(x), m(x.astype(np.float32)))  # float64 is converted
    xt = np.asfortranarray(x.astype(np.float32))
    assert np.array_equal(m(xt), m(np.ascontiguousarray(xt)))  # any layout


def test_threads_give_the_same_outputs():
    p = kiln.load(CNN)
    one, two = p.method("forward", cpu_threads=1), p.method("forward", cpu_threads=2)
    shape = [a if isinstance(a, int) else a.max for a in one.inputs[0].shape]
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    assert two.cpu_threads == 2
    np.testing.assert_allclose(one(x), two(x), rtol=1e-5, atol=1e-5)
    one.cpu_threads = 2
    assert one.cpu_threads == 2
    with pytest.raises(ValueError, match="cpu_threads"):
        one.cpu_threads = 0


def test_nan_input_is_refused_delegated_and_carried_portable(tmp_path):
    """The non-finite rule: a delegate with a step that would drop NaN (mobilenet_v2's strided
    depthwise layers run on XNNPACK's operator) refuses a NaN input (ExecutionError naming the
    input and element); the portable kernels carry it to the outputs."""
    out = str(tmp_path / "mobilenet.kiln")
    kiln.export_onnx(os.path.join(ROOT, "zoo", "models", "mobilenet_v2.onnx"), out,
                     dims={"batch": (1, 2), "H": (32, 64), "W": (32, 64)})
    p = kiln.load(out)
    delegated, portable = p.method("forward"), p.method("forward", use_delegate=False)
    assert delegated.coverage["running"], delegated.coverage
    shape = [a if isinstance(a, int) else a.min for a in delegated.inputs[0].shape]
    x = np.ones(shape, np.float32)
    x.flat[x.size // 2] = np.nan
    with pytest.raises(kiln.ExecutionError, match=f"holds NaN at element {x.size // 2} "):
        delegated(x)
    y = portable(x)
    assert np.isnan(np.asarray(y if not isinstance(y, (list, tuple)) else y[0])).any()
    x.flat[x.size // 2] = 1.0
    delegated(x)  # a clean input runs


def test_nan_input_never_comes_out_as_a_number(tmp_path):
    """resnet_small: where every delegated step keeps NaN (Kiln's kernels, x86-64 with AVX2) the
    NaN reaches the outputs as on the portable path; elsewhere the input is refused."""
    out = str(tmp_path / "resnet.kiln")
    kiln.export_onnx(os.path.join(ROOT, "zoo", "models", "resnet_small.onnx"), out, dims={"batch": (1, 8)})
    delegated = kiln.load(out).method("forward")
    shape = [a if isinstance(a, int) else a.min for a in delegated.inputs[0].shape]
    x = np.ones(shape, np.float32)
    x.flat[x.size // 2] = np.nan
    try:
        y = delegated(x)
    except kiln.ExecutionError as e:
        assert f"holds NaN at element {x.size // 2} " in str(e)
        return
    assert np.isnan(np.asarray(y if not isinstance(y, (list, tuple)) else y[0])).all()


def test_coverage_from_python():
    m = kiln.load(CNN).methods["forward"]
    c = m.coverage
    assert set(c) >= {"backend", "delegated_instructions", "instructions", "flops_fraction", "declined", "running"}


def test_error_classes():
    assert issubclass(kiln.ContractError, ValueError) and issubclass(kiln.ExportError, ValueError)
    assert issubclass(kiln.ProgramError, OSError) and issubclass(kiln.ExecutionError, RuntimeError)
    for e in (kiln.ContractError, kiln.ProgramError, kiln.ExportError, kiln.ExecutionError):
        assert issubclass(e, kiln.KilnError)


def test_program_errors(tmp_path):
    with pytest.raises(kiln.ProgramError, match="cannot open"):
        kiln.load(tmp_path / "missing.kiln")
    with pytest.raises(kiln.ProgramError, match="directory"):
        kiln.load(tmp_path)
    bad = tmp_path / "bad.kiln"
    data = bytearray(open(MLP, "rb").read())
    data[-1] ^= 1
    bad.write_bytes(bytes(data))
    with pytest.raises(kiln.ProgramError, match="checksum"):
        kiln.load(bad)
    with pytest.raises(KeyError):
        kiln.Method(kiln.load(MLP), "nope")


def test_memory_follows_the_shape_and_tightened_bounds():
    p = kiln.load(CNN)  # pixels: [batch, 3, H, W], batch in [1, 4], H and W in [1, 64]
    full = p.method("forward")
    assert full.arena_bytes_in_use == full.arena_bytes
    x = np.ones((1, 3, 16, 16), np.float32)
    y = full(x)
    small = full.arena_bytes_in_use
    assert small * 8 < full.arena_bytes
    capped = p.method("forward", max_shapes=[(1, 3, 16, 16)])
    assert capped.arena_bytes == small
    np.testing.assert_array_equal(capped(x), y)
    with pytest.raises(kiln.ContractError, match=r"is 17, above 16, the most this Method was created for"):
        capped(np.ones((1, 3, 17, 16), np.float32))


@pytest.mark.parametrize("use_delegate", [True, False])
def test_input_data_a_kernel_refuses_is_an_execution_error(tmp_path, use_delegate):
    """A token id past the embedding table: the shapes are admitted (not a ContractError), the
    data is refused: kiln.ExecutionError (a KilnError) naming the instruction, on either path."""
    out = str(tmp_path / "bert.kiln")
    kiln.export_onnx(os.path.join(ROOT, "zoo", "models", "bert_tiny.onnx"), out,
                     dims={"batch": (1, 4), "seq": (1, 128)})
    m = kiln.load(out).method("forward", use_delegate=use_delegate)
    ids = np.zeros((1, 8), np.int64)
    mask = np.ones((1, 8), np.int64)
    m(ids, mask)  # in range: runs
    ids[0, 3] = 10 ** 6
    with pytest.raises(kiln.ExecutionError, match="out of range") as e:
        m(ids, mask)
    assert isinstance(e.value, kiln.KilnError) and not isinstance(e.value, kiln.ContractError)
