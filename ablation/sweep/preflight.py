"""Everything refused before any job runs: the command line before Hydra sees
it, then every job's config before Hydra writes anything.

:func:`check_command_line`, in the command's process, turns what Hydra would
report in a block of lines or a traceback, exit 1 (an unknown group option, an
override it cannot parse, an unknown key, an interpolation that cannot resolve,
its commands combined in a way it refuses), into one line, exit 2; it also
refuses a config that lacks a declared key and a Keras backend that cannot load.
:func:`check_jobs` (from :class:`ablation.sweep.callbacks.SweepStart`) checks every
job's values, folder, data source and paths, and an earlier run in its folder.
A secret is refused first, so that no other refusal echoes it.
"""
from __future__ import annotations

import contextlib
import importlib.util
import io
import sys
from pathlib import Path

from ablation.config.compose import check_composes, check_group_options
from ablation.config.folders import check_results_dir_name
from ablation.config.hydra_internals import args_parser
from ablation.config.refusals import ConfigError
from ablation.config.secrets import check_no_secrets

def check_command_line(args: list[str], conf_dir: str | Path) -> dict | None:
    """Every check of the command line, in order; raises :class:`ConfigError`
    with one line. ``args`` is argv without the program. Returns the composed
    config (sweep values aside) when jobs will run."""
    if (parsed := parse_flags(args)) is None:
        return None  # argparse's usage and error: Hydra prints them, once
    check_no_secrets({}, parsed.overrides)
    trains = check_commands(parsed)
    check_group_options(args, conf_dir)
    composed = check_composes(args, conf_dir)
    if trains:
        check_complete(composed)
        if composed is not None:  # before Hydra makes its folders under it
            check_results_dir_name(composed["results_dir"])
        check_backend()
    return composed if trains else None


def check_complete(composed: dict | None) -> None:
    """Refuse a config that lacks a declared key (``~gpu.jobs_at_once``), before the
    command reads it to choose a launcher; every value is checked with each job's
    (:func:`check_jobs`)."""
    from ablation.config.schema import missing_keys

    if composed is not None and (missing := missing_keys(composed)):
        raise ConfigError(f"{missing[0]} is missing (set it in the config)")


def parse_flags(args: list[str]):
    """Hydra's reading of its flags in ``args`` (an ``argparse.Namespace``), or
    None, silently, when argparse refuses them or answers itself (``--version``):
    Hydra then prints that, once."""
    with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        try:
            return args_parser().parse_args(args)
        except SystemExit:
            return None


