"""Small detectors built from torchvision 0.14's own detection classes (SSD, RetinaNet, FCOS,
Faster R-CNN)
with a tiny backbone, exported with their post-processing by torch 1.13's ONNX exporter
(opset 11), as a user exports torchvision's detectors. The post-processing graph is
torchvision's: score threshold, NonZero, TopK with K = min(candidates, count), per-class
NonMaxSuppression inside an If ("no boxes: empty"), a final TopK and Gathers.

Debian's python3-torchvision (torch 1.13) runs it; make_ops.py calls it for the models it
lacks:

    /usr/bin/python3 zoo/ops/torchvision_detectors.py NAME OUT.onnx

Weights are seeded; the class logits are spread so that scores are neither all below the
threshold (RetinaNet and FCOS start at a prior of 0.01) nor ties.
"""

import sys
from collections import OrderedDict

import torch
from torch import nn
from torchvision.models.detection.faster_rcnn import FasterRCNN, FastRCNNPredictor, TwoMLPHead
from torchvision.models.detection.fcos import FCOS
from torchvision.models.detection.retinanet import RetinaNet
from torchvision.models.detection.ssd import SSD, SSDHead
from torchvision.models.detection.anchor_utils import AnchorGenerator, DefaultBoxGenerator
from torchvision.ops import MultiScaleRoIAlign


class Backbone(nn.Module):
    """Two feature maps, at strides 4 and 8, `out_channels` wide (FCOS's head: a multiple of 32)."""

    def __init__(self, out_channels=16):
        super().__init__()
        self.out_channels = out_channels
        self.a = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1), nn.ReLU(), nn.Conv2d(8, out_channels, 3, 2, 1), nn.ReLU())
        self.b = nn.Sequential(nn.Conv2d(out_channels, out_channels, 3, 2, 1), nn.ReLU())

    def forward(self, x):
        a = self.a(x)
        return OrderedDict([("0", a), ("1", self.b(a))])


def spread(module):
    """Every conv (and linear) layer of a head at unit gain (std 1/sqrt(fan-in)): the scores then
    differ from anchor to anchor well beyond rounding, without saturating at 1 (torchvision's
    std 0.01 gives near ties, wider ones a sigmoid stuck at 1.0)."""
    with torch.no_grad():
        for conv in [m for m in module.modules() if isinstance(m, (nn.Conv2d, nn.Linear))]:
            conv.weight.normal_(0, conv.weight[0].numel() ** -0.5)
            conv.bias.uniform_(-0.5, 0.5)


def ssd():
    anchors = DefaultBoxGenerator([[2], [2]])
    head = SSDHead([16, 16], anchors.num_anchors_per_location(), num_classes=4)
    m = SSD(Backbone(), anchors, (64, 64), num_classes=4, head=head, score_thresh=0.85, topk_candidates=40,
            detections_per_img=30, nms_thresh=0.45)
    spread(m.head.classification_head)
    return m


def retinanet():
    anchors = AnchorGenerator(((16,), (32,)), ((0.5, 1.0, 2.0),) * 2)
    m = RetinaNet(Backbone(), num_classes=3, anchor_generator=anchors, min_size=64, max_size=64, score_thresh=0.6,
                  topk_candidates=40, detections_per_img=30, nms_thresh=0.45)
    spread(m.head.classification_head)
    return m


def fcos():
    anchors = AnchorGenerator(((16,), (32,)), ((1.0,),) * 2)
    m = FCOS(Backbone(32), num_classes=3, anchor_generator=anchors, min_size=64, max_size=64, score_thresh=0.65,
             topk_candidates=40, detections_per_img=30, nms_thresh=0.45)
    spread(m.head.classification_head)
    return m


def faster_rcnn():
    """Two stages: RPN proposals (TopK, NMS per level), RoiAlign over both levels
    (MultiScaleRoIAlign: ScatterElements puts each level's rois back in order), a small box
    head, then per-class NMS."""
    anchors = AnchorGenerator(((16,), (32,)), ((0.5, 1.0, 2.0),) * 2)
    m = FasterRCNN(Backbone(), rpn_anchor_generator=anchors,
                   box_roi_pool=MultiScaleRoIAlign(["0", "1"], 7, 2), box_head=TwoMLPHead(16 * 49, 64),
                   box_predictor=FastRCNNPredictor(64, 3), min_size=64, max_size=64, rpn_pre_nms_top_n_test=60,
                   rpn_post_nms_top_n_test=24, box_score_thresh=0.4, box_detections_per_img=30)
    spread(m.roi_heads.box_predictor)
    spread(m.rpn.head)
    return m


MODELS = {"tv_ssd": (ssd, True), "tv_retinanet": (retinanet, False), "tv_fcos": (fcos, False),
          "tv_faster_rcnn": (faster_rcnn, False)}


def main():
    name, dest = sys.argv[1], sys.argv[2]
    build, dynamic = MODELS[name]
    torch.manual_seed(0)
    m = build().eval()
    x = torch.rand(1, 3, 64, 64)
    # SSD resizes every image to its fixed size: the image's H and W stay dynamic. RetinaNet and
    # FCOS scale the image by a float factor of its size, which Kiln cannot fold into sizes:
    # they are exported at one image size (the post-processing stays data-dependent).
    axes = {"image": {2: "H", 3: "W"}} if dynamic else None
    torch.onnx.export(m, (x,), dest, opset_version=11, input_names=["image"], output_names=["boxes", "scores", "labels"],
                      dynamic_axes=axes)


if __name__ == "__main__":
    main()
