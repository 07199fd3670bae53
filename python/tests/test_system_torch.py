"""kiln.export with Debian's torch 1.13 (/usr/bin/python3, python3-torch from apt), the way the
README gives: scripts/kiln_for_system_python.sh DIR, then PYTHONPATH=DIR /usr/bin/python3.
Skipped where /usr/bin/python3 has no torch (scripts/test.sh installs it)."""
import os
import subprocess
import textwrap

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SYSTEM_PY = "/usr/bin/python3"


def system_python(tmp_path, code):
    subprocess.run(["bash", os.path.join(ROOT, "scripts", "kiln_for_system_python.sh"), str(tmp_path / "py")], check=True,
                   capture_output=True)
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "py"))
    return subprocess.run([SYSTEM_PY, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=600)


@pytest.fixture(scope="module", autouse=True)
def needs_system_torch():
    r = subprocess.run([SYSTEM_PY, "-c", "import torch, torchvision"], capture_output=True) if os.path.exists(SYSTEM_PY) else None
    if r is None or r.returncode != 0:
        pytest.skip("Debian's /usr/bin/python3 has no torch/torchvision (apt install python3-torch python3-torchvision)")


def test_transformer_encoder_with_a_padding_mask_at_opsets_14_16_17(tmp_path):
    """torch 1.13's TransformerEncoder takes its fast path (nested tensors, aten::logical_not)
    under no_grad or frozen weights; kiln.export traces without it, at every opset. A fresh
    model's LayerNorms share weights (Identity nodes) and all fuse, as do both attentions."""
    r = system_python(tmp_path, """
        import numpy as np, torch, torchvision, kiln
        torch.manual_seed(0)
        layer = torch.nn.TransformerEncoderLayer(32, 4, 64, batch_first=True)
        class M(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.enc = torch.nn.TransformerEncoder(layer, 2)
            def forward(self, x, mask):
                return self.enc(x, src_key_padding_mask=mask)
        m = M().eval()
        for p in m.parameters():
            p.requires_grad_(False)  # frozen weights: the fast path's other trigger
        x = torch.randn(2, 10, 32)
        mask = torch.zeros(2, 10, dtype=torch.bool)
        mask[:, 8:] = True
        b, s = kiln.Dim("b", 1, 4), kiln.Dim("s", 1, 64)
        for opset in (14, 16, 17):
            r = kiln.export(m, (x, mask), {"x": {0: b, 1: s}, "mask": {0: b, 1: s}}, path=f"tr{opset}.kiln", opset=opset)
            assert r.exporter == "torchscript", r.exporter
            if opset == 14:  # equal weights shared through Identity, torch 1.13's attention: all fuse
                assert "FusedAttention x2, LayerNormalization x4" in r.summary, r.summary
            f = kiln.load(f"tr{opset}.kiln").methods["forward"]
            x7, m7 = torch.randn(1, 7, 32), torch.zeros(1, 7, dtype=torch.bool)
            m7[:, 5:] = True
            # Eager torch without its fast path (an input requiring grad), whose output would drop
            # the padded rows; the kept rows compare.
            ref = m(x7.clone().requires_grad_(True), m7).detach().numpy()
            got = f(x7.numpy(), m7.numpy())
            keep = ~m7.numpy()
            assert np.allclose(got[keep], ref[keep], atol=1e-4), (opset, np.abs(got[keep] - ref[keep]).max())
        assert all(not p.requires_grad for p in m.parameters())  # the flags are restored
        print("ok", torchvision.__version__)
        """)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ok 0.14" in r.stdout


def test_a_torch_failure_is_an_export_error_naming_the_op_and_opset(tmp_path):
    r = system_python(tmp_path, """
        import torch, kiln
        class F(torch.nn.Module):
            def forward(self, x):
                return torch.fft.rfft(x).abs()
        try:
            kiln.export(F(), (torch.randn(2, 16),), None, path="f.kiln", opset=17)
        except kiln.ExportError as e:
            print("ExportError:", e)
        """)
    assert r.returncode == 0, r.stdout + r.stderr
    assert ("ExportError: torch.onnx.export (TorchScript exporter) cannot write op 'aten::fft_rfft' at ONNX opset 17 "
            "(UnsupportedOperatorError:") in r.stdout, r.stdout
