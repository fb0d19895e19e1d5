"""AutoAugment's image operations with PIL's semantics, in numpy, one uint8 image at a time.

The official code runs AutoAugment on PIL images; Keras' preprocessing layers
differ in ways the network sees (``Equalization`` pools the batch's
histogram, ``RandomBrightness`` adds where PIL multiplies, ...). These
functions reproduce PIL's integer arithmetic, so each gives PIL's pixels
exactly (tests check them against PIL and the official code's outputs), on
one ``(H, W, C)`` uint8 image without PIL at run time.
"""
from __future__ import annotations

import math

import numpy as np

GREY = 128  # the official policy's fill for pixels shifted in from outside


def _blend(degenerate: np.ndarray, image: np.ndarray, factor: float) -> np.ndarray:
    """``Image.blend(degenerate, image, factor)``: truncated towards zero, clipped."""
    a = degenerate.astype(np.float32)
    out = a + np.float32(factor) * (image.astype(np.float32) - a)
    return np.clip(out, 0, 255).astype(np.uint8)  # float -> uint8 truncates, as PIL's cast


def grey(image: np.ndarray) -> np.ndarray:
    """``convert("L")``: ITU-R 601 luma in PIL's 16-bit fixed point, (H, W, 1)."""
    if image.shape[-1] == 1:
        return image
    rgb = image.astype(np.uint32)
    luma = (rgb[..., 0] * 19595 + rgb[..., 1] * 38470 + rgb[..., 2] * 7471 + 0x8000) >> 16
    return luma.astype(np.uint8)[..., None]


def invert(image: np.ndarray) -> np.ndarray:
    return 255 - image


def posterize(image: np.ndarray, bits: int) -> np.ndarray:
    """Keep the top ``bits`` bits of every channel."""
    return image & np.uint8((0xFF << (8 - int(bits))) & 0xFF)


def solarize(image: np.ndarray, threshold: float) -> np.ndarray:
    """Invert every channel value at or above ``threshold``."""
    return np.where(image < threshold, image, 255 - image).astype(np.uint8)


def autocontrast(image: np.ndarray) -> np.ndarray:
    """Stretch each channel so its darkest value is 0 and its lightest 255."""
    out = np.empty_like(image)
    for c in range(image.shape[-1]):
        channel = image[..., c]
        lo, hi = int(channel.min()), int(channel.max())
        if hi <= lo:
            out[..., c] = channel
            continue
        scale = 255.0 / (hi - lo)
        lut = np.clip((np.arange(256) * scale - lo * scale).astype(np.int64), 0, 255)
        out[..., c] = lut.astype(np.uint8)[channel]
    return out


