"""Refuse a config that cannot train, with one line naming the fix, before
any data is loaded or any model trained; what passes is the run's config, read
as it is (every key there: its schema declares no default)."""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ablation.config.refusals import ConfigError
from ablation.config.switches import as_bool


# W&B's own limits, which it enforces only when the run starts or (offline) is uploaded.
WANDB_MAX_TAG = 64
WANDB_MAX_PROJECT = 128
WANDB_MAX_GROUP = 128   # the server's column; a longer group fails the upload
WANDB_FORBIDDEN = "/\\#?%:"  # in a project or an entity


def _shown(text: str) -> str:
    """A long value in a refusal, shortened as W&B shows it: its ends."""
    return repr(text) if len(text) <= 43 else repr(f"{text[:20]}...{text[-20:]}")


def check_wandb_destination(project, entity, spelled: str = "wandb.{key}=") -> None:
    """Refuse a W&B project longer than 128 characters or holding ``/ \\ # ? % :``,
    and an entity holding those (None: not given). ``spelled`` names the setting
    in the refusal (``wandb.project=``, or a flag's ``--project ``)."""
    for key, value in (("project", project), ("entity", entity)):
        if value is None:
            continue
        text, given = str(value), spelled.format(key=key)
        if bad := next((c for c in WANDB_FORBIDDEN if c in text), None):
            raise ConfigError(f"{given}{_shown(text)} cannot name a W&B {key}: it contains "
                              f"'{bad}' (W&B refuses any of {' '.join(WANDB_FORBIDDEN)} in one)")
        if key == "project" and len(text) > WANDB_MAX_PROJECT:
            raise ConfigError(f"{given}{_shown(text)} cannot name a W&B project: it is "
                              f"{len(text)} characters (at most {WANDB_MAX_PROJECT})")


def check_wandb(cfg: Mapping) -> None:
    """Refuse what W&B would refuse, before any job: a bad tag (``wandb.tags``, and
    ``dataset.name`` and ``model.name``, with which every logged run is tagged),
    project, entity or group. ``cfg`` has passed the schema."""
    wandb = cfg["wandb"]
    check_wandb_destination(wandb["project"], wandb["entity"])
    per_tag = f"W&B allows 1 to {WANDB_MAX_TAG} characters per tag"
    for tag in map(str, wandb["tags"]):
        if not tag:
            raise ConfigError(f"wandb.tags holds an empty tag; {per_tag}")
        if len(tag) > WANDB_MAX_TAG:
            raise ConfigError(f"wandb.tags: the tag {_shown(tag)} is {len(tag)} characters; "
                              f"{per_tag}: shorten it")
    if wandb["mode"] == "disabled":
        return
    group = "" if wandb["group"] is None else str(wandb["group"])
    if len(group) > WANDB_MAX_GROUP:  # sweep_id unless set
        raise ConfigError(f"wandb.group={_shown(group)} (the sweep's name unless set) is "
                          f"{len(group)} characters: W&B allows at most {WANDB_MAX_GROUP} in a "
                          f"group name; set a shorter name= or wandb.group, or use "
                          f"wandb.mode=disabled")
    for group in ("dataset", "model"):  # every logged run is tagged with these too
        name = str(cfg[group]["name"])
        if not name or len(name) > WANDB_MAX_TAG:
            raise ConfigError(
                f"{group}.name={_shown(name)} is {len(name)} characters, and every logged run "
                f"is tagged with it: {per_tag}; shorten it, or use wandb.mode=disabled")


SWIN_WINDOW = 4  # tokens on a side of Swin's windows, as the official create_model's


def validate(cfg) -> dict:
    """The run's config, checked: a resolved plain dict holding every declared key,
    which is what the job and everything below it read. ``cfg``: a Hydra
    ``DictConfig`` (resolved here) or a plain mapping."""
    from omegaconf import DictConfig, OmegaConf

    from ablation.config.schema import check_schema  # it reads the names above

    if isinstance(cfg, DictConfig):
        cfg = OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)
    cfg = dict(cfg)
    check_schema(cfg)
    check_wandb(cfg)
    cache = cfg["gpu"]["compilation_cache"]
    if cache is not None and Path(cache).expanduser().is_file():
        raise ConfigError(f"gpu.compilation_cache={cache!r} is a file, not a folder")
    if cfg["augmentation"]["normalization"] == "official":
        statistics = cfg["dataset"]["official_statistics"]
        if not statistics:
            raise ConfigError(
                f"augmentation.normalization=official needs the official code's constants, "
                f"dataset.official_statistics, which dataset={cfg['dataset']['name']} does not "
                f"have; use augmentation.normalization=adapted")
        if len(statistics["mean"]) != len(statistics["std"]):
            raise ConfigError("dataset.official_statistics: mean and std need one value "
                              "per channel each")
    augmentation = cfg["augmentation"]
    if augmentation["policy"] == "autoaugment" and augmentation["implementation"] != "official":
        raise ConfigError(
            f"augmentation.policy=autoaugment with augmentation.implementation="
            f"{augmentation['implementation']}: AutoAugment runs only in the input pipeline, "
            f"with the official code's semantics; use augmentation.implementation=official "
            f"or augmentation.policy=randaugment")
    model = cfg["model"]
    if model["key_dim"] is None and model["dim"] % model["num_heads"]:
        raise ConfigError(
            f"model.num_heads={model['num_heads']} does not divide model.dim={model['dim']} "
            f"(needed when model.key_dim is null); set model.key_dim or change num_heads")
    if model["image_size"] % model["patch_size"]:
        raise ConfigError(
            f"model.patch_size={model['patch_size']} does not divide "
            f"model.image_size={model['image_size']}")
    grid = model["image_size"] // model["patch_size"]
    swin = model["architecture"] == "swin"
    for stage in range(len(model["depth"]) if isinstance(model["depth"], list) else 0):
        if swin and grid > SWIN_WINDOW and grid % SWIN_WINDOW:
            raise ConfigError(
                f"model={model['name']}'s {SWIN_WINDOW}x{SWIN_WINDOW} windows do not tile its "
                f"{grid}x{grid} grid in stage {stage + 1}: choose model.image_size / "
                f"model.patch_size so that each stage's grid is a multiple of "
                f"{SWIN_WINDOW} (or at most {SWIN_WINDOW})")
        # SPT's pooling and Swin's merging join 2x2 tokens; PiT's plain pooling pads
        last = stage == len(model["depth"]) - 1
        if not last and grid % 2 and (as_bool(cfg["spt"], "spt") or swin):
            raise ConfigError(
                f"model={model['name']} joins 2x2 tokens of its {grid}x{grid} grid after "
                f"stage {stage + 1}: choose model.image_size / model.patch_size so that "
                f"each grid before a pooling or merging is even")
        grid = (grid + 1) // 2
    diagnostics = cfg["diagnostics"]
    if diagnostics["enabled"] and diagnostics["probe_images"] < 1:
        raise ConfigError(f"diagnostics.probe_images={diagnostics['probe_images']!r} must be a "
                          f"positive integer (diagnostics.enabled=true probes that many images)")
    if as_bool(cfg["spt"], "spt") and model["patch_size"] < 2:
        raise ConfigError("spt=true needs model.patch_size >= 2 (it shifts by half a patch)")
    return cfg
