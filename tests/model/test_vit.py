"""The ViT built from the real configs: sizes, switches, save and load."""
import keras
import numpy as np
import pytest
from omegaconf import OmegaConf

from ablation.model import attention_layers, build_model, temperatures
from tests.helpers.config import compose

CIFAR_SHAPE = (32, 32, 3)


def model_from(*overrides, num_classes=100, input_shape=CIFAR_SHAPE):
    cfg = OmegaConf.to_container(compose(*overrides), resolve=True)
    data = np.random.default_rng(0).uniform(0, 255, (8, *input_shape)).astype("float32")
    return build_model(cfg, num_classes, input_shape, normalization_data=data)


@pytest.mark.parametrize("on, params", [("true", 21_787_755), ("false", 21_759_019)])
def test_keras_io_model_has_the_reference_parameter_count(on, params):
    # ../shared/reference/keras_io_vit_small_ds.py: 21,787,755 (SL-ViT) and 21,759,019 (ViT)
    model = model_from(f"spt={on}", f"lsa={on}")
    assert model.count_params() == params


def trainable_count(model) -> int:
    return sum(int(np.prod(w.shape)) for w in model.trainable_weights)


@pytest.mark.parametrize("spt, lsa, params", [
    ("false", "false", 2_709_796), ("true", "false", 2_747_140),
    ("false", "true", 2_709_904), ("true", "true", 2_747_248)])
def test_paper_model_has_the_official_trainable_parameter_count(spt, lsa, params):
    # aanna0701/SPT_LSA_ViT, CIFAR-100: ViT, SPT only, LSA only, SL-ViT. Equal only
    # with the official q/k/v without bias and one temperature per head.
    model = model_from("model=paper", f"spt={spt}", f"lsa={lsa}")
    assert trainable_count(model) == params
    assert all(not a.qkv_bias and a.temperature_form == "multiply"
               for a in attention_layers(model))


def test_switches_reach_their_layers_independently():
    model = model_from("model=tiny", "spt=false", "lsa=true", "learnable_temperature=false",
                       num_classes=10)
    layers = attention_layers(model)
    assert len(layers) == 2
    assert all(a.mask_diagonal and a.temperature is None for a in layers)
    assert not model.get_layer("patch_tokenizer").shifted
    assert temperatures(model) == {}

    model = model_from("model=tiny", "spt=true", "lsa=false", "learnable_temperature=true",
                       num_classes=10)
    assert model.get_layer("patch_tokenizer").shifted
    assert all(not a.mask_diagonal and a.temperature is not None for a in attention_layers(model))
    assert set(temperatures(model)) == {"temperature/block_0", "temperature/block_1"}


def test_paper_model_uses_a_class_token_and_per_head_temperatures():
    model = model_from("model=paper", "model.depth=2")
    assert model.get_layer("class_token") is not None
    first = attention_layers(model)[0]
    assert first.num_heads == 12 and first.key_dim == 16
    assert tuple(first.temperature.shape) == (12,)
    assert len(temperatures(model)) == 2 * 12
    assert model(np.zeros((2, *CIFAR_SHAPE), "float32")).shape == (2, 100)


@pytest.mark.parametrize("model_name", ["tiny", "paper"])
def test_saved_model_loads_back_with_identical_predictions(tmp_path, model_name):
    model = model_from(f"model={model_name}", "model.depth=2", "spt=true", "lsa=true",
                       num_classes=10, input_shape=(28, 28, 1))
    for a in attention_layers(model):  # make the temperatures non-default
        a.temperature.assign(a.temperature * 1.7)
    images = np.random.default_rng(5).uniform(0, 255, (4, 28, 28, 1)).astype("float32")
    path = tmp_path / "model.keras"
    model.save(path)
    loaded = keras.saving.load_model(path)
    np.testing.assert_array_equal(loaded.predict(images, verbose=0),
                                  model.predict(images, verbose=0))
    assert temperatures(loaded) == temperatures(model)


def weight(model, path):
    return next(np.asarray(w) for w in model.weights if w.path == path)


def test_paper_model_initialises_as_the_official_code():
    model = model_from("model=paper", "spt=true", "lsa=true", "model.depth=3")
    # class token and position embedding torch.randn: standard normal
    for path in ("class_token/token", "position_embedding/embedding"):
        values = weight(model, path)
        assert values.std() == pytest.approx(1.0, rel=0.05 if values.size > 1000 else 0.2)
        assert abs(values.mean()) < 0.1
    # q/k/v: each third of the fused 192 x 576 xavier-normal matrix, variance 2 / 768
    qkv = np.concatenate([weight(model, f"block_{i}/attention/{n}/kernel")
                          for i in range(3) for n in ("query", "key", "value")])
    assert qkv.var() == pytest.approx(2 / 768, rel=0.03)
    # the other Linear layers xavier-normal with their own fans, normal not uniform
    mlp = weight(model, "block_0/mlp/dense_0/kernel")  # 192 -> 384
    assert mlp.var() == pytest.approx(2 / (192 + 384), rel=0.03)
    kurtosis = ((mlp - mlp.mean()) ** 4).mean() / mlp.var() ** 2
    assert kurtosis == pytest.approx(3.0, abs=0.15)    # normal (uniform: 1.8)
    assert weight(model, "logits/kernel").var() == pytest.approx(2 / (192 + 100), rel=0.1)
    assert not weight(model, "block_0/mlp/dense_0/bias").any()
    norms = [layer for layer in model._flatten_layers()
             if isinstance(layer, keras.layers.LayerNormalization)]
    assert len(norms) == 1 + 2 * 3 + 1 and all(n.epsilon == 1e-5 for n in norms)


def test_keras_io_position_embedding_is_the_reference_embedding_init():
    model = model_from("model=keras_io", "model.depth=1")
    values = weight(model, "position_embedding/embedding")
    assert np.abs(values).max() <= 0.05
    assert values.std() == pytest.approx(0.05 / np.sqrt(3), rel=0.03)   # 0.0289
    norms = [layer for layer in model._flatten_layers()
             if isinstance(layer, keras.layers.LayerNormalization)]
    assert norms and all(n.epsilon == 1e-6 for n in norms)


def test_initialisation_is_reproducible_from_the_seed():
    a, b = (model_from("model=paper", "model.depth=1", "seed=3") for _ in range(2))
    c = model_from("model=paper", "model.depth=1", "seed=4")
    path = "position_embedding/embedding"
    assert np.array_equal(weight(a, path), weight(b, path))
    assert not np.array_equal(weight(a, path), weight(c, path))
