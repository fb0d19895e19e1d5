"""The three ablation switches, their readable names, and booleans.

``spt``, ``lsa`` and ``learnable_temperature`` are top-level config keys; a
run is named after the switches that are on (``spt+lsa+temp-s0``; the plain
ViT is ``vit``).
"""
from __future__ import annotations

from collections.abc import Mapping

from ablation.config.refusals import ConfigError

SWITCHES = ("spt", "lsa", "learnable_temperature")
SWITCH_SHORT_NAMES = {"spt": "spt", "lsa": "lsa", "learnable_temperature": "temp"}


def as_bool(value, key: str = "switch") -> bool:
    """Hydra parses ``true``/``false`` to bools; anything else is refused."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise ConfigError(f"{key}={value!r} is not a boolean: use {key}=true or {key}=false")


def variant_name(spt, lsa, learnable_temperature) -> str:
    """``vit`` for the plain ViT, else the switches that are on: ``spt+lsa+temp``."""
    on = [SWITCH_SHORT_NAMES[k] for k, v in
          zip(SWITCHES, (spt, lsa, learnable_temperature)) if as_bool(v, k)]
    return "+".join(on) if on else "vit"


def switches(cfg: Mapping) -> dict[str, bool]:
    """The three switches of a config, as booleans."""
    return {k: as_bool(cfg[k], k) for k in SWITCHES}


# The variants' display names (tables, figures, W&B's ``variant`` key), in the tables' order.
VARIANT_LABELS: dict[tuple[bool, bool, bool], str] = {
    (False, False, False): "ViT",
    (True, False, False): "SPT",
    (False, True, False): "LSA mask",
    (False, False, True): "Learnable temp.",
    (True, True, False): "SPT + LSA mask",
    (True, False, True): "SPT + temp.",
    (False, True, True): "LSA (mask + temp.)",
    (True, True, True): "SL-ViT",
}


def variant_label(spt, lsa, learnable_temperature) -> str:
    """The name the tables use: ``SL-ViT`` for all three switches on, ``ViT`` for none."""
    return VARIANT_LABELS[(as_bool(spt, "spt"), as_bool(lsa, "lsa"),
                           as_bool(learnable_temperature, "learnable_temperature"))]
