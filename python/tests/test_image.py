"""kiln.image against references written here: a PNG encoder (zlib + struct, not stb) for
generated images, and bilinear resize / letterbox / crop / normalization in numpy."""
import struct
import zlib

import numpy as np
import pytest

import kiln


def write_png(path, pixels):
    """An 8-bit RGB PNG, filter 0 on every row."""
    h, w, _ = pixels.shape
    raw = b"".join(b"\x00" + pixels[y].tobytes() for y in range(h))
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) +
                chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def bilinear(img, out_h, out_w):
    """Half-pixel centers, clamped to the edge, rounded to uint8."""
    in_h, in_w, _ = img.shape
    def taps(n_in, n_out):
        s = np.clip((np.arange(n_out) + 0.5) * n_in / n_out - 0.5, 0, n_in - 1)
        i0 = np.floor(s).astype(int)
        return i0, np.minimum(i0 + 1, n_in - 1), s - i0
    y0, y1, fy = taps(in_h, out_h)
    x0, x1, fx = taps(in_w, out_w)
    a = img.astype(np.float64)
    top = a[y0][:, x0] * (1 - fx)[None, :, None] + a[y0][:, x1] * fx[None, :, None]
    bot = a[y1][:, x0] * (1 - fx)[None, :, None] + a[y1][:, x1] * fx[None, :, None]
    return top * (1 - fy)[:, None, None] + bot * fy[:, None, None]


@pytest.fixture
def frame(tmp_path):
    rng = np.random.default_rng(3)
    pixels = rng.integers(0, 256, (30, 48, 3), dtype=np.uint8)
    path = tmp_path / "frame.png"
    write_png(path, pixels)
    return path, pixels


def test_load_decodes_exactly(frame):
    path, pixels = frame
    np.testing.assert_array_equal(kiln.image.load(path), pixels)


def test_resize_matches_numpy_bilinear(frame):
    path, pixels = frame
    for h, w in [(30, 48), (17, 23), (64, 96), (1, 1)]:
        x, fit = kiln.image.preprocess(path, (h, w), mode="resize", layout="nhwc")
        assert x.shape == (1, h, w, 3) and x.dtype == np.float32
        want = bilinear(pixels, h, w)
        assert np.max(np.abs(x[0] * 255 - want)) <= 0.5 + 1e-3, (h, w)
        assert fit.scale == (w / 48, h / 30)


def test_letterbox_and_crop_geometry_and_normalization(frame):
    path, pixels = frame
    mean, std = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
    x, fit = kiln.image.preprocess(path, (32, 32), mode="letterbox", mean=mean, std=std, pad=114)
    assert x.shape == (1, 3, 32, 32)
    assert fit.offset == (0, 6) and fit.scale == (32 / 48, 20 / 30)  # 48x30 -> 32x20, 6 rows above
    pix = (x[0].transpose(1, 2, 0) * np.array(std) + np.array(mean)) * 255  # undo the normalization
    np.testing.assert_allclose(pix[:6], 114, atol=1e-3)
    np.testing.assert_allclose(pix[26:], 114, atol=1e-3)
    assert np.max(np.abs(pix[6:26] - bilinear(pixels, 20, 32))) <= 0.5 + 1e-3
    assert fit.to_source(16, 6) == pytest.approx((24, 0))
    c, cfit = kiln.image.preprocess(path, (32, 32), mode="crop")
    assert cfit.scale == (51 / 48, 32 / 30) and cfit.offset == (-9, 0)  # 48x30 -> 51x32, 9 columns cut
    wide = bilinear(pixels, 32, 51)[:, 9:41]
    assert np.max(np.abs(c[0].transpose(1, 2, 0) * 255 - wide)) <= 0.5 + 1e-3


def test_errors(tmp_path, frame):
    path, _ = frame
    with pytest.raises(ValueError, match="unknown preprocessing 'squash'"):
        kiln.image.preprocess(path, (8, 8), mode="squash")
    with pytest.raises(ValueError, match="mean has 2 values"):
        kiln.image.preprocess(path, (8, 8), mean=(0.5, 0.5))
    with pytest.raises(kiln.ProgramError, match="cannot open image"):
        kiln.image.load(tmp_path / "missing.png")
    (tmp_path / "junk.png").write_bytes(b"not an image")
    with pytest.raises(kiln.ProgramError, match="PNG, JPEG and BMP are read"):
        kiln.image.load(tmp_path / "junk.png")


def test_feeds_a_model(frame):
    """The CNN example at 1x3x32x32 from a letterboxed frame: what the runner's --image does."""
    import os
    path, _ = frame
    cnn = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "cnn.kiln")
    m = kiln.load(cnn).methods["forward"]
    x, _ = kiln.image.preprocess(path, (32, 32), mode="letterbox", pad=114)
    assert m(x).shape == (1, 10)
