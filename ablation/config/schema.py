"""The declared type and range of every config setting, as one pydantic model.

Each group of ``conf/`` has a model here, each key a type with its bounds and the
phrase a refusal ends with; :func:`check_schema` turns pydantic's report into one
line (``trainer.label_smoothing='abc' must be a number in [0, 1)``).

No field has a default: the defaults live in ``conf/`` only, and a missing key is
refused, naming it. Keys added with ``+group.key=...`` are accepted, except in
``model``, whose keys are the model's arguments.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal, get_args

from pydantic import (AfterValidator, BaseModel, ConfigDict, Field, Strict, StrictBool,
                      StrictInt, StrictStr, ValidationError, create_model)
from pydantic.fields import FieldInfo

from ablation.config.refusals import ConfigError
from ablation.config.switches import SWITCHES
from ablation.config.choices import (ARCHITECTURES, AUGMENTATION_IMPLEMENTATIONS, EPSILON_FORMS,
                                     INITIALISATIONS, NORMALIZATIONS, PRECISIONS, PROTOCOLS,
                                     WANDB_MODES)


def _number(predicate: str, **bounds):
    """A finite float (an int is accepted; a bool, a string, nan and inf are not)."""
    return Annotated[float, Strict(), Field(allow_inf_nan=False, description=predicate, **bounds)]


def _integer(predicate: str, **bounds):
    return Annotated[StrictInt, Field(description=predicate, **bounds)]


def _one_of(values: tuple) -> Any:
    return Annotated[Literal[values], Field(description=f"is not one of {', '.join(map(str, values))}")]


def _switch(value):
    """A switch is read with :func:`ablation.config.switches.as_bool`."""
    if isinstance(value, bool) or (isinstance(value, str) and value.lower() in ("true", "false")):
        return value
    raise ValueError("not a boolean")


MAX_ATTENTION_MAPS = 32  # probe images whose maps a run saves: the report draws a row each
# Counts stay below 2**31: TensorFlow takes them as 32-bit integers.
PositiveInt = _integer("must be a positive integer below 2**31", gt=0, lt=2**31)
Count = _integer("must be an integer in [0, 2**31)", ge=0, lt=2**31)
Seed = _integer("must be an integer in [0, 2**32)", ge=0, lt=2**32)
PositiveNumber = _number("must be a positive number", gt=0)
NonNegative = _number("must be a number >= 0", ge=0)
Rate = _number("must be a rate in [0, 1)", ge=0, lt=1)
Fraction = _number("must be a number in (0, 1)", gt=0, lt=1)
Probability = _number("must be a probability in [0, 1]", ge=0, le=1)
Flag = Annotated[StrictBool, Field(description="must be true or false")]
Switch = Annotated[Any, AfterValidator(_switch),
                   Field(description="is not a boolean: use {key}=true or {key}=false")]
Text = Annotated[StrictStr, Field(description="must be a string")]
# Names may be numbers on the command line (name=2026): they only name folders and runs.
Name = Annotated[StrictStr | StrictInt, Field(description="must be text or a whole number")]
Units = Annotated[list[PositiveInt], Field(description="must be a list of positive integers")]
Texts = Annotated[list[StrictStr], Field(description="must be a list of strings")]


class _Group(BaseModel):
    """A group: frozen, and a key added with ``+group.key=...`` accepted."""
    model_config = ConfigDict(extra="allow", frozen=True)


class _Closed(_Group):
    """A group that takes only its declared keys."""
    model_config = ConfigDict(extra="forbid")


class Trainer(_Group):
    epochs: PositiveInt
    batch_size: PositiveInt
    learning_rate: PositiveNumber
    weight_decay: NonNegative
    optimizer_epsilon: PositiveNumber
    epsilon_form: _one_of(EPSILON_FORMS)
    warmup_fraction: Annotated[NonNegative, Field(lt=1, description="must be in [0, 1)")]
    warmup_epochs: Count | None
    min_learning_rate: NonNegative
    label_smoothing: Annotated[Rate, Field(description="must be a number in [0, 1)")]
    passes_per_epoch: PositiveInt
    protocol: _one_of(PROTOCOLS)
    precision: _one_of(PRECISIONS)
    verbose: Annotated[Literal["auto", 0, 1, 2],
                       Field(description="is not one of auto, 0, 1, 2")]
    checkpoint: Flag
    save_model: Flag
    data_workers: PositiveInt
    pad_batches: Annotated[Literal["auto", True, False],
                           Field(description="is not one of auto, true, false")]


class Model(_Closed):
    name: Name
    image_size: PositiveInt
    patch_size: PositiveInt
    dim: PositiveInt
    depth: Annotated[PositiveInt | list[PositiveInt], Field(description=(
        "must be a positive integer below 2**31, or a list (pit, swin)"))]
    num_heads: PositiveInt
    key_dim: PositiveInt | None
    mlp_hidden_units: Units
    mlp_output_units: PositiveInt | None
    dropout: Rate
    attention_dropout: Rate
    embedding_dropout: Rate
    pooling: _one_of(("flatten", "class_token", "mean"))
    head_units: Units
    head_dropout: Rate
    temperature_per_head: Flag
    temperature_form: _one_of(("divide", "multiply"))
    qkv_bias: Flag
    drop_path: Rate
    init: _one_of(INITIALISATIONS)
    layer_norm_epsilon: PositiveNumber
    architecture: _one_of(tuple(ARCHITECTURES))  # the build function (ablation/model/build.py)
    class_depth: PositiveInt | None      # cait's own; null in a vit preset
    official_cait_mask: Flag | None      # cait's own; null in a vit preset


class Statistics(_Closed):
    mean: Annotated[list[_number("must be in [0, 1]", ge=0, le=1)], Field(
        min_length=1, max_length=3, description="must be a list of 1 or 3 numbers in [0, 1]")]
    std: Annotated[list[_number("must be positive", gt=0)], Field(
        min_length=1, max_length=3, description="must be a list of 1 or 3 positive numbers")]


class Dataset(_Group):
    official_statistics: Statistics | None
    name: Text
    path: Annotated[StrictStr, Field(description="must be a path")] | None
    search_paths: Texts
    class_names: Annotated[list[StrictStr | StrictInt], Field(description="must be a list of names")] | None
    image_size: PositiveInt | None
    channels: _one_of((1, 3)) | None
    test_fraction: Fraction | None
    validation_fraction: Fraction
    split_seed: Seed
    limit_train: PositiveInt | None
    limit_test: PositiveInt | None
    train_size: PositiveInt | None  # dataset=synthetic: the images drawn per split
    test_size: PositiveInt | None
    num_classes: Annotated[StrictInt, Field(ge=2, description="must be an integer >= 2")] | None


class Mixing(_Group):
    probability: Probability
    mixup_alpha: NonNegative
    cutmix_alpha: NonNegative


class Augmentation(_Group):
    horizontal_flip: Flag
    rotation: Annotated[NonNegative, Field(description="must be a number >= 0 (turns)")]
    zoom: Rate
    implementation: _one_of(AUGMENTATION_IMPLEMENTATIONS)
    crop_padding: Count
    policy: _one_of(("autoaugment", "randaugment")) | None
    random_erasing: Probability
    mixing: Mixing
    normalization: _one_of(NORMALIZATIONS)


class Wandb(_Group):
    mode: _one_of(WANDB_MODES)
    project: Name
    entity: Name | None
    group: Name | None
    tags: Texts
    verbose: Flag
    log_model: Flag


class Gpu(_Group):
    share_memory: Flag
    jobs_at_once: Annotated[Literal["auto"] | PositiveInt,
                            Field(description="must be auto or a positive integer")]
    compilation_cache: Annotated[StrictStr, Field(pattern=r"\S", description="must be a folder path, or null to compile every time")] | None
    devices: Annotated[list[Annotated[StrictInt, Field(ge=0)]
                            | Annotated[StrictStr, Field(pattern=r"^[A-Za-z0-9-]+$")]],
                       Field(min_length=1, description="must be a list of GPU ids, e.g. [0,1], or null for every visible GPU")] | None


class Diagnostics(_Group):
    enabled: Flag
    probe_images: Count  # positive when enabled: ablation.config.validate
    probe_seed: Seed
    every_epoch: Flag
    attention_maps: _integer(f"must be an integer in [0, {MAX_ATTENTION_MAPS}] (the maps the "
                             f"report draws)", ge=0, le=MAX_ATTENTION_MAPS)


class Published(_Closed):
    source: Text
    dataset: Text  # the dataset.name the figures were published for
    top1: Annotated[dict[StrictStr, dict[StrictStr, _number(
        "must be a percentage in [0, 100]", ge=0, le=100)]],
        Field(description="must map model presets to variant labels (ViT, SL-ViT) to "
                          "percentages in [0, 100]")]


class Report(_Group):
    after_sweep: Flag
    plots: Flag
    published: Published | None  # the paper's top-1 beside the measured one


class Tune(_Group):
    """``tune=...``: each variant's search on validation (hydra_plugins.vit_ablation.tuned_sweep)."""
    params: Annotated[list[StrictStr], Field(min_length=1,
                                             description="must be a list of dotted config keys")]
    spread: Annotated[float, Strict(), Field(allow_inf_nan=False, gt=1,
                                             description="must be a number > 1")]
    trials: PositiveInt
    sampler_seed: Seed
    search_seed: Seed
    epochs: PositiveInt | None
    role: _one_of(("trial", "final"))
    study: Text | None
    trial: Count | None


