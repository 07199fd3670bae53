"""Host-side normalization: the way out for a static image model fed frames of other sizes.

    x, fit = kiln.image.preprocess("frame.jpg", (224, 224), mode="letterbox",
                                   mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225), pad=114)
    logits = method(x)
    # a point (u, v) in the model's input maps back to the frame at ((u, v) - fit.offset) / fit.scale

Decodes PNG, JPEG or BMP (stb_image), fits to the size (bilinear `resize`; `crop`: cover, then
cut the center; `letterbox`: fit inside keeping the aspect, pad the rest), normalizes
(pixel / 255 - mean) / std and lays out as NCHW (default) or NHWC, float32 with a batch of 1:
the same code as `kiln_runner --image`.
"""
from dataclasses import dataclass
from typing import Sequence, Tuple, Union

import numpy as np

from . import _kiln


@dataclass(frozen=True)
class Fit:
    """How a pixel of the fitted image maps back to the source: source = (pixel - offset) / scale."""
    scale: Tuple[float, float]   # (x, y)
    offset: Tuple[float, float]  # (x, y)

    def to_source(self, x: float, y: float) -> Tuple[float, float]:
        return ((x - self.offset[0]) / self.scale[0], (y - self.offset[1]) / self.scale[1])


def _floats(v: Union[float, Sequence[float]]) -> list:
    return [float(v)] if np.isscalar(v) else [float(x) for x in v]


def load(path, channels: int = 3) -> np.ndarray:
    """The image's pixels as uint8 [H, W, channels]."""
    return _kiln.image_load(str(path), int(channels))


def preprocess(path, size: Tuple[int, int], mode: str = "resize", mean: Union[float, Sequence[float]] = 0.0,
               std: Union[float, Sequence[float]] = 1.0, layout: str = "nchw", pad: int = 0,
               channels: int = 3) -> Tuple[np.ndarray, Fit]:
    """`path` fitted to size = (height, width) by mode (resize, crop or letterbox), normalized,
    as float32 [1, C, H, W] (layout "nchw") or [1, H, W, C] ("nhwc"); and its Fit."""
    if layout not in ("nchw", "nhwc"):
        raise ValueError(f"layout must be 'nchw' or 'nhwc', got {layout!r}")
    h, w = (int(s) for s in size)
    x, (sx, sy, ox, oy) = _kiln.image_preprocess(str(path), h, w, mode, _floats(mean), _floats(std),
                                                  layout == "nchw", int(pad), int(channels))
    return x, Fit((sx, sy), (ox, oy))
