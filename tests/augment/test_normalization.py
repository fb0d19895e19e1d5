"""The input normalisation's statistics: exact at CIFAR size, or the official constants."""
import numpy as np
import pytest
from tests.helpers.config import compose
from omegaconf import OmegaConf

from ablation.augment.normalization import (
    AdaptedNormalization, channel_statistics, normalization_statistics)
from ablation.augment.official import erasing_fill
from ablation.config.refusals import ConfigError
from ablation.config.validate import validate


@pytest.fixture(scope="module")
def cifar_sized_noise():
    """50,000 uniform-noise images of 32 x 32 x 3 in raw pixels, float32 as the loader gives."""
    rng = np.random.default_rng(0)
    return rng.integers(0, 256, (50_000, 32, 32, 3), dtype=np.uint8).astype(np.float32)


def config(*overrides):
    return OmegaConf.to_container(compose(*overrides), resolve=True)


def model_statistics(model):
    layer = model.get_layer("augmentation").get_layer("normalization")
    return np.asarray(layer.adapt_mean), np.sqrt(np.asarray(layer.adapt_variance))


@pytest.mark.slow   # slower than a fast-lane test
def test_statistics_are_exact_at_cifar_size(cifar_sized_noise):
    x = cifar_sized_noise
    stats = channel_statistics(x)
    assert np.allclose(stats.mean / 255, 0.5, atol=0.01)        # float32 sums give 0.33
    assert np.allclose(stats.std / 255, 1 / np.sqrt(12), rtol=0.01)
    exact = x[:2000].astype(np.float64).reshape(-1, 3)           # two-pass float64 reference
    assert np.allclose(channel_statistics(x[:2000]).mean, exact.mean(axis=0), rtol=1e-12)
    assert np.allclose(channel_statistics(x[:2000]).std, exact.std(axis=0), rtol=1e-12)
    layer = AdaptedNormalization()                               # the layer's own adapt
    layer.adapt(x)
    assert np.allclose(np.asarray(layer.adapt_mean), stats.mean, rtol=1e-6)


@pytest.mark.slow   # slower than a fast-lane test
def test_the_models_normalisation_is_adapted_exactly_at_cifar_size(cifar_sized_noise):
    from ablation.model import build_model

    cfg = config("model=tiny")   # dataset=cifar100, augmentation=keras_io: adapted
    model = build_model(cfg, 100, (32, 32, 3), normalization_data=cifar_sized_noise)
    mean, std = model_statistics(model)
    assert np.allclose(mean / 255, 0.5, atol=0.01)
    assert np.allclose(std / 255, 1 / np.sqrt(12), rtol=0.01)
    out = np.asarray(model.get_layer("augmentation").get_layer("normalization")(
        cifar_sized_noise[:256]))
    assert abs(out.mean()) < 0.02 and abs(out.std() - 1) < 0.02


@pytest.mark.parametrize("experiment, mean, std", [
    ("paper_cifar100", (0.5070, 0.4865, 0.4409), (0.2673, 0.2564, 0.2762)),
    ("paper_cifar10", (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)),
    ("paper_tiny_imagenet", (0.4802, 0.4481, 0.3975), (0.2770, 0.2691, 0.2821)),
])
def test_the_paper_presets_normalise_with_the_official_constants(experiment, mean, std):
    from ablation.model import build_model

    cfg = config(f"experiment={experiment}", "model.depth=1")
    validate(cfg)
    size = cfg["model"]["image_size"]
    x = np.random.default_rng(1).integers(0, 256, (64, size, size, 3)).astype(np.float32)
    stats = normalization_statistics(cfg, x)
    assert stats.source == "official"
    assert np.allclose(stats.mean, np.array(mean) * 255) and np.allclose(stats.std, np.array(std) * 255)
    got_mean, got_std = model_statistics(build_model(cfg, 10, (size, size, 3), normalization_data=x))
    assert np.allclose(got_mean, np.array(mean) * 255, rtol=1e-6)
    assert np.allclose(got_std, np.array(std) * 255, rtol=1e-6)
    # the official pipeline erases with the official normalised fill: the constants' means
    assert np.allclose((erasing_fill(stats) - stats.mean) / stats.std, mean, atol=1e-6)
    # the official crop's black padding lands where it does in the official code
    assert np.allclose((0 - stats.mean) / stats.std, -np.array(mean) / np.array(std))
    assert stats.as_record() == {"source": "official", "mean": list(mean), "std": list(std)}


def test_official_normalisation_without_official_constants_is_refused():
    with pytest.raises(ConfigError, match="dataset.official_statistics"):
        validate(config("experiment=paper_cifar10", "dataset=digits"))
    with pytest.raises(ConfigError, match="augmentation.normalization"):
        validate(config("augmentation.normalization=exact"))
    cfg = config("experiment=paper_cifar10")
    with pytest.raises(ValueError, match="3 channels, the images 1"):
        normalization_statistics(cfg, np.zeros((4, 8, 8, 1), np.float32))


def test_a_restored_model_reports_the_statistics_it_holds():
    from ablation.augment.normalization import ChannelStatistics, model_statistics
    from ablation.model import build_model

    cfg = config("model=tiny", "dataset=digits")
    x = np.random.default_rng(2).integers(0, 17, (64, 8, 8, 1)).astype(np.float32)
    stats = channel_statistics(x)
    model = build_model(cfg, 10, (8, 8, 1), normalization=stats)
    assert model_statistics(model, stats) is stats               # the config's, as held
    other = ChannelStatistics(stats.mean + 1, stats.std, "adapted")
    held = model_statistics(model, other)                          # a checkpoint's own
    assert held.source == "checkpoint" and np.allclose(held.mean, stats.mean, rtol=1e-6)