# every switch of the registry (ablation.config.switches), first
_Switches = create_model("_Switches", __base__=_Group, **{key: (Switch, ...) for key in SWITCHES})


class RunConfig(_Switches):
    """A job's whole config (``hydra`` aside), resolved."""
    seed: Seed
    name: Name
    results_dir: Text
    sweep_id: Name
    run_name: Name
    resume: Flag
    estimate: Flag
    report: Report
    dataset: Dataset
    model: Model
    augmentation: Augmentation
    trainer: Trainer
    wandb: Wandb
    gpu: Gpu
    diagnostics: Diagnostics
    tune: Tune | None


def declared(key: str) -> bool:
    """Whether the dotted ``key`` has a declared type (a setting or a group)."""
    return _field(key.split(".")) is not None


def _field(path: list[str]) -> FieldInfo | None:
    schema: Any = RunConfig
    info = None
    for name in path:
        if schema is dict:  # a mapping's own keys (report.published.top1.ViT): its field's
            continue
        if not (isinstance(schema, type) and issubclass(schema, BaseModel)) \
                or name not in schema.model_fields:
            return None
        info = schema.model_fields[name]
        schema = group if (group := _group_model(info)) is not None else info.annotation
        schema = dict if getattr(schema, "__origin__", None) is dict or any(
            getattr(a, "__origin__", None) is dict for a in get_args(schema)) else schema
    return info


