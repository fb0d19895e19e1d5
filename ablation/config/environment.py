"""Values taken from the environment (``${oc.env:VAR}``): where they may stand.

A folder name, a switch, the seed or a setting read from the environment would
name folders and identify runs by a value the command line does not show, so
:func:`check_environment` refuses it; paths and ``wandb.*`` may come from it.
"""
from __future__ import annotations

import re

from ablation.config.folders import FOLDER_KEYS, override_key
from ablation.config.refusals import ConfigError
from ablation.config.settings import dotted, is_setting
from ablation.config.switches import SWITCHES

# ``${oc.env:VAR}`` or ``${oc.env:VAR,default}`` (VAR in group 1) ...
_ENVIRONMENT = re.compile(r"""\$\{\s*oc\.env\s*:\s*['"]?([^,}'"\s]*)""")
# ... and a reference to another key: ``${a.b}``, ``${.x}``, ``${oc.select:a.b,default}``,
# ``${a.list[0]}`` (the key in group 1)
_REFERENCE = re.compile(r"\$\{\s*(?:oc\.select\s*:\s*)?(\.*[A-Za-z_][\w-]*(?:\.[\w-]+)*)\s*[},\[]")


def _raw_values(cfg) -> dict[str, str]:
    """Every dotted key of an unresolved config, groups included (their own text
    empty), and its value as written: ``${...}`` left as it is."""
    from omegaconf import OmegaConf

    return {key: "" if isinstance(value, dict) else value if isinstance(value, str) else str(value)
            for key, value in dotted(OmegaConf.to_container(cfg, resolve=False)).items()}


def _referenced(key: str, reference: str) -> str:
    """The absolute key ``reference`` names from ``key`` (``.x``: a sibling)."""
    dots = len(reference) - len(reference.lstrip("."))
    if not dots:
        return reference
    parent = key.split(".")[:-1]
    return ".".join([*parent[:max(len(parent) - dots + 1, 0)], reference.lstrip(".")])


def _environment_source(raw: dict[str, str]):
    """A function: (key, the text of its value) -> the environment variable that
    value comes from, directly or through other keys at any depth, or None."""
    memo: dict[str, str | None] = {}

    def of_text(key: str, text: str, seen: frozenset) -> str | None:
        if match := _ENVIRONMENT.search(text):
            return match.group(1)
        for reference in _REFERENCE.findall(text):
            if found := of_key(_referenced(key, reference), seen):
                return found
        return None

    def of_key(key: str, seen: frozenset = frozenset()) -> str | None:
        if key in memo:
            return memo[key]
        if key in seen or key not in raw:
            return None
        seen = seen | {key}
        found = of_text(key, raw[key], seen) or next(  # a group: any key below it
            (v for k in raw if k.startswith(f"{key}.") and (v := of_key(k, seen))), None)
        memo[key] = found
        return found

    return lambda key, text: of_text(key, text, frozenset({key}))


def _names_or_defines_the_run(key: str) -> bool:
    """A key whose value names a folder or identifies the run: the folder names,
    the switches and the seed (the run name), and every setting."""
    return key in FOLDER_KEYS or key in SWITCHES or key == "seed" or is_setting(key)


def check_environment(cfg, sweeps=()) -> None:
    """Refuse, in one line, a value taken from the environment (directly or through
    other keys) in a folder name, a switch, the seed or any setting. ``cfg`` is the
    composed, unresolved config; ``sweeps`` the parsed sweep overrides, whose values
    ``cfg`` does not hold."""
    raw = _raw_values(cfg)
    source = _environment_source(raw)
    values = list(raw.items())
    for override in sweeps:
        key = override_key(override.input_line)
        values += [(key, str(v)) for v in getattr(override.value(), "list", None) or ()]
    for key, text in values:
        variable = source(key, text) if _names_or_defines_the_run(key) else None
        if variable is not None:
            raise ConfigError(
                f"{key}={text!r} takes its value from the environment (${variable}): a "
                f"folder name or setting must be written out, so that the command and its "
                f"records say what ran; give the value itself (paths such as dataset.path "
                f"and results_dir may use ${{oc.env:...}})")

