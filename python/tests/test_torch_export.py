"""kiln.export from torch modules with torch.export-style Dims (torch 2.x through the dynamo
exporter when onnxscript is there, else torch.onnx.export with dynamic_axes)."""
import numpy as np
import pytest

import kiln

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")

EXPORTERS = ["torchscript"] + (["dynamo"] if kiln.torch_export._has_dynamo_exporter() else [])


def torch_dim(name, lo, hi):
    if hasattr(torch, "export") and hasattr(torch.export, "Dim"):
        return torch.export.Dim(name, min=lo, max=hi)
    return kiln.Dim(name, lo, hi)  # torch 1.13: kiln's Dim has the same meaning


class TwoInputs(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(4, 3)

    def forward(self, x, z):
        return torch.relu(self.proj(x * 2 + z))


class SmallCnn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.c1 = torch.nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.c2 = torch.nn.Conv2d(8, 8, 3)  # no padding: the output needs H, W >= 3 after c1
        self.fc = torch.nn.Linear(8, 5)

    def forward(self, x):
        y = torch.relu(self.c2(torch.relu(self.c1(x))))
        return self.fc(y.mean(dim=(2, 3)))


@pytest.mark.parametrize("exporter", EXPORTERS)
def test_two_inputs_share_a_dim(tmp_path, exporter):
    torch.manual_seed(0)
    module = TwoInputs().eval()
    n = torch_dim("N", 1, 16)
    path = tmp_path / "two.kiln"
    r = kiln.export(module, (torch.randn(3, 4), torch.randn(3, 4)), dynamic_shapes={"x": {0: n}, "z": {0: n}},
                    path=path, exporter=exporter)
    assert r.exporter == exporter and r.dims == [kiln.Dim("N", 1, 16)]
    m = kiln.load(path).methods["forward"]
    assert [t.name for t in m.inputs] == ["x", "z"]
    assert m.inputs[0].shape == (kiln.Dim("N", 1, 16), 4) and m.inputs[1].shape == (kiln.Dim("N", 1, 16), 4)
    for rows in (1, 5, 16):
        x, z = torch.randn(rows, 4), torch.randn(rows, 4)
        with torch.no_grad():
            want = module(x, z).numpy()
        np.testing.assert_allclose(m(x.numpy(), z.numpy()), want, rtol=1e-5, atol=1e-6)
    with pytest.raises(kiln.ContractError, match="N"):
        m(np.zeros((2, 4), np.float32), np.zeros((3, 4), np.float32))


@pytest.mark.parametrize("exporter", EXPORTERS)
def test_omitted_axes_are_static(tmp_path, exporter):
    module = SmallCnn().eval()
    h = torch_dim("H", 8, 64)
    path = tmp_path / "cnn.kiln"
    kiln.export(module, (torch.randn(1, 3, 32, 32),), dynamic_shapes=({2: h},), path=path, exporter=exporter)
    m = kiln.load(path).methods["forward"]
    assert m.inputs[0].shape == (1, 3, kiln.Dim("H", 8, 64), 32)
    x = torch.randn(1, 3, 40, 32)
    with torch.no_grad():
        np.testing.assert_allclose(m(x.numpy()), module(x).numpy(), rtol=1e-4, atol=1e-5)
    with pytest.raises(kiln.ContractError, match="32"):
        m(np.zeros((1, 3, 40, 40), np.float32))  # W was left out: static at 32


def test_unbounded_axes_are_named_with_the_fix(tmp_path):
    if not hasattr(torch, "export") or not hasattr(torch.export.Dim, "AUTO"):
        pytest.skip("torch without Dim.AUTO")
    D = torch.export.Dim
    with pytest.raises(kiln.ExportError) as e:
        kiln.export(TwoInputs(), (torch.randn(3, 4), torch.randn(3, 4)),
                    dynamic_shapes={"x": {0: D.AUTO}, "z": {0: D.DYNAMIC}}, path=tmp_path / "x.kiln")
    msg = str(e.value)
    assert "input 'x' axis 0 is Dim.AUTO: write Dim('x_0', min=1, max=" in msg
    assert "input 'z' axis 0 is Dim.DYNAMIC" in msg
    with pytest.raises(kiln.ExportError, match="has no max"):
        kiln.export(TwoInputs(), (torch.randn(3, 4), torch.randn(3, 4)),
                    dynamic_shapes={"x": {0: D("N")}, "z": {0: D("N")}}, path=tmp_path / "x.kiln")


def test_kiln_dim_without_torch_export(tmp_path):
    n = kiln.Dim("N", 1, 8)
    r = kiln.export(TwoInputs(), (torch.randn(2, 4), torch.randn(2, 4)), dynamic_shapes=[{0: n}, {0: n}],
                    path=tmp_path / "k.kiln", exporter="torchscript")
    assert r.dims == [n]
    with pytest.raises(kiln.ExportError, match="outside"):
        kiln.export(TwoInputs(), (torch.randn(9, 4), torch.randn(9, 4)), dynamic_shapes=[{0: n}, {0: n}],
                    path=tmp_path / "k.kiln", exporter="torchscript")
    with pytest.raises(kiln.ExportError, match="not inputs of forward"):
        kiln.export(TwoInputs(), (torch.randn(2, 4), torch.randn(2, 4)), dynamic_shapes={"y": {0: n}},
                    path=tmp_path / "k.kiln")


@pytest.mark.skipif("dynamo" not in EXPORTERS, reason="needs torch 2.x and onnxscript")
def test_torch_ranges_agree_with_kiln(tmp_path):
    """H in [8, 64]: torch records exactly that range; Kiln's one guard (the unpadded conv
    needs ceildiv(H,2) - 2 >= 1, i.e. H >= 5) holds over all of it."""
    r = kiln.export(SmallCnn(), (torch.randn(1, 3, 32, 32),), dynamic_shapes=({2: torch.export.Dim("H", min=8, max=64)},),
                    path=tmp_path / "cnn.kiln", exporter="dynamo")
    assert r.torch_ranges["H"] == (8, 64)
    assert not [n for n in r.notes if "torch recorded" in n]
    m = kiln.load(tmp_path / "cnn.kiln").methods["forward"]
    for h in (8, 9, 64):
        m.check([(1, 3, h, 32)])


def test_kiln_bounds_tighter_than_declared(tmp_path):
    """H in [1, 64] declared: the unpadded conv needs H >= 5. torch.export refuses the range
    and suggests Dim('H', min=5, max=64); the TorchScript path exports, Kiln narrows H to the
    range its guards admit, [5, 64], and refuses H < 5 at bind with a ContractError."""
    dim = torch_dim("H", 1, 64)
    if "dynamo" in EXPORTERS:
        with pytest.raises(kiln.ExportError, match=r"Dim\('H', min=5, max=64\)"):
            kiln.export(SmallCnn(), (torch.randn(1, 3, 32, 32),), dynamic_shapes=({2: dim},),
                        path=tmp_path / "d.kiln", exporter="dynamo")
    r = kiln.export(SmallCnn(), (torch.randn(1, 3, 32, 32),), dynamic_shapes=({2: dim},), path=tmp_path / "t.kiln",
                    exporter="torchscript")
    assert any(n.startswith("H: declared Dim('H', min=1, max=64), Kiln's contract admits Dim('H', min=5, max=64)")
               for n in r.notes), r.notes
    m = kiln.load(tmp_path / "t.kiln").methods["forward"]
    m.check([(1, 3, 5, 32)])
    with pytest.raises(kiln.ContractError):
        m.check([(1, 3, 4, 32)])