def _predicate(info: FieldInfo | None) -> str:
    """The refusal's ending declared for a field (an optional one: "..., or null")."""
    if info is None:
        return "has a value of the wrong type"
    if info.description:
        return info.description
    for arg in get_args(info.annotation):
        for meta in getattr(arg, "__metadata__", ()):
            if isinstance(meta, FieldInfo) and meta.description:
                return meta.description + ("" if "null" in meta.description else ", or null")
    return "has a value of the wrong type"


def refusal(error: dict, config: Mapping) -> str:
    """One line for one of pydantic's errors about ``config``."""
    path, value, node = [], None, config
    for part in error["loc"]:  # the config keys (list positions and union tags aside)
        if not isinstance(part, str) or not isinstance(node, Mapping) or part not in node:
            break
        path.append(part)
        node = value = node[part]
    key = ".".join(str(p) for p in (path or error["loc"][:1]))
    if error["type"] == "missing":
        return f"{'.'.join(map(str, error['loc']))} is missing (set it in the config)"
    if error["type"] == "extra_forbidden":
        group = path[0] if len(path) > 1 else "the config"
        return (f"{key} is not a setting of {group}: its keys are "
                f"{', '.join(RunConfig.model_fields[group].annotation.model_fields)}"
                if group in RunConfig.model_fields else f"{key} is not a setting")
    if error["type"] == "finite_number":
        return f"{key}={value!r} must be a finite number (not nan or inf)"
    return f"{key}={value!r} {_predicate(_field(path)).format(key=key)}"


def check_schema(config: Mapping) -> None:
    """Refuse, in one line, the first value of ``config`` whose type or range is wrong."""
    try:
        RunConfig.model_validate(dict(config))
    except ValidationError as e:
        raise ConfigError(refusal(e.errors()[0], config)) from None


def missing_keys(config: Mapping, schema: type[BaseModel] = RunConfig,
                 prefix: str = "") -> list[str]:
    """The declared dotted keys ``config`` lacks, in every group it holds."""
    missing = []
    for name, info in schema.model_fields.items():
        if name not in config:
            missing.append(prefix + name)
        elif (group := _group_model(info)) is not None and isinstance(config[name], Mapping):
            missing += missing_keys(config[name], group, f"{prefix}{name}.")
    return missing


def _group_model(info: FieldInfo) -> type[BaseModel] | None:
    return next((a for a in (info.annotation, *get_args(info.annotation))
                 if isinstance(a, type) and issubclass(a, BaseModel)), None)


def declared_keys(schema: type[BaseModel] = RunConfig, prefix: str = "") -> dict[str, str]:
    """Every declared dotted key and what its value must be (the docs' table)."""
    keys = {}
    for name, info in schema.model_fields.items():
        if (group := _group_model(info)) is not None:
            keys.update(declared_keys(group, f"{prefix}{name}."))
        else:
            keys[f"{prefix}{name}"] = _predicate(info).format(key=f"{prefix}{name}")
    return keys
