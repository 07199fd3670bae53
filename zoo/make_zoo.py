#!/usr/bin/python3
"""Build the Kiln model zoo: small ONNX models with random (seeded) weights.

Run with Debian's python (torch 1.13, torchvision 0.14, onnx 1.12):

    /usr/bin/python3 zoo/make_zoo.py            # writes zoo/models/*.onnx and zoo/manifest.json
    /usr/bin/python3 zoo/make_zoo.py --check-refs   # after make_refs.py: torch vs ORT references

Every model comes with its intended `kiln export` contract (export_args), the list of
reference cases (shapes chosen to include the minimum of every dim, sizes far below the
bound and one case at the bound) and shapes the contract must reject. The reference
outputs themselves come from ONNX Runtime (zoo/reference/make_refs.py), which reads the
manifest written here.
"""

import argparse
import json
import math
import os
import sys
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F

ZOO = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.join(ZOO, "models")
OPSET = 13


# ---------------------------------------------------------------------------------------
# models
# ---------------------------------------------------------------------------------------

class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = None
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                          nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        s = x if self.shortcut is None else self.shortcut(x)
        return F.relu(y + s)


class ResNetSmall(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16),
                                  nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1))
        self.blocks = nn.Sequential(BasicBlock(16, 16, 1), BasicBlock(16, 32, 2),
                                    BasicBlock(32, 64, 2), BasicBlock(64, 128, 2))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(128, num_classes)

    def forward(self, pixels):
        x = self.blocks(self.stem(pixels))
        return self.fc(torch.flatten(self.pool(x), 1))


def gelu_erf(x):
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


