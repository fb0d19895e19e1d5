"""The official recipe's AutoAugment (ablation/augment/official.py and pil_ops.py):
every operation against PIL itself, and the policy's draws."""
import numpy as np
import pytest


def natural_images(n=12, side=32, seed=0):
    """Smooth colour fields plus noise (what CIFAR crops look like to a histogram),
    and one image of pure noise."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        base = Image.fromarray(rng.integers(0, 256, (4, 4, 3)).astype(np.uint8))
        image = np.asarray(base.resize((side, side), Image.BILINEAR), np.float32)
        out.append(np.clip(image + rng.normal(0, 20, image.shape), 0, 255).astype(np.uint8))
    out.append(rng.integers(0, 256, (side, side, 3)).astype(np.uint8))
    return out


def pil_operation(name, value, sign):
    """The official code's operation (utils/transforms.py) on a PIL image."""
    from PIL import Image, ImageEnhance, ImageOps

    v = value * sign
    grey = (128, 128, 128)
    enhance = {"color": ImageEnhance.Color, "contrast": ImageEnhance.Contrast,
               "sharpness": ImageEnhance.Sharpness, "brightness": ImageEnhance.Brightness}
    if name in enhance:
        return lambda im: enhance[name](im).enhance(1 + v)
    if name in ("shear_x", "shear_y", "translate_x", "translate_y"):
        def transform(im):
            data = {"shear_x": (1, v, 0, 0, 1, 0), "shear_y": (1, 0, 0, v, 1, 0),
                    "translate_x": (1, 0, v * im.size[0], 0, 1, 0),
                    "translate_y": (1, 0, 0, 0, 1, v * im.size[1])}[name]
            if name.startswith("shear"):
                return im.transform(im.size, Image.AFFINE, data, Image.BICUBIC, fillcolor=grey)
            return im.transform(im.size, Image.AFFINE, data, fillcolor=grey)
        return transform
    if name == "rotate":
        def rotate(im):
            rot = im.convert("RGBA").rotate(value)
            return Image.composite(rot, Image.new("RGBA", rot.size, (128,) * 4),
                                   rot).convert(im.mode)
        return rotate
    return {"posterize": lambda im: ImageOps.posterize(im, int(value)),
            "solarize": lambda im: ImageOps.solarize(im, value),
            "autocontrast": ImageOps.autocontrast, "equalize": ImageOps.equalize,
            "invert": ImageOps.invert}[name]


def policy_operations():
    from ablation.augment.official import CIFAR10_POLICY, SIGNED

    keys = sorted({(name, index) for sub in CIFAR10_POLICY for name, _, index in sub})
    keys += [("shear_x", 9), ("color", 0)]  # not in the CIFAR-10 table: still PIL's
    return [(name, index, sign) for name, index in keys
            for sign in ((1, -1) if name in SIGNED else (1,))]


@pytest.mark.parametrize("name, index, sign", policy_operations())
def test_every_policy_operation_is_pils_exactly(name, index, sign):
    from PIL import Image

    from ablation.augment.official import apply_operation, magnitude

    value = magnitude(name, index)
    reference = pil_operation(name, value, sign)
    for image in natural_images():
        expected = np.asarray(reference(Image.fromarray(image)), dtype=np.int16)
        got = apply_operation(image, name, value, sign).astype(np.int16)
        assert got.shape == expected.shape
        assert np.array_equal(got, expected), (name, index, sign, np.abs(got - expected).max())


def test_equalize_is_per_image_and_posterize_keeps_five_bits():
    from ablation.augment import pil_ops
    from ablation.augment.official import magnitude

    images = natural_images(4)
    alone = pil_ops.equalize(images[0])
    assert np.array_equal(alone, pil_ops.equalize(images[0].copy()))  # needs no batch
    assert np.abs(alone.astype(int) - images[0]).mean() > 5           # and does something
    assert magnitude("posterize", 7) == 5
    assert np.all(pil_ops.posterize(images[1], 5) % 8 == 0)


def test_autoaugment_draws_subpolicies_uniformly_and_signs_evenly():
    from ablation.augment import official

    image = natural_images(1)[0]
    calls = []

    def spy(im, name, value, sign=1):
        calls.append((name, value, sign))
        return im
    rng = np.random.default_rng(0)
    original = official.apply_operation
    official.apply_operation = spy
    try:
        for _ in range(4000):
            official.autoaugment(image, rng)
    finally:
        official.apply_operation = original
    # translate_y at index 9: sub-policies 3 (p 0.7), 21 (0.9 then 0.7) and 24 (0.7)
    ty = [c for c in calls if c[0] == "translate_y" and c[1] == pytest.approx(150 / 331)]
    expected = 4000 / 25 * (0.7 + 0.9 + 0.7 + 0.7)
    assert len(ty) == pytest.approx(expected, rel=0.1)
    assert np.mean([c[2] > 0 for c in ty]) == pytest.approx(0.5, abs=0.06)
    rotations = [c for c in calls if c[0] == "rotate"]
    assert rotations and all(c[1] == pytest.approx(20 / 3) for c in rotations)  # +m, always
    assert len(rotations) == pytest.approx(4000 / 25 * 0.7, rel=0.2)
