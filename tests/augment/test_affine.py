"""The fused affine augmentation (ablation/augment/affine.py) is the chained Keras
layers' augmentation, faster."""
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