def equalize(image: np.ndarray) -> np.ndarray:
    """Per channel, map values through the image's own cumulative histogram (PIL's steps)."""
    out = np.empty_like(image)
    for c in range(image.shape[-1]):
        channel = image[..., c]
        histogram = np.bincount(channel.reshape(-1), minlength=256)
        used = histogram[histogram > 0]
        step = (int(used.sum()) - int(used[-1])) // 255 if len(used) > 1 else 0
        if not step:
            out[..., c] = channel
            continue
        before = np.concatenate([[0], np.cumsum(histogram)[:-1]])  # pixels below each value
        lut = np.minimum((step // 2 + before) // step, 255)
        out[..., c] = lut.astype(np.uint8)[channel]
    return out


def color(image: np.ndarray, factor: float) -> np.ndarray:
    """``ImageEnhance.Color``: blend with the grey version (0 = grey, 1 = unchanged)."""
    if image.shape[-1] == 1:
        return image
    return _blend(np.broadcast_to(grey(image), image.shape), image, factor)


def contrast(image: np.ndarray, factor: float) -> np.ndarray:
    """``ImageEnhance.Contrast``: blend with the flat image of the rounded mean luma."""
    mean = int(grey(image).mean(dtype=np.float64) + 0.5)
    return _blend(np.full_like(image, mean), image, factor)


def brightness(image: np.ndarray, factor: float) -> np.ndarray:
    """``ImageEnhance.Brightness``: blend with black, i.e. multiply by ``factor``."""
    return _blend(np.zeros_like(image), image, factor)


def smooth(image: np.ndarray) -> np.ndarray:
    """``ImageFilter.SMOOTH`` (3x3, centre 5, others 1, /13); the border is left as is."""
    x = image.astype(np.float32)
    out = x.copy()
    if min(image.shape[:2]) < 3:
        return image.copy()
    total = np.zeros_like(x[1:-1, 1:-1])
    for dy in (0, 1, 2):
        for dx in (0, 1, 2):
            total += x[dy:dy + x.shape[0] - 2, dx:dx + x.shape[1] - 2]
    total += 4 * x[1:-1, 1:-1]
    out[1:-1, 1:-1] = np.floor(total / np.float32(13) + np.float32(0.5))
    return np.clip(out, 0, 255).astype(np.uint8)


def sharpness(image: np.ndarray, factor: float) -> np.ndarray:
    """``ImageEnhance.Sharpness``: blend with the smoothed image (0 = smooth, 1 = unchanged)."""
    return _blend(smooth(image), image, factor)


def _cubic(v1, v2, v3, v4, d):
    """PIL's ``BICUBIC`` step (Geometry.c): the cubic convolution kernel with a = -1
    through the four taps ``v1..v4`` at offset ``d`` in [0, 1), in PIL's own
    Horner form and order of operations, in float64. Summing explicit tap
    weights instead is the same polynomial rounded otherwise, which truncation
    turns into a grey level's difference on some pixels."""
    p2 = -v1 + v3
    p3 = 2 * (v1 - v2) + v3 - v4
    p4 = -v1 + v2 - v3 + v4
    return v2 + d * (p2 + d * (p3 + d * p4))


def affine(image: np.ndarray, matrix, resample: str = "nearest", fill: int = GREY) -> np.ndarray:
    """``Image.transform(size, AFFINE, matrix, resample, fillcolor=fill)``.

    ``matrix`` (a, b, c, d, e, f) maps an output pixel centre (x + 0.5, y + 0.5)
    to the input point (a x + b y + c, d x + e y + f); a point outside the
    image takes ``fill``. ``nearest`` takes the pixel containing the point;
    ``bicubic`` interpolates the 4 x 4 pixels around it, clamped at the border,
    and truncates (:func:`_cubic`).
    """
    a, b, c, d, e, f = (float(v) for v in matrix)
    h, w = image.shape[:2]
    ys, xs = np.meshgrid(np.arange(h, dtype=np.float64) + 0.5,
                         np.arange(w, dtype=np.float64) + 0.5, indexing="ij")
    xin = a * xs + b * ys + c
    yin = d * xs + e * ys + f
    inside = (xin >= 0) & (xin < w) & (yin >= 0) & (yin < h)
    if resample == "nearest":
        col = np.clip(np.floor(xin).astype(np.int64), 0, w - 1)
        row = np.clip(np.floor(yin).astype(np.int64), 0, h - 1)
        values = image[row, col]
    else:   # bicubic: every caller here names one of the two
        x, y = xin - 0.5, yin - 0.5
        x0, y0 = np.floor(x), np.floor(y)
        dx, dy = (x - x0)[..., None], (y - y0)[..., None]
        pixels = image.astype(np.float64)
        cols = [np.clip(x0.astype(np.int64) + t, 0, w - 1) for t in (-1, 0, 1, 2)]
        # each of the four rows along x first, then the rows along y, as PIL
        rows = [_cubic(*(pixels[np.clip(y0.astype(np.int64) + t, 0, h - 1), c] for c in cols), dx)
                for t in (-1, 0, 1, 2)]
        mixed = _cubic(*rows, dy)
        values = np.where(mixed <= 0, 0, np.where(mixed >= 255, 255, mixed)).astype(np.uint8)
    return np.where(inside[..., None], values, np.uint8(fill)).astype(np.uint8)


def shear_x(image: np.ndarray, amount: float) -> np.ndarray:
    return affine(image, (1, amount, 0, 0, 1, 0), "bicubic")


def shear_y(image: np.ndarray, amount: float) -> np.ndarray:
    return affine(image, (1, 0, 0, amount, 1, 0), "bicubic")


def translate_x(image: np.ndarray, pixels: float) -> np.ndarray:
    return affine(image, (1, 0, pixels, 0, 1, 0), "nearest")


def translate_y(image: np.ndarray, pixels: float) -> np.ndarray:
    return affine(image, (1, 0, 0, 0, 1, pixels), "nearest")


def rotate(image: np.ndarray, degrees: float) -> np.ndarray:
    """``Image.rotate(degrees)`` (counter-clockwise about the centre, nearest), grey fill."""
    h, w = image.shape[:2]
    angle = -math.radians(degrees)
    cos, sin = round(math.cos(angle), 15), round(math.sin(angle), 15)
    cx, cy = w / 2.0, h / 2.0
    c = cos * -cx + sin * -cy + cx
    f = -sin * -cx + cos * -cy + cy
    return affine(image, (cos, sin, c, -sin, cos, f), "nearest")
