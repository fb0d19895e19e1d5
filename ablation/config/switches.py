"""The ablation switches, declared once: every name, label and column comes from here.

``spt``, ``lsa`` and ``learnable_temperature`` are top-level config keys and
arguments of :func:`ablation.model.vit.build_vit`; everything else that names or
shows a switch is derived from :data:`REGISTRY`. Adding a switch is an entry here,
its key in ``conf/config.yaml`` and its argument of the one layer it changes
(docs/development/README.md).
"""
from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass

from ablation.config.refusals import ConfigError


@dataclass(frozen=True)
class Switch:
    """One ablation switch."""

    key: str                   # the config key (a top-level boolean) and the model argument
    short: str                 # its part of a variant's name, hence of folder names (``temp``)
    column: str                # its column in the comparison table (``Temp.``)
    alone: str                 # the variant with only this switch on (``Learnable temp.``)
    piece: str                 # its part of a combined variant's label (``SPT + temp.``)
    factor: str                # its name as a term of the factorial effects (``Temp.``)
    line: tuple[str, str, str]  # the job line's key and its words for on and off
    # the switch whose value this one takes unless named (``${lsa}``): the tables show
    # the variants where it does, and the two count as one factor
    follows: str | None = None
    together: str | None = None  # the factor's name when the two move together


REGISTRY: tuple[Switch, ...] = (
    Switch("spt", short="spt", column="SPT", alone="SPT", piece="SPT", factor="SPT",
           line=("spt", "on", "off")),
    Switch("lsa", short="lsa", column="LSA", alone="LSA mask", piece="LSA mask",
           factor="LSA mask", line=("lsa", "on", "off"), together="LSA (mask + temp.)"),
    Switch("learnable_temperature", short="temp", column="Temp.", alone="Learnable temp.",
           piece="temp.", factor="Temp.", line=("temperature", "learnable", "fixed"),
           follows="lsa"),
)
# The config keys, in the registry's order.
SWITCHES: tuple[str, ...] = tuple(s.key for s in REGISTRY)
# The variants the paper and the keras.io example name, by the switches that are on.
NAMED_VARIANTS: dict[frozenset, str] = {
    frozenset(): "ViT",
    frozenset({"lsa", "learnable_temperature"}): "LSA (mask + temp.)",
    frozenset({"spt", "lsa", "learnable_temperature"}): "SL-ViT",
}
BASELINE_LABEL = NAMED_VARIANTS[frozenset()]
SL_LABEL = NAMED_VARIANTS[frozenset({"spt", "lsa", "learnable_temperature"})]  # the paper's "SL-"


def card_sweep() -> list[str]:
    """The product's sweep: each switch that follows no other, true and false
    (``spt=true,false lsa=true,false``: the paper's four variants)."""
    return [f"{s.key}=true,false" for s in REGISTRY if not s.follows]


def as_bool(value, key: str = "switch") -> bool:
    """Hydra parses ``true``/``false`` to bools; anything else is refused."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise ConfigError(f"{key}={value!r} is not a boolean: use {key}=true or {key}=false")


def switches(cfg: Mapping) -> dict[str, bool]:
    """The switches of a config, as booleans."""
    return {k: as_bool(cfg[k], k) for k in SWITCHES}


def variant_name(flags: Mapping) -> str:
    """``vit`` for the plain ViT, else the switches that are on: ``spt+lsa+temp``."""
    on = [s.short for s in REGISTRY if as_bool(flags.get(s.key, False), s.key)]
    return "+".join(on) if on else "vit"


def variant_label(flags: Mapping) -> str:
    """The name the tables use: ``SL-ViT`` for the paper's three switches on, ``ViT``
    for none, else the switches' label pieces (``SPT + LSA mask``)."""
    on = [s for s in REGISTRY if as_bool(flags.get(s.key, False), s.key)]
    named = NAMED_VARIANTS.get(frozenset(s.key for s in on))
    if named:
        return named
    return on[0].alone if len(on) == 1 else " + ".join(s.piece for s in on)


def variants() -> dict[tuple[bool, ...], str]:
    """Every combination of the switches (a tuple in :data:`SWITCHES` order) -> its
    label, in the tables' order: fewer switches first, then the registry's order."""
    n = len(SWITCHES)
    out = {}
    for count in range(n + 1):
        for on in itertools.combinations(range(n), count):
            key = tuple(i in on for i in range(n))
            out[key] = variant_label(dict(zip(SWITCHES, key)))
    return out


def tied_variants() -> list[tuple[bool, ...]]:
    """The variants where every following switch equals the one it follows (the
    paper's four: ViT, SPT, LSA (mask + temp.), SL-ViT)."""
    index = {k: i for i, k in enumerate(SWITCHES)}
    return [key for key in variants()
            if all(key[index[s.key]] == key[index[s.follows]] for s in REGISTRY if s.follows)]


def factor_labels(factors: list[str]) -> dict[str, str]:
    """Each factor's label: a switch that its follower moved with is named for both."""
    moved_with = {s.follows for s in REGISTRY if s.follows and s.key not in factors}
    return {s.key: (s.together or s.factor) if s.key in moved_with else s.factor
            for s in REGISTRY}


def job_line(flags: Mapping) -> str:
    """``spt=on lsa=off temperature=fixed``."""
    return " ".join(f"{s.line[0]}={s.line[1] if flags[s.key] else s.line[2]}" for s in REGISTRY)
