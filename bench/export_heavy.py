#!/usr/bin/python3
"""Export the heavy-work models of bench/heavy_profile.py that neither the zoo nor the torchvision
sweep has, in the classes issue 25 names (random weights, torch.manual_seed(0)):

- conv1d_separator: a Conv-TasNet-style audio separator over raw samples (encoder Conv1d 1->128,
  k16 s8; four blocks of 1x1 128->256, PReLU, dilated depthwise k3, PReLU, 1x1 256->128 with
  residuals; a sigmoid mask; decoder ConvTranspose1d 128->1). Input x [B, 1, T].
- mel_frontend: a log-mel spectrogram computed as convolutions (a Conv1d with the windowed DFT
  as its 402 filters, n_fft 400, hop 160; power; an 80-band mel MatMul; log). Input x [B, 1, T].
- conv_gru_long: Conv1d front end (40 -> 128, k5) then a 2-layer GRU (hidden 128) over long
  sequences and a Linear head. Input x [B, 40, T].
- transformer_encoder: nn.TransformerEncoder (d_model 256, 4 heads, FFN 1024, 4 layers) over
  token embeddings. Input ids [B, S] (int64).

Run with Debian's /usr/bin/python3 (torch 1.13):
    /usr/bin/python3 bench/export_heavy.py [--out build/bench/onnx_heavy]
"""
import argparse
import math
import os

import torch
from torch import nn

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class SeparatorBlock(nn.Module):
    def __init__(self, c, h, dilation):
        super().__init__()
        self.inp = nn.Conv1d(c, h, 1)
        self.act1 = nn.PReLU()
        self.dw = nn.Conv1d(h, h, 3, padding=dilation, dilation=dilation, groups=h)
        self.act2 = nn.PReLU()
        self.out = nn.Conv1d(h, c, 1)

    def forward(self, x):
        return x + self.out(self.act2(self.dw(self.act1(self.inp(x)))))


class Separator(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Conv1d(1, 128, 16, stride=8, bias=False)
        self.blocks = nn.Sequential(*[SeparatorBlock(128, 256, 2 ** i) for i in range(4)])
        self.mask = nn.Conv1d(128, 128, 1)
        self.dec = nn.ConvTranspose1d(128, 1, 16, stride=8, bias=False)

    def forward(self, x):
        e = torch.relu(self.enc(x))
        return self.dec(e * torch.sigmoid(self.mask(self.blocks(e))))


class MelFrontend(nn.Module):
    def __init__(self, n_fft=400, hop=160, mels=80):
        super().__init__()
        bins = n_fft // 2 + 1
        n = torch.arange(n_fft, dtype=torch.float64)
        k = torch.arange(bins, dtype=torch.float64)[:, None]
        window = 0.5 - 0.5 * torch.cos(2 * math.pi * n / n_fft)
        real = torch.cos(2 * math.pi * k * n / n_fft) * window
        imag = -torch.sin(2 * math.pi * k * n / n_fft) * window
        self.dft = nn.Conv1d(1, 2 * bins, n_fft, stride=hop, bias=False)
        self.dft.weight.data = torch.cat([real, imag]).float()[:, None, :]
        self.bins = bins
        fb = torch.rand(bins, mels)  # a stand-in filterbank: the cost is the same
        self.register_buffer("fb", fb / fb.sum(0, keepdim=True))

    def forward(self, x):
        spec = self.dft(x)
        power = spec[:, : self.bins] ** 2 + spec[:, self.bins:] ** 2
        return torch.log(torch.matmul(power.transpose(1, 2), self.fb) + 1e-6)


class ConvGru(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(40, 128, 5, padding=2)
        self.gru = nn.GRU(128, 128, num_layers=2, batch_first=True)
        self.head = nn.Linear(128, 32)

    def forward(self, x):
        h = torch.relu(self.conv(x)).transpose(1, 2)
        y, _ = self.gru(h)
        return self.head(y)


class Encoder(nn.Module):
    def __init__(self, vocab=1000, d=256):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        layer = nn.TransformerEncoderLayer(d, 4, 1024, dropout=0.0, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, 4)

    def forward(self, ids):
        return self.enc(self.emb(ids))


MODELS = {
    "conv1d_separator": (Separator, torch.randn(1, 1, 4000), "x", {0: "B", 2: "T"}),
    "mel_frontend": (MelFrontend, torch.randn(1, 1, 4000), "x", {0: "B", 2: "T"}),
    "conv_gru_long": (ConvGru, torch.randn(1, 40, 100), "x", {0: "B", 2: "T"}),
    "transformer_encoder": (Encoder, torch.randint(0, 1000, (1, 16)), "ids", {0: "B", 1: "S"}),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "bench", "onnx_heavy"))
    ap.add_argument("--models", default=",".join(MODELS))
    opts = ap.parse_args()
    os.makedirs(opts.out, exist_ok=True)
    torch.set_num_threads(1)
    for name in opts.models.split(","):
        make, example, input_name, axes = MODELS[name]
        torch.manual_seed(0)
        model = make().eval()
        path = os.path.join(opts.out, name + ".onnx")
        # No torch.no_grad() here: under it torch 1.13 takes the encoder layer's fused fast path,
        # which its ONNX exporter cannot export.
        torch.onnx.export(model, example, path, opset_version=14, input_names=[input_name], output_names=["y"],
                          dynamic_axes={input_name: axes})
        print(name, path, flush=True)


if __name__ == "__main__":
    main()
