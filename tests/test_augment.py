"""The fused affine augmentation is the chained Keras layers' augmentation, faster."""
import keras
import numpy as np
import pytest

from ablation.augment import build_augmentation
from ablation.augment.affine import AffineAugmentation


def images(n=64, size=16, seed=0):
    """Smooth random images (bilinear resampling differences stay small on them)."""
    rng = np.random.default_rng(seed)
    coarse = rng.normal(size=(n, size // 4, size // 4, 3)).astype("float32")
    return keras.ops.convert_to_numpy(keras.ops.image.resize(coarse, (size, size)))


@pytest.mark.parametrize("training", [False, True])
def test_without_randomness_it_is_exactly_resizing(training):
    x = np.random.default_rng(1).normal(size=(4, 12, 12, 3)).astype("float32")
    fused = AffineAugmentation(30)(x, training=training)
    resized = keras.layers.Resizing(30, 30)(x)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(fused),
                               keras.ops.convert_to_numpy(resized), atol=1e-5)


def test_inference_ignores_flip_rotation_and_zoom():
    x = images(4)
    layer = AffineAugmentation(24, horizontal_flip=True, rotation=0.1, zoom=0.3, seed=0)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(layer(x, training=False)),
                               keras.ops.convert_to_numpy(keras.layers.Resizing(24, 24)(x)),
                               atol=1e-5)


def test_flip_alone_mirrors_about_half_the_images():
    x = images(200)
    out = keras.ops.convert_to_numpy(
        AffineAugmentation(16, horizontal_flip=True, seed=3)(x, training=True))
    flipped = np.all(np.isclose(out, x[:, :, ::-1]), axis=(1, 2, 3))
    same = np.all(np.isclose(out, x), axis=(1, 2, 3))
    assert np.all(flipped | same)
    assert 70 < flipped.sum() < 130


def test_fused_and_chained_layers_agree_in_distribution():
    """Per-image statistics of the two pipelines' outputs have the same law."""
    x = np.repeat(images(8, size=16), 32, axis=0)  # each image augmented 32 times
    kwargs = dict(horizontal_flip=True, rotation=0.05, zoom=0.25, seed=0)
    fused = build_augmentation(40, x, implementation="fused", **kwargs)
    chained = build_augmentation(40, x, implementation="keras_layers", **kwargs)
    a = keras.ops.convert_to_numpy(fused(x, training=True)).reshape(8, 32, -1)
    b = keras.ops.convert_to_numpy(chained(x, training=True)).reshape(8, 32, -1)
    assert a.shape == b.shape
    # the same mean and spread of every image's augmented copies ...
    np.testing.assert_allclose(a.mean(axis=(1, 2)), b.mean(axis=(1, 2)), atol=0.08)
    np.testing.assert_allclose(a.std(axis=(1, 2)), b.std(axis=(1, 2)), rtol=0.1)
    # ... the same amount of variation between copies (how strong the augmentation is)
    spread_a, spread_b = a.std(axis=1).mean(), b.std(axis=1).mean()
    assert spread_a == pytest.approx(spread_b, rel=0.2)
    # and both really augment: copies differ from the plain resize
    plain = keras.ops.convert_to_numpy(fused(x, training=False)).reshape(8, 32, -1)
    assert np.abs(a - plain).mean() > 0.05 and np.abs(b - plain).mean() > 0.05


def test_round_trips_its_config():
    layer = AffineAugmentation(24, horizontal_flip=True, rotation=0.02, zoom=0.2, seed=5)
    clone = AffineAugmentation.from_config(layer.get_config())
    assert clone.get_config() == layer.get_config()


# --- the official recipe's AutoAugment operations, against PIL itself -------------------

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
    from ablation.augment.autoaugment import CIFAR10_POLICY
    from ablation.augment.official import SIGNED

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
