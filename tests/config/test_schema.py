"""One validated config object: every preset composes to a config holding every
declared key, the schema declares no default, and no module under ``ablation/``
reads a config key with a fallback (``cfg.get("key", default)``): a default lives
in ``conf/`` only, and code reads the validated config."""
from __future__ import annotations

import ast
from typing import get_args

import pytest
from pydantic import BaseModel

from ablation.config import validate
from ablation.config.schema import RunConfig, missing_keys
from tests.helpers.config import compose
from tests.helpers.paths import CONF, ROOT

PACKAGE = ROOT / "ablation"

# Names that hold the run config, or one of its groups, wherever the package reads one.
CONFIG_NAMES = frozenset({
    "cfg", "config", "job", "jobs", "composed", "trainer", "model", "dataset",
    "augmentation", "mixing", "recipe", "diagnostics", "wandb", "tune", "gpu"})

# Functions whose config is not a validated run config, so a fallback is right there:
# a record's copy (written by any earlier version), or another tool's settings.
NOT_A_RUN_CONFIG = {
    ("config/backend.py", "keras_backend_setting"): "Keras's own keras.json",
    ("train/compile.py", "pad_batches"): "Keras's compile config of a (restored) model",
    ("report/load.py", "unusable"): "a record's config, checked before the report uses it",
    ("report/load.py", "timed_steps"): "a record's config",
    ("report/load.py", "temperature_start"): "a record's config",
    ("report/load.py", "architecture"): "a record's config",
    ("sweep/speed.py", "speed_key"): "a job's config, and a record's to match it with",
    ("sweep/speed.py", "earlier_speed"): "a record's config",
}


def _group_options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF / group).glob("*.yaml"))


PRESETS = [
    (),
    *[(f"experiment={name}",) for name in _group_options("experiment")],
    *[(f"{group}={name}",) for group in ("dataset", "model", "trainer", "augmentation")
      for name in _group_options(group)],
    *[("experiment=smoke", f"tune={name}") for name in _group_options("tune")],
]


def _resolved(overrides):
    from omegaconf import OmegaConf

    return OmegaConf.to_container(compose(*overrides), resolve=True)


def _model_of(annotation) -> type[BaseModel] | None:
    return next((a for a in (annotation, *get_args(annotation))
                 if isinstance(a, type) and issubclass(a, BaseModel)), None)


@pytest.mark.parametrize("overrides", PRESETS, ids=lambda o: " ".join(o) or "default")
def test_every_preset_holds_every_key_and_validates(overrides):
    config = _resolved(overrides)
    if overrides == ("experiment=paper_tiny_imagenet",) or overrides == ("dataset=image_folder",):
        config["dataset"]["path"] = str(CONF)  # the folder must be given; any path passes here
    assert missing_keys(config) == []
    assert validate(config) == config  # the checked config itself, every key in it


def _fields(schema: type[BaseModel], prefix: str = ""):
    for name, info in schema.model_fields.items():
        yield prefix + name, info
        for arg in (info.annotation, *get_args(info.annotation)):
            if (group := _model_of(arg)) is not None:
                yield from _fields(group, f"{prefix}{name}.")


def test_the_schema_declares_no_default():
    defaulted = [key for key, info in _fields(RunConfig) if not info.is_required()]
    assert defaulted == [], f"defaults belong in conf/, not the schema: {defaulted}"


def test_a_missing_key_is_refused_naming_it():
    from ablation.config import ConfigError
    from ablation.sweep.preflight import check_command_line

    config = _resolved(("experiment=smoke",))
    del config["trainer"]["passes_per_epoch"]
    with pytest.raises(ConfigError, match=r"trainer\.passes_per_epoch is missing"):
        validate(config)
    # before Hydra starts, where the command reads the config to choose a launcher
    with pytest.raises(ConfigError, match=r"^gpu\.jobs_at_once is missing"):
        check_command_line(["-m", "experiment=smoke", "~gpu.jobs_at_once"], CONF)


def _root(node: ast.AST) -> str | None:
    """The name a receiver starts from: ``cfg`` for ``cfg["gpu"]``, ``cfg.gpu`` and
    ``(cfg.get("wandb") or {})``."""
    while True:
        if isinstance(node, ast.Name):
            return node.id
        if isinstance(node, (ast.Attribute, ast.Subscript)):
            node = node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            node = node.func.value
        elif isinstance(node, ast.BoolOp):
            node = node.values[0]
        else:
            return None


def fallback_reads(source: str, path: str) -> list[str]:
    """``path:line: text`` of every ``<config>.get("key"[, default])`` in ``source``
    outside :data:`NOT_A_RUN_CONFIG`."""
    tree = ast.parse(source)
    found = []

    def visit(node: ast.AST, function: str | None) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            function = node.name
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "get" and node.args
                and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)
                and _root(node.func.value) in CONFIG_NAMES
                and (path, function) not in NOT_A_RUN_CONFIG):
            found.append(f"{path}:{node.lineno}: {ast.unparse(node)}")
        for child in ast.iter_child_nodes(node):
            visit(child, function)

    visit(tree, None)
    return found


def test_the_scan_finds_a_fallback_read():
    code = ("def f(config, trainer):\n"
            "    a = config.get('seed', 0)\n"
            "    b = (config.get('augmentation') or {}).get('mixing')\n"
            "    c = trainer['epochs']\n"
            "    d = record.get('config')\n")
    assert [line.split(": ", 1)[1] for line in fallback_reads(code, "x.py")] == [
        "config.get('seed', 0)", "(config.get('augmentation') or {}).get('mixing')",
        "config.get('augmentation')"]


def test_no_config_key_is_read_with_a_fallback():
    found = [line for file in sorted(PACKAGE.rglob("*.py"))
             for line in fallback_reads(file.read_text(), str(file.relative_to(PACKAGE)))]
    assert found == [], "read the validated config instead:\n" + "\n".join(found)


def test_the_allow_list_names_functions_that_exist():
    for (path, function), _ in NOT_A_RUN_CONFIG.items():
        tree = ast.parse((PACKAGE / path).read_text())
        assert function in {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