class BertLayer(nn.Module):
    def __init__(self, hidden, heads, ffn):
        super().__init__()
        self.heads, self.dh = heads, hidden // heads
        self.q = nn.Linear(hidden, hidden)
        self.k = nn.Linear(hidden, hidden)
        self.v = nn.Linear(hidden, hidden)
        self.o = nn.Linear(hidden, hidden)
        self.ln1 = nn.LayerNorm(hidden, eps=1e-12)
        self.ff1 = nn.Linear(hidden, ffn)
        self.ff2 = nn.Linear(ffn, hidden)
        self.ln2 = nn.LayerNorm(hidden, eps=1e-12)

    def split(self, x):  # [b, s, hidden] -> [b, heads, s, dh]
        b, s = x.shape[0], x.shape[1]
        return x.view(b, s, self.heads, self.dh).permute(0, 2, 1, 3)

    def forward(self, x, bias):  # bias: [b, 1, 1, s]
        b, s = x.shape[0], x.shape[1]
        q, k, v = self.split(self.q(x)), self.split(self.k(x)), self.split(self.v(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.dh) + bias
        probs = torch.softmax(scores, dim=-1)
        ctx = torch.matmul(probs, v).permute(0, 2, 1, 3).reshape(b, s, self.heads * self.dh)
        x = self.ln1(x + self.o(ctx))
        return self.ln2(x + self.ff2(gelu_erf(self.ff1(x))))


class GptBlock(nn.Module):
    """nanoGPT-style pre-norm block; the causal mask is torch.tril at run time (ONNX Trilu)."""

    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, c = x.size()
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        causal = torch.tril(torch.ones(t, t, device=x.device)).view(1, 1, t, t)
        att = att.masked_fill(causal == 0, float("-inf"))
        y = (F.softmax(att, dim=-1) @ v).transpose(1, 2).contiguous().view(b, t, c)
        x = x + self.proj(y)
        return x + self.fc2(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GptTiny(nn.Module):
    """Decoder-only LM; position ids from the attention mask by cumsum (as HF does)."""

    def __init__(self, vocab=100, d=32, heads=4, layers=2, max_pos=64):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(max_pos, d)
        self.blocks = nn.ModuleList([GptBlock(d, heads) for _ in range(layers)])
        self.lnf, self.head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)

    def forward(self, input_ids, attention_mask):
        pos = (attention_mask.cumsum(-1) - 1).masked_fill(attention_mask == 0, 1)
        x = self.wte(input_ids) + self.wpe(pos)
        for block in self.blocks:
            x = block(x)
        return self.head(self.lnf(x))


class BertTiny(nn.Module):
    def __init__(self, vocab=1000, hidden=64, heads=4, layers=2, ffn=256, max_pos=128):
        super().__init__()
        self.tok = nn.Embedding(vocab, hidden)
        self.pos = nn.Embedding(max_pos, hidden)
        self.ln = nn.LayerNorm(hidden, eps=1e-12)
        self.layers = nn.ModuleList([BertLayer(hidden, heads, ffn) for _ in range(layers)])

    def forward(self, input_ids, attention_mask):
        seq = input_ids.shape[1]
        pos = torch.arange(seq, device=input_ids.device)
        x = self.ln(self.tok(input_ids) + self.pos(pos).unsqueeze(0))
        mask = attention_mask.to(torch.float32)
        bias = ((1.0 - mask) * -10000.0)[:, None, None, :]
        for layer in self.layers:
            x = layer(x, bias)
        m = mask.unsqueeze(-1)
        return (x * m).sum(dim=1) / torch.clamp(m.sum(dim=1), min=1.0)


class KvBlock(GptBlock):
    """A GptBlock that appends this step's keys and values to a cache of length P."""

    def forward(self, x, past_k, past_v, allowed):  # allowed: [b, 1, T, P+T] bool
        b, t, c = x.size()
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        k = torch.cat([past_k, k], dim=2)  # present: [b, heads, P+T, dh]
        v = torch.cat([past_v, v], dim=2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(~allowed, -1e9)  # finite: a fully padded query row stays defined
        y = (F.softmax(att, dim=-1) @ v).transpose(1, 2).contiguous().view(b, t, c)
        x = x + self.proj(y)
        return x + self.fc2(F.gelu(self.fc(self.ln2(x)), approximate="tanh")), k, v


class GptKvStep(nn.Module):
    """Decoder step with a KV cache: T new tokens after P cached ones, a left-padded
    attention mask over all P+T positions, positions from the mask by CumSum (HF style)."""

    def __init__(self, vocab=100, d=32, heads=4, layers=2, max_pos=64):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(max_pos, d)
        self.blocks = nn.ModuleList([KvBlock(d, heads) for _ in range(layers)])
        self.lnf, self.head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)

    def forward(self, input_ids, attention_mask, past_key_0, past_value_0, past_key_1, past_value_1):
        t = input_ids.shape[1]
        p = past_key_0.shape[2]
        pos = (attention_mask.cumsum(-1) - 1).masked_fill(attention_mask == 0, 1)[:, -t:]
        x = self.wte(input_ids) + self.wpe(pos)
        causal = torch.arange(p + t)[None, :] <= torch.arange(t)[:, None] + p  # query i sees keys <= P+i
        allowed = causal[None, None, :, :] & (attention_mask[:, None, None, :] != 0)
        presents = []
        for block, pk, pv in zip(self.blocks, (past_key_0, past_key_1), (past_value_0, past_value_1)):
            x, k, v = block(x, pk, pv, allowed)
            presents += [k, v]
        return (self.head(self.lnf(x)), *presents)


class ConformerFeedForward(nn.Module):
    def __init__(self, d, ff):
        super().__init__()
        self.ln, self.fc1, self.fc2 = nn.LayerNorm(d), nn.Linear(d, ff), nn.Linear(ff, d)

    def forward(self, x):
        return self.fc2(F.silu(self.fc1(self.ln(x))))


class ConformerBlock(nn.Module):
    """Macaron FFN halves around self-attention with a key-padding bias and a convolution
    module (pointwise Conv1d + GLU, depthwise Conv1d, BatchNorm1d, Swish, pointwise Conv1d)."""

    def __init__(self, d, heads, ff, kernel):
        super().__init__()
        self.heads = heads
        self.ff1, self.ff2 = ConformerFeedForward(d, ff), ConformerFeedForward(d, ff)
        self.ln_att = nn.LayerNorm(d)
        self.qkv, self.out = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.ln_conv = nn.LayerNorm(d)
        self.pw1 = nn.Conv1d(d, 2 * d, 1)
        self.dw = nn.Conv1d(d, d, kernel, padding=kernel // 2, groups=d)
        self.bn = nn.BatchNorm1d(d)
        self.pw2 = nn.Conv1d(d, d, 1)
        self.ln_out = nn.LayerNorm(d)

    def forward(self, x, key_bias, valid):  # key_bias [b, 1, 1, T]; valid [b, T, 1] (1.0 or 0.0)
        b, t, c = x.size()
        x = x + 0.5 * self.ff1(x)
        q, k, v = self.qkv(self.ln_att(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(c // self.heads) + key_bias
        y = (F.softmax(att, dim=-1) @ v).transpose(1, 2).reshape(b, t, c)
        x = x + self.out(y)
        h = (self.ln_conv(x) * valid).transpose(1, 2)  # padded frames do not leak into the conv
        h = self.pw2(F.silu(self.bn(self.dw(F.glu(self.pw1(h), dim=1)))))
        x = x + h.transpose(1, 2)
        x = x + 0.5 * self.ff2(x)
        return self.ln_out(x)


class ConformerTiny(nn.Module):
    """Speech encoder: [batch, time, 40] log-mels and per-row lengths -> two stride-2 Conv2d
    (time/4), Linear to d, Conformer blocks with a key-padding mask from the lengths."""

    def __init__(self, mels=40, d=64, heads=4, ff=128, layers=2, kernel=7):
        super().__init__()
        self.sub1, self.sub2 = nn.Conv2d(1, 16, 3, 2), nn.Conv2d(16, 16, 3, 2)
        self.inp = nn.Linear(16 * (((mels - 1) // 2 - 1) // 2), d)
        self.blocks = nn.ModuleList([ConformerBlock(d, heads, ff, kernel) for _ in range(layers)])

    def forward(self, features, lengths):
        x = F.relu(self.sub2(F.relu(self.sub1(features.unsqueeze(1)))))  # [b, 16, T', F']
        b, ch, t, f = x.size()
        x = self.inp(x.permute(0, 2, 1, 3).reshape(b, t, ch * f))
        out_lengths = torch.clamp(torch.div(torch.div(lengths - 1, 2, rounding_mode="floor") - 1, 2,
                                            rounding_mode="floor"), min=1)
        valid = torch.arange(t)[None, :] < out_lengths[:, None]  # [b, T']
        key_bias = ((~valid).to(torch.float32) * -10000.0)[:, None, None, :]
        frames = valid.to(torch.float32)[:, :, None]
        for block in self.blocks:
            x = block(x, key_bias, frames)
        return x, out_lengths


def conv_bn_relu(cin, cout, stride=1):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout),
                         nn.ReLU(inplace=True))


class UNetDecoder(nn.Module):
    """Encoder: H -> H/2 (stride-2 conv) -> H/4 (stride-2 conv) -> H/8 (max pool).
    Decoder: ConvTranspose s2 (H/8 -> H/4), nearest x2 (H/4 -> H/2), bilinear x2 (H/2 -> H),
    each followed by a Concat skip; shapes match only when H and W are multiples of 8."""

    def __init__(self, out_channels=2):
        super().__init__()
        self.e0 = conv_bn_relu(3, 8)              # H
        self.e1 = conv_bn_relu(8, 16, stride=2)   # ceil(H/2)
        self.e2 = conv_bn_relu(16, 32, stride=2)  # ceil(H/4)
        self.pool = nn.MaxPool2d(2)               # floor(ceil(H/4)/2)
        self.mid = conv_bn_relu(32, 32)
        self.up3 = nn.ConvTranspose2d(32, 32, 2, stride=2)
        self.d2 = conv_bn_relu(64, 16)
        self.d1 = conv_bn_relu(32, 8)
        self.d0 = conv_bn_relu(16, 8)
        self.head = nn.Conv2d(8, out_channels, 1)

    def forward(self, image):
        s0 = self.e0(image)
        s1 = self.e1(s0)
        s2 = self.e2(s1)
        x = self.mid(self.pool(s2))
        x = self.d2(torch.cat([self.up3(x), s2], dim=1))
        x = F.interpolate(x, scale_factor=2.0, mode="nearest")
        x = self.d1(torch.cat([x, s1], dim=1))
        x = F.interpolate(x, scale_factor=2.0, mode="bilinear", align_corners=False)
        x = self.d0(torch.cat([x, s0], dim=1))
        return self.head(x)


class GRUSeq(nn.Module):
    def __init__(self, features=16, hidden=32, layers=2, classes=8):
        super().__init__()
        self.gru = nn.GRU(features, hidden, num_layers=layers, batch_first=False)
        self.head = nn.Linear(hidden, classes)

    def forward(self, sequence):  # [time, batch, features]
        out, h = self.gru(sequence)
        return self.head(out), h


class ViewGuard(nn.Module):
    """x: [batch, length]. view(batch*4, -1) needs length % 4 == 0 (element count must divide)."""

    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(1))
        self.proj = nn.Linear(4, 8)

    def forward(self, x):
        b = x.shape[0]
        y = torch.softmax(x.view(b * 4, -1), dim=-1)      # [4*batch, length/4]
        rows = y.view(b, -1) * self.scale + x              # [batch, length]
        groups = self.proj(x.view(b, -1, 4))               # [batch, length/4, 8]
        return rows, groups


# ---------------------------------------------------------------------------------------
# zoo description
# ---------------------------------------------------------------------------------------

def dims_args(dims):
    args = []
    for name, (lo, hi, step) in dims.items():
        args += ["--dim", f"{name}={lo}..{hi}" + (f":{step}" if step else "")]
    return args


def case(name, *shapes):
    return {"name": name, "shapes": [list(s) for s in shapes]}


def build_specs():
    """Model factories, export settings, contracts and cases. Order matters for seeds."""
    specs = []

    def mobilenet():
        import torchvision
        return torchvision.models.mobilenet_v2(num_classes=100, width_mult=1.0)

    specs.append(dict(
        name="mobilenet_v2", make=mobilenet,
        inputs=[("pixels", "float32", ["batch", 3, "H", "W"], {"kind": "normal"})],
        outputs=["logits"],
        dynamic_axes={"pixels": {0: "batch", 2: "H", 3: "W"}, "logits": {0: "batch"}},
        example=[(1, 3, 224, 224)],
        dims={"batch": (1, 2, None), "H": (32, 224, None), "W": (32, 224, None)},
        cases=[case("b1_32x32", (1, 3, 32, 32)),
               case("b1_97x131", (1, 3, 97, 131)),
               case("b2_64x48", (2, 3, 64, 48)),
               case("b2_224x224", (2, 3, 224, 224))],
        rejects=[{"input_shapes": "1x3x256x224", "reason": "H above its bound 224"},
                 {"input_shapes": "3x3x64x64", "reason": "batch above its bound 2"}],
        notes="torchvision MobileNetV2 (100 classes, width 1.0): Conv (depthwise groups), "
              "Clip (ReLU6), residual Add, GlobalAveragePool, Flatten, Gemm. H and W take any "
              "value in [32, 224] (no step): stride-2 convs give ceil(H/2) chains down to "
              "ceil(H/32); no guards expected (residual adds are between equal shapes)."))

    specs.append(dict(
        name="resnet_small", make=lambda: ResNetSmall(num_classes=10),
        inputs=[("pixels", "float32", ["batch", 3, 64, 64], {"kind": "normal"})],
        outputs=["logits"],
        dynamic_axes={"pixels": {0: "batch"}, "logits": {0: "batch"}},
        example=[(2, 3, 64, 64)],
        dims={"batch": (1, 8, None)},
        cases=[case("b1", (1, 3, 64, 64)), case("b3", (3, 3, 64, 64)),
               case("b8", (8, 3, 64, 64))],
        rejects=[{"input_shapes": "1x3x64x65", "reason": "W is static 64"},
                 {"input_shapes": "9x3x64x64", "reason": "batch above its bound 8"}],
        notes="small ResNet (stem conv+bn+relu+maxpool, 4 BasicBlocks 16-32-64-128 with 1x1 "
              "stride-2 conv shortcuts), BatchNorm folded into Conv by the exporter, "
              "GlobalAveragePool, Gemm. Only batch is dynamic; no guards expected."))

    specs.append(dict(
        name="bert_tiny", make=lambda: BertTiny(),
        inputs=[("input_ids", "int64", ["batch", "seq"], {"kind": "int", "low": 0, "high": 1000}),
                ("attention_mask", "int64", ["batch", "seq"], {"kind": "mask"})],
        outputs=["embedding"],
        dynamic_axes={"input_ids": {0: "batch", 1: "seq"},
                      "attention_mask": {0: "batch", 1: "seq"}, "embedding": {0: "batch"}},
        example=[(2, 16), (2, 16)],
        dims={"batch": (1, 4, None), "seq": (1, 128, None)},
        cases=[case("b1_s1", (1, 1), (1, 1)), case("b2_s3", (2, 3), (2, 3)),
               case("b3_s17", (3, 17), (3, 17)), case("b1_s64", (1, 64), (1, 64)),
               case("b4_s128", (4, 128), (4, 128))],
        rejects=[{"input_shapes": "1x129,1x129", "reason": "seq above max positions 128"},
                 {"input_shapes": "2x12,2x13", "reason": "input_ids and attention_mask share seq"}],
        notes="BERT-style encoder (hidden 64, 4 heads, 2 layers, FFN 256, vocab 1000): Gather "
              "embeddings, positions from Range(0, seq) (Shape->Gather->Range), Reshape/Transpose "
              "to heads with shapes built from Shape/Gather/Unsqueeze/Concat, MatMul, Softmax, "
              "mask bias (1-mask)*-10000 broadcast [b,1,1,seq], LayerNorm decomposed "
              "(ReduceMean/Sub/Pow/Sqrt/Div), GELU via Erf, masked mean pooling. seq <= 128 "
              "because the position table has 128 rows (Gather index range); batch and seq "
              "are shared by both inputs (equality checked at bind)."))

    specs.append(dict(
        name="unet_decoder", make=lambda: UNetDecoder(),
        inputs=[("image", "float32", [1, 3, "H", "W"], {"kind": "normal"})],
        outputs=["mask"],
        dynamic_axes={"image": {2: "H", 3: "W"}, "mask": {2: "H", 3: "W"}},
        example=[(1, 3, 64, 64)],
        dims={"H": (8, 128, 8), "W": (8, 128, 8)},
        cases=[case("8x8", (1, 3, 8, 8)), case("24x40", (1, 3, 24, 40)),
               case("56x16", (1, 3, 56, 16)), case("128x128", (1, 3, 128, 128))],
        rejects=[{"input_shapes": "1x3x20x32", "reason": "H not a multiple of 8"},
                 {"input_shapes": "1x3x136x32", "reason": "H above its bound 128"}],
        notes="UNet-ish: stride-2 Conv x2 + MaxPool down to H/8, ConvTranspose(k2,s2), Resize "
              "nearest x2, Resize linear x2 (half_pixel / pytorch_half_pixel, scales input), "
              "Concat skips. The Concats need 2*floor(ceil(H/4)/2) == ceil(H/4), "
              "2*ceil(H/4) == ceil(H/2) and 2*ceil(H/2) == H (same for W): all hold when H, W "
              "are multiples of 8, which the step 8 guarantees. Exported without the step, "
              "guards on H and W (divisibility) are expected."))

    specs.append(dict(
        name="gru_seq", make=lambda: GRUSeq(),
        inputs=[("sequence", "float32", ["time", "batch", 16], {"kind": "normal"})],
        outputs=["scores", "h_n"],
        dynamic_axes={"sequence": {0: "time", 1: "batch"}, "scores": {0: "time", 1: "batch"},
                      "h_n": {1: "batch"}},
        example=[(5, 2, 16)],
        dims={"time": (1, 64, None), "batch": (1, 8, None)},
        cases=[case("t1_b1", (1, 1, 16)), case("t5_b3", (5, 3, 16)),
               case("t17_b2", (17, 2, 16)), case("t64_b8", (64, 8, 16))],
        rejects=[{"input_shapes": "65x1x16", "reason": "time above its bound 64"},
                 {"input_shapes": "4x2x15", "reason": "features static 16"}],
        notes="2-layer nn.GRU (16 -> 32, time-major) exported as two ONNX GRU nodes "
              "(linear_before_reset=1) with Squeeze between layers, plus a Linear head "
              "(MatMul+Add on [time,batch,32]); second output is the final hidden state "
              "[2, batch, 32]. Recurrence over a dynamic time dim; no guards expected."))

    specs.append(dict(
        name="view_guard", make=lambda: ViewGuard(),
        inputs=[("x", "float32", ["batch", "length"], {"kind": "normal"})],
        outputs=["rows", "groups"],
        dynamic_axes={"x": {0: "batch", 1: "length"}, "rows": {0: "batch", 1: "length"},
                      "groups": {0: "batch", 1: "length_div_4"}},
        example=[(2, 32)],
        dims={"batch": (1, 8, None), "length": (4, 256, None)},
        cases=[case("b1_l4", (1, 4)), case("b3_l12", (3, 12)), case("b2_l100", (2, 100)),
               case("b8_l256", (8, 256))],
        rejects=[{"input_shapes": "2x10", "reason": "guard: length % 4 == 0 (Reshape to "
                                                  "[4*batch, -1] / [batch, -1, 4])"},
                 {"input_shapes": "1x258", "reason": "length above its bound 256"}],
        notes="x.view(batch*4, -1) and x.view(batch, -1, 4): Reshape with a shape tensor "
              "computed from Shape/Gather/Mul/Unsqueeze/Concat and an inferred -1. Deliberately "
              "exported without a step on 'length', so export must emit a guard "
              "length % 4 == 0 (the -1 must divide the element count) that bind checks; "
              "Softmax on a dynamic last axis, MatMul with [4,8] weight."))

    def swin():
        from torchvision.models.swin_transformer import SwinTransformer
        return SwinTransformer(patch_size=[4, 4], embed_dim=24, depths=[2, 2], num_heads=[2, 4],
                               window_size=[7, 7], stochastic_depth_prob=0.0, num_classes=10)

    specs.append(dict(
        name="swin_tiny", make=swin,
        inputs=[("pixels", "float32", ["batch", 3, "H", "W"], {"kind": "normal"})],
        outputs=["logits"],
        dynamic_axes={"pixels": {0: "batch", 2: "H", 3: "W"}, "logits": {0: "batch"}},
        example=[(1, 3, 64, 64)],
        dims={"batch": (1, 2, None), "H": (60, 128, None), "W": (60, 128, None)},
        cases=[case("b1_60x60", (1, 3, 60, 60)), case("b1_61x97", (1, 3, 61, 97)),
               case("b2_64x80", (2, 3, 64, 80)), case("b1_128x128", (1, 3, 128, 128))],
        rejects=[{"input_shapes": "1x3x59x64", "reason": "H below 60, where torch's traced "
                                                      "shift branch no longer holds"},
                 {"input_shapes": "1x3x64x129", "reason": "W above its bound 128"}],
        notes="torchvision SwinTransformer, shrunk (embed 24, depths [2, 2], heads [2, 4], "
              "window 7): shifted-window attention whose shape math pads H/4 and W/4 to "
              "multiples of 7 with Mod ((7 - x % 7) % 7), rolls with Slice/Concat, builds the "
              "shift mask with ScatterND over Range, and PatchMerging pads to even sizes. Every "
              "size folds: no guards. The lower bound 60 is the model's, not Kiln's: torch traced "
              "`if window >= padded size: no shift` at the 64x64 example, and for H or W below 60 "
              "the second stage is 7 wide, where torch itself skips the shift, so the ONNX graph "
              "(and ONNX Runtime, and Kiln) no longer equal the torch model there. The file cannot "
              "say so; the contract can."))

    specs.append(dict(
        name="gpt_tiny", make=lambda: GptTiny(), min_opset=14,  # Trilu
        inputs=[("input_ids", "int64", ["batch", "seq"], {"kind": "int", "low": 0, "high": 100}),
                ("attention_mask", "int64", ["batch", "seq"], {"kind": "mask"})],
        outputs=["logits"],
        dynamic_axes={"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"},
                      "logits": {0: "batch", 1: "seq"}},
        example=[(2, 16), (2, 16)],
        dims={"batch": (1, 4, None), "seq": (1, 64, None)},
        cases=[case("b1_s1", (1, 1), (1, 1)), case("b2_s5", (2, 5), (2, 5)),
               case("b3_s17", (3, 17), (3, 17)), case("b4_s64", (4, 64), (4, 64))],
        rejects=[{"input_shapes": "1x65,1x65", "reason": "seq above max positions 64"},
                 {"input_shapes": "2x5,2x6", "reason": "input_ids and attention_mask share seq"}],
        notes="nanoGPT-style decoder (vocab 100, d 32, 4 heads, 2 layers), opset 14: the causal "
              "mask is torch.tril of ones at run time (Trilu over [seq, seq]), masked_fill with "
              "-inf (Where), position ids from the attention mask by CumSum (HF style), GELU "
              "tanh approximation, LayerNormalization decomposed. logits [batch, seq, 100]; "
              "no guards."))
    specs.append(dict(
        name="gpt_kv_step", make=lambda: GptKvStep(), min_opset=14,  # Trilu
        inputs=[("input_ids", "int64", ["batch", "T"], {"kind": "int", "low": 0, "high": 100}),
                ("attention_mask", "int64", ["batch", "total"], {"kind": "left_mask"}),
                ("past_key_0", "float32", ["batch", 4, "past", 8], {"kind": "normal"}),
                ("past_value_0", "float32", ["batch", 4, "past", 8], {"kind": "normal"}),
                ("past_key_1", "float32", ["batch", 4, "past", 8], {"kind": "normal"}),
                ("past_value_1", "float32", ["batch", 4, "past", 8], {"kind": "normal"})],
        outputs=["logits", "present_key_0", "present_value_0", "present_key_1", "present_value_1"],
        dynamic_axes={"input_ids": {0: "batch", 1: "T"}, "attention_mask": {0: "batch", 1: "total"},
                      **{f"past_{kv}_{i}": {0: "batch", 2: "past"} for kv in ("key", "value") for i in (0, 1)},
                      "logits": {0: "batch", 1: "T"},
                      **{f"present_{kv}_{i}": {0: "batch", 2: "total"} for kv in ("key", "value") for i in (0, 1)}},
        example=[(2, 3), (2, 8), (2, 4, 5, 8), (2, 4, 5, 8), (2, 4, 5, 8), (2, 4, 5, 8)],
        dims={"batch": (1, 4, None), "T": (1, 8, None), "past": (0, 56, None), "total": (1, 64, None)},
        sum_of={"total": ["past", "T"]},  # not free: the contract's guard holds total == past + T
        # bench/ort_compare.py: decode steps (T = 1) at P = 1, a middle P and the bound, then the bound
        bench_points=[{"label": f"decode b1 P{p}", "dims": {"batch": 1, "T": 1, "past": p}} for p in (1, 28, 56)]
        + [{"label": "decode b4 P56", "dims": {"batch": 4, "T": 1, "past": 56}},
           {"label": "max", "dims": {"batch": 4, "T": 8, "past": 56}}],
        cases=[case("b1_p1_t1", (1, 1), (1, 2), *[(1, 4, 1, 8)] * 4),
               case("b2_p30_t1", (2, 1), (2, 31), *[(2, 4, 30, 8)] * 4),
               case("b3_p9_t4", (3, 4), (3, 13), *[(3, 4, 9, 8)] * 4),
               case("b4_p56_t8", (4, 8), (4, 64), *[(4, 4, 56, 8)] * 4),
               case("b1_p0_t1", (1, 1), (1, 1), *[(1, 4, 0, 8)] * 4),  # the first step: an empty cache
               case("b2_p0_t5", (2, 5), (2, 5), *[(2, 4, 0, 8)] * 4)],
        rejects=[{"input_shapes": "1x1,1x3,1x4x1x8,1x4x1x8,1x4x1x8,1x4x1x8",
                  "reason": "the mask covers past + T positions (total == past + T)"},
                 {"input_shapes": "1x1,1x58,1x4x57x8,1x4x57x8,1x4x57x8,1x4x57x8",
                  "reason": "past above its bound 56"}],
        notes="GPT decoder step with a KV cache (vocab 100, d 32, 4 heads, 2 layers, opset 14): "
              "T new tokens, past keys/values [batch, 4, past, 8] per layer, presents "
              "[batch, 4, past + T, 8] by Concat, a left-padded mask over all past + T "
              "positions, positions from the mask by CumSum sliced to the last T, causal mask "
              "Range(past + T) <= Range(T) + past combined with the padding mask, masked_fill "
              "-1e9 (Where), GELU tanh, LayerNorm decomposed. The mask length is its own dim "
              "'total'; the graph adds it to scores of length past + T, so the contract holds "
              "total == past + T (checked at bind). The first step runs with an empty cache (past = 0)."))

    specs.append(dict(
        name="conformer_tiny", make=lambda: ConformerTiny(),
        inputs=[("features", "float32", ["batch", "time", 40], {"kind": "normal"}),
                ("lengths", "int64", ["batch"], {"kind": "lengths", "input": 0, "axis": 1})],
        outputs=["encoded", "encoded_lengths"],
        dynamic_axes={"features": {0: "batch", 1: "time"}, "lengths": {0: "batch"},
                      "encoded": {0: "batch", 1: "frames"}, "encoded_lengths": {0: "batch"}},
        example=[(2, 64, 40), (2,)],
        dims={"batch": (1, 4, None), "time": (7, 256, None)},
        cases=[case("b1_t7", (1, 7, 40), (1,)), case("b2_t33", (2, 33, 40), (2,)),
               case("b3_t100", (3, 100, 40), (3,)), case("b4_t256", (4, 256, 40), (4,))],
        rejects=[{"input_shapes": "1x6x40,1", "reason": "time below 7: the two stride-2 convs need it"},
                 {"input_shapes": "2x300x40,2", "reason": "time above its bound 256"}],
        notes="Conformer-style speech encoder (d 64, 4 heads, FFN 128, 2 blocks, conv kernel 7): "
              "two stride-2 Conv2d subsample time by 4 ((time-1)//2-1)//2 frames, Linear, macaron "
              "FFN halves with Swish, attention with a key-padding bias built from the lengths "
              "input (Range < lengths, Where/Cast), convolution module (Conv1d + GLU, depthwise "
              "Conv1d, BatchNorm1d, Swish, Conv1d), LayerNorm decomposed. Output lengths "
              "floor-divided the same way, at least 1."))
    return specs


# ---------------------------------------------------------------------------------------
# export
# ---------------------------------------------------------------------------------------

def init_random_norms(model, gen):
    """Give BatchNorm non-trivial running stats (so folding is exercised) and LayerNorm
    non-trivial affine parameters (identical ones/zeros would be deduplicated by the
    exporter into Identity nodes)."""
    for m in model.modules():
        if isinstance(m, nn.LayerNorm):
            with torch.no_grad():
                m.weight.copy_(torch.rand(m.weight.shape, generator=gen) * 0.5 + 0.75)
                m.bias.copy_(torch.randn(m.bias.shape, generator=gen) * 0.1)
        if isinstance(m, nn.BatchNorm2d):
            with torch.no_grad():
                m.running_mean.copy_(torch.randn(m.num_features, generator=gen) * 0.1)
                m.running_var.copy_(torch.rand(m.num_features, generator=gen) * 0.5 + 0.75)
                m.weight.copy_(torch.rand(m.num_features, generator=gen) * 0.5 + 0.75)
                m.bias.copy_(torch.randn(m.num_features, generator=gen) * 0.1)


def calibrate_bn(model, spec, gen):
    """Set BatchNorm running stats to the statistics of random example inputs (a cumulative
    average over a few training-mode passes), so activations stay normalized through the
    depth of the network and the outputs depend on the input (with default stats a random
    deep CNN collapses to nearly input-independent logits)."""
    bns = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
    if not bns:
        return
    for m in bns:
        m.reset_running_stats()
        m.momentum = None
    model.train()
    shape = list(spec["example"][0])
    shape[0] = 8
    with torch.no_grad():
        for _ in range(4):
            model(torch.randn(shape, generator=gen))
    for m in bns:
        m.momentum = 0.1


def make_model(index, spec):
    torch.manual_seed(1000 + index)
    model = spec["make"]()
    init_random_norms(model, torch.Generator().manual_seed(2000 + index))
    calibrate_bn(model, spec, torch.Generator().manual_seed(3000 + index))
    return model.eval()


def example_inputs(spec):
    g = torch.Generator().manual_seed(7)
    out = []
    for (name, dtype, _, gen), shape in zip(spec["inputs"], spec["example"]):
        if gen["kind"] == "int":
            out.append(torch.randint(gen["low"], gen["high"], shape, generator=g))
        elif gen["kind"] == "mask":
            m = torch.ones(shape, dtype=torch.int64)
            m[0, shape[1] // 2:] = 0
            out.append(m)
        elif gen["kind"] == "left_mask":
            m = torch.ones(shape, dtype=torch.int64)
            m[0, :shape[1] // 2] = 0
            out.append(m)
        elif gen["kind"] == "lengths":
            full = spec["example"][gen["input"]][gen["axis"]]
            out.append(torch.tensor([full - 3 * r for r in range(shape[0])], dtype=torch.int64))
        else:
            out.append(torch.randn(shape, generator=g))
    return tuple(out)


def all_op_types(graph, acc):
    for node in graph.node:
        acc[node.op_type] = acc.get(node.op_type, 0) + 1
        for attr in node.attribute:
            if attr.g is not None and len(attr.g.node):
                all_op_types(attr.g, acc)
            for sub in attr.graphs:
                all_op_types(sub, acc)
    return acc


def export_one(index, spec):
    import onnx
    model = make_model(index, spec)
    args = example_inputs(spec)
    path = os.path.join(MODELS, spec["name"] + ".onnx")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with torch.no_grad():
            torch.onnx.export(model, args, path, opset_version=max(OPSET, spec.get("min_opset", 0)),
                              do_constant_folding=True,
                              input_names=[i[0] for i in spec["inputs"]],
                              output_names=spec["outputs"], dynamic_axes=spec["dynamic_axes"])
    msgs = sorted({f"{w.category.__name__}: {str(w.message).splitlines()[0][:200]}"
                   for w in caught})
    m = onnx.load(path)
    onnx.checker.check_model(m, full_check=True)
    ops = all_op_types(m.graph, {})
    info = {"opset": [(o.domain or "ai.onnx", o.version) for o in m.opset_import],
            "nodes": len(m.graph.node), "ops": ops, "bytes": os.path.getsize(path),
            "warnings": msgs}
    return info


def output_shapes(model, spec, shapes):
    """Output shapes of the torch model at the given input shapes (placeholder values)."""
    ins = []
    for (_, _, _, gen), shape in zip(spec["inputs"], shapes):
        if gen["kind"] == "int":
            ins.append(torch.zeros(shape, dtype=torch.int64))
        elif gen["kind"] in ("mask", "left_mask"):
            ins.append(torch.ones(shape, dtype=torch.int64))
        elif gen["kind"] == "lengths":
            ins.append(torch.full(shape, shapes[gen["input"]][gen["axis"]], dtype=torch.int64))
        else:
            ins.append(torch.zeros(shape))
    with torch.no_grad():
        outs = model(*ins)
    outs = outs if isinstance(outs, tuple) else (outs,)
    return [list(o.shape) for o in outs]


def to_manifest(index, spec):
    name = spec["name"]
    model = make_model(index, spec)
    cases = []
    for c in spec["cases"]:
        d = f"cases/{name}/{c['name']}"
        cases.append({
            "name": c["name"],
            "input_shapes": ",".join("x".join(str(v) for v in s) for s in c["shapes"]),
            "inputs": [f"{d}/input_{i}.npy" for i in range(len(spec["inputs"]))],
            "outputs": [f"{d}/output_{i}.npy" for i in range(len(spec["outputs"]))],
            "output_shapes": output_shapes(model, spec, c["shapes"]),
        })
    return {
        "name": name,
        "onnx": f"models/{name}.onnx",
        "export_args": dims_args(spec["dims"]),
        "inputs": [i[0] for i in spec["inputs"]],
        "outputs": spec["outputs"],
        "input_dtypes": [i[1] for i in spec["inputs"]],
        "input_dims": [i[2] for i in spec["inputs"]],
        "input_generators": [i[3] for i in spec["inputs"]],
        "dims": {k: {"min": v[0], "max": v[1], **({"step": v[2]} if v[2] else {}),
                     **({"sum_of": spec["sum_of"][k]} if k in spec.get("sum_of", {}) else {})}
                 for k, v in spec["dims"].items()},
        "notes": spec["notes"],
        **({"bench_points": spec["bench_points"]} if "bench_points" in spec else {}),
        "cases": cases,
        "rejects": spec["rejects"],
    }


def check_refs(specs):
    """Run the torch models on the ORT reference inputs and compare outputs."""
    import numpy as np
    with open(os.path.join(ZOO, "manifest.json")) as f:
        manifest = {m["name"]: m for m in json.load(f)["models"]}
    worst = 0.0
    for index, spec in enumerate(specs):
        model = make_model(index, spec)
        for c in manifest[spec["name"]]["cases"]:
            ins = [torch.from_numpy(np.load(os.path.join(ZOO, p))) for p in c["inputs"]]
            with torch.no_grad():
                outs = model(*ins)
            outs = outs if isinstance(outs, tuple) else (outs,)
            for o, p in zip(outs, c["outputs"]):
                ref = np.load(os.path.join(ZOO, p))
                assert ref.shape == tuple(o.shape), (spec["name"], c["name"], ref.shape, o.shape)
                err = float(np.max(np.abs(ref - o.numpy())) / (np.max(np.abs(ref)) + 1e-6))
                worst = max(worst, err)
                status = "ok" if err < 1e-4 else "MISMATCH"
                print(f"{spec['name']:14s} {c['name']:12s} {p.split('/')[-1]:14s} "
                      f"shape={list(ref.shape)} rel_err={err:.2e} {status}")
    print(f"worst relative error {worst:.2e}")
    return worst < 1e-4


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--check-refs", action="store_true",
                    help="compare torch outputs against zoo/cases (run make_refs.py first)")
    ap.add_argument("--only", help="comma-separated model names to export")
    opts = ap.parse_args()
    torch.set_num_threads(1)
    specs = build_specs()
    if opts.check_refs:
        sys.exit(0 if check_refs(specs) else 1)

    os.makedirs(MODELS, exist_ok=True)
    only = set(opts.only.split(",")) if opts.only else None
    report = {}
    for index, spec in enumerate(specs):
        if only and spec["name"] not in only:
            continue
        info = export_one(index, spec)
        report[spec["name"]] = info
        print(f"{spec['name']}: {info['bytes'] / 1e6:.2f} MB, {info['nodes']} nodes, "
              f"opset {info['opset']}")
        print("  ops: " + ", ".join(f"{k}x{v}" for k, v in sorted(info["ops"].items())))
        for w in info["warnings"]:
            print("  warning: " + w)
    manifest = {
        "format": 1,
        "opset": OPSET,
        "generated_by": "zoo/make_zoo.py (models, contracts) + zoo/reference/make_refs.py "
                        "(ONNX Runtime CPU reference outputs)",
        "models": [to_manifest(i, s) for i, s in enumerate(specs)],
    }
    with open(os.path.join(ZOO, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=2)
        f.write("\n")
    report_path = os.path.join(ZOO, "export_report.json")
    if only and os.path.exists(report_path):
        with open(report_path) as f:
            report = {**json.load(f), **report}
    with open(report_path, "w") as f:
        json.dump(report, f, indent=2, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