def check_commands(parsed) -> bool:
    """Refuse a combination of Hydra's commands (``parsed``: :func:`parse_flags`) that
    Hydra itself refuses in a traceback or a block of lines, naming what to do instead.
    True when the command line runs jobs (no help, ``--cfg``, ``--info`` or completion)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    if parsed.help or parsed.hydra_help:
        return False
    given = [flag for flag, on in (("-m", parsed.multirun), ("--run", parsed.run),
                                   ("--cfg", parsed.cfg is not None),
                                   ("--info", parsed.info is not None),
                                   ("--shell-completion", parsed.shell_completion)) if on]
    if "-m" in given and "--info" in given:
        raise ConfigError("--info describes one configuration, not a sweep: drop -m and give "
                          "one value per key, or use -m --cfg job to print each job's config")
    if len(given) > 1 and given != ["-m", "--cfg"]:  # -m --cfg: each job's config
        raise ConfigError(f"{' and '.join(given)} cannot be combined: use one of them")
    if parsed.resolve and parsed.cfg is None:
        raise ConfigError("--resolve goes with --cfg: e.g. --cfg job --resolve")
    package = (parsed.package or "hydra").removeprefix("_global_.")
    # Hydra's folders name the job's keys, and submitit's folder names the sweep's
    folders = ("hydra.run.dir", "hydra.sweep.dir", "hydra.sweep.subdir",
               "hydra.launcher.submitit_folder")
    given_plainly = {arg.lstrip("+").partition("=")[0] for arg in parsed.overrides
                     if "=" in arg and "${" not in arg}  # a folder the user spelt out whole
    if parsed.cfg == "hydra" and (package in folders and package not in given_plainly or (
            parsed.resolve and package in ("_global_", "hydra", "hydra.run", "hydra.sweep",
                                           "hydra.launcher"))):
        raise ConfigError("--cfg hydra leaves out the job's keys (run_name, results_dir) that "
                          "Hydra's folders name, so they cannot be resolved: use --cfg all "
                          "--resolve, with -p hydra.<key> for one of them")
    try:
        sweeps = [o.input_line for o in OverridesParser.create().parse_overrides(
            parsed.overrides) if o.is_sweep_override()]
    except HydraException:
        sweeps = []  # check_composes names the override it cannot parse
    if sweeps and not parsed.multirun:
        fix = {"--cfg": "add -m to print each job's config, or give one value",
               "--info": "--info describes one configuration: give one value per key"}.get(
                   given[0] if given else "", "add -m to run one job per value, or give one value")
        raise ConfigError(f"{sweeps[0]} has several values: {fix}")
    return not given or given in (["-m"], ["--run"])


def check_backend() -> None:
    """Refuse, in one line, a Keras backend that cannot load, before anything is
    written: Keras itself fails at the first job, in a traceback, after Hydra
    has made the job's folder (``KERAS_BACKEND=tensorflw``, a backend not
    installed, a ``keras.json`` that is not a JSON object)."""
    from ablation.config.backend import KERAS_BACKENDS, TRAINING_BACKENDS, keras_backend_setting

    if "keras" in sys.modules:  # loaded already: whatever it picked works
        return
    name, source = keras_backend_setting()
    if name is None:
        raise ConfigError(f"Keras cannot read its settings file {source} (it must hold a "
                          f"JSON object, e.g. {{\"backend\": \"tensorflow\"}}): fix or remove it")
    where = {"KERAS_BACKEND": f"KERAS_BACKEND={name}",
             "Keras's default": f"Keras's default backend, {name},"}.get(
                 source, f"backend {name!r} in {source}")
    if not isinstance(name, str) or name not in KERAS_BACKENDS:
        raise ConfigError(f"{where} is not a Keras backend: use one of "
                          f"{', '.join(TRAINING_BACKENDS)}")
    if name not in TRAINING_BACKENDS:
        raise ConfigError(f"{where} cannot train (Keras runs only inference on it): use one "
                          f"of {', '.join(TRAINING_BACKENDS)}")
    if importlib.util.find_spec(name) is None:
        hint = ' (pip install -e ".[jax]")' if name == "jax" else ""
        raise ConfigError(f"{where}, but {name} is not installed{hint}")


def job_folder_name(job: dict, folder: Path) -> str:
    """What the job adds below ``results_dir/sweep_id`` (normally one component;
    a separator inside a value shows up here as several)."""
    base = Path(str(job["results_dir"])) / str(job["sweep_id"])
    if folder.parts[:len(base.parts)] == base.parts:
        return "/".join(folder.parts[len(base.parts):])
    return folder.name


def check_jobs(jobs: list[tuple[dict, Path]]) -> None:
    """Refuse a sweep that cannot run cleanly, naming the problem in one line."""
    from ablation.config import check_folder_names, check_same_config, validate
    from ablation.data import check_source
    from ablation.data.fingerprint import check_same_data, data_fingerprint, recorded_fingerprint
    from ablation.runs.record import earlier_run

    for job, folder in jobs:
        check_no_secrets({**job, "the job folder": str(folder)})  # Hydra's dir keys too
        validate(job)
        check_folder_names(job, job_folder_name(job, folder))
        check_source(job["dataset"])
        check_paths(job, folder)
    sweep_dirs = {folder.parent for _, folder in jobs}
    if len(sweep_dirs) > 1:
        raise ConfigError(
            "this sweep's jobs would go to several sweep folders (" + ", ".join(
                sorted(str(d) for d in sweep_dirs)) + "): give the sweep one name=...")
    seen = {}
    for job, folder in jobs:
        if folder in seen:
            raise ConfigError(f"two jobs of this sweep would share the folder {folder}"
                              f"{apart(seen[folder], job)}")
        seen[folder] = job
        if job["resume"]:
            earlier = earlier_run(folder)
            check_same_config(earlier, job, folder)
            if recorded_fingerprint(earlier):
                check_same_data(earlier, data_fingerprint(job["dataset"]), folder)


def apart(first: dict, second: dict) -> str:
    """For the refusal: the keys two jobs sharing a folder differ in (no setting)."""
    from ablation.config.settings import flatten

    a, b = flatten(first), flatten(second)
    if not (keys := sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))):
        return ""
    which = ("which names no folder (not a setting)", "which name no folder (not settings)")
    return f": they differ only in {', '.join(keys)}, {which[len(keys) > 1]}; run each " \
        "under its own name="


# What the suite (and Hydra for it) keeps in a job's folder and in its sweep's folder
# ("name/": a folder): a link, or an entry of another kind, at any of these names is
# refused before the job, not followed or written over.
JOB_FILES = (".lock", ".hydra/", ".hydra/config.yaml", ".hydra/hydra.yaml",
             ".hydra/overrides.yaml", "run_sweep.log", "run.json", "checkpoint/",
             "attention_maps.npz", "model.keras", "wandb/", "wandb/.data/", "wandb/.cache/",
             ".replaced/")
SWEEP_FILES = (".report.lock", "multirun.yaml", ".replaced/", "report/", "report.json",
               "wandb/", ".tuning/", ".tuning/journal.log", ".tuning/.lock")


def sweep_files() -> tuple[str, ...]:
    """:data:`SWEEP_FILES` and the report's files, which it writes into the sweep folder."""
    from ablation.report.generation import REPORT_GLOBS, REPORT_NAMES

    return (*SWEEP_FILES, *REPORT_NAMES, *(name for name in REPORT_GLOBS if "*" not in name))


def check_paths(job: dict, folder: Path) -> None:
    """Refuse, in one line, a job whose writes would leave its root, follow a
    link or meet the wrong kind of entry at a name the suite keeps. The root is
    ``results_dir``, or the folder above a job folder the user put elsewhere with
    ``hydra.sweep.dir`` (or ``hydra.run.dir``)."""
    from ablation.files import UnsafeFile, check_entries, check_results_dir

    try:
        root = check_results_dir(job["results_dir"])
        if not folder.absolute().resolve().is_relative_to(root.resolve()):
            root = check_results_dir(str(folder.absolute().parent))  # the user's Hydra folder
        check_entries(root, folder, JOB_FILES)
        check_entries(root, folder.parent, sweep_files())
    except UnsafeFile as e:
        raise ConfigError(str(e)) from None
