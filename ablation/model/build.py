""":func:`build_model`: the model a run config describes, built by its architecture's
function (``model.architecture``), each switch that function's argument of its name."""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import keras
import numpy as np

from ablation.augment.normalization import ChannelStatistics, normalization_statistics
from ablation.config.choices import ARCHITECTURES
from ablation.config.switches import switches
from ablation.model.cait import build_cait
from ablation.model.pit import build_pit
from ablation.model.swin import build_swin
from ablation.model.t2t import build_t2t
from ablation.model.vit import build_vit

BUILDERS = dict(zip(ARCHITECTURES, (build_vit, build_t2t, build_cait, build_pit, build_swin),
                    strict=True))
# Model keys that one architecture alone reads: a preset of another holds them as null.
OWN_KEYS = {"cait": ("class_depth", "official_cait_mask")}
STAGED = ("pit", "swin")   # architectures whose model.depth lists blocks per stage


def model_arguments(model: Mapping) -> tuple[str, dict]:
    """(architecture, its build function's keyword arguments) from the ``model`` group:
    every key but ``name`` and ``architecture`` and other architectures' own (null) keys."""
    kwargs = {k: v for k, v in dict(model).items() if k not in ("name", "architecture")}
    architecture = model["architecture"]   # one of BUILDERS: the schema refuses others
    if isinstance(kwargs["depth"], list) != (architecture in STAGED):
        raise ValueError(f"model.depth={kwargs['depth']!r}: a list (blocks per stage) for "
                         f"architecture={' or '.join(STAGED)}, a number of blocks otherwise")
    for other, keys in OWN_KEYS.items():
        if other == architecture:
            continue
        for key in keys:
            if kwargs.pop(key) is not None:
                raise ValueError(f"model.{key} is a setting of architecture={other}: "
                                 f"null for architecture={architecture}")
    return architecture, kwargs


def build_model(cfg: Mapping, num_classes: int, input_shape: Sequence[int],
                normalization_data: np.ndarray | None = None,
                normalization: ChannelStatistics | None = None) -> keras.Model:
    """The model a run config describes, each switch the build function's argument of
    its name; normalised with ``normalization``, else the statistics the config asks
    for with ``normalization_data`` as the training images."""
    if normalization is None:
        normalization = normalization_statistics(cfg, normalization_data)
    architecture, model_kwargs = model_arguments(cfg["model"])
    return BUILDERS[architecture](
        num_classes,
        input_shape,
        **switches(cfg),
        augmentation=dict(cfg["augmentation"]),
        normalization=normalization,
        seed=int(cfg["seed"]),
        **model_kwargs,
    )
