"""Weights & Biases, one run per job, and nothing at all when disabled.

A job that raises marks its W&B run failed (or, stopped, preempted) and finishes
it: otherwise the next job in the same process would get the same run back from
``wandb.init()`` and its metrics would leak into it. A resumed job continues its
run under the same id, and the checkpoint's rows are replayed with their epoch as
the step; offline, the earlier run folder of that id (a SIGKILL can leave it nearly
empty) is set aside first, so ``wandb sync`` uploads only the complete one; online,
steps below ``run.step`` are already on the server and not sent again.

W&B writes inside the job's folder (``wandb/``, ``wandb/.data``, ``wandb/.cache``),
never in a home folder that may be read-only or shared. And W&B never fails a job:
a call that raises is one warning, and the record's ``wandb.problems`` says what
W&B could not do.
"""
from __future__ import annotations

import contextlib
import logging
import os
import shlex
import socket
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from urllib.parse import urlsplit

from ablation.config.switches import SWITCHES, as_bool, variant_label
from ablation.config.tuning import role
from ablation.files import entries, make_folder, read_bytes, replaced_folder, set_aside
from ablation.runtime.provenance import environment
from ablation.runtime.signals import exit_code

log = logging.getLogger(__name__)


class Tracker:
    """What training needs from an experiment tracker; this one records nothing."""

    mode = "disabled"

    def log(self, metrics: Mapping, step: int) -> None:
        pass

    def replay(self, rows: Iterable[Mapping]) -> None:
        """Log a resumed run's earlier per-epoch rows again, each at its epoch."""
        for row in rows:
            self.log(row, step=int(row["epoch"]))

    def summarize(self, metrics: Mapping) -> None:
        pass

    def table(self, name: str, columns: list[str], rows: list[list], step: int) -> None:
        """A table (e.g. per-head locality values), logged at ``step``."""

    def model(self, path: Path) -> None:
        """Log a trained model file as the run's W&B artifact (``wandb.log_model``)."""

    def info(self) -> dict:
        return {"id": None, "dir": None, "mode": self.mode}


class WandbTracker(Tracker):
    def __init__(self, run, output_dir: Path):
        self.run = run
        self.problems: list[str] = []  # what W&B could not do, one line each
        self.mode = "offline" if run.offline else "online"
        self.output_dir = Path(output_dir)
        # What the run already holds: steps below this are on the W&B server
        # (a resumed online run); a new or offline run starts at 0.
        self.first_step = int(run.step)
        self.steps_already_there: list[int] = []

    def attempt(self, what: str, call, *args, **kwargs) -> None:
        """``call(*args, **kwargs)``; should it raise, one warning and a line in
        :attr:`problems`, and the job goes on."""
        try:
            call(*args, **kwargs)
        except Exception as e:  # noqa: BLE001 - any W&B failure: the job's numbers stand
            line = f"{what}: {type(e).__name__}: {' '.join(str(e).split())[:160]}"
            if not self.problems:
                log.warning("W&B could not %s; the job goes on (its record says what W&B "
                            "missed)", line)
            self.problems.append(line)

    def log(self, metrics: Mapping, step: int) -> None:
        if step < self.first_step:
            if not self.steps_already_there:
                log.info("W&B run %s already holds steps below %d: not sent again",
                         self.run.id, self.first_step)
            self.steps_already_there.append(step)
            return
        self.attempt(f"log step {step}", self.run.log, dict(metrics), step=step)

    def summarize(self, metrics: Mapping) -> None:
        self.attempt("update the summary", self.run.summary.update, dict(metrics))

    def table(self, name: str, columns: list[str], rows: list[list], step: int) -> None:
        import wandb

        self.attempt(f"log the table {name}", lambda: self.run.log(
            {name: wandb.Table(columns=list(columns), data=rows)}, step=step))

    def model(self, path: Path) -> None:
        import wandb

        def log_model():
            # named by the run's id: artifact names allow no "+", and run names repeat
            artifact = wandb.Artifact(f"model-{self.run.id}", type="model", metadata={
                "run_name": self.run.name, "group": self.run.group})
            artifact.add_file(str(path))
            self.run.log_artifact(artifact)  # offline: uploaded by `wandb sync` with the run
        self.attempt("log the model artifact", log_model)

    def info(self) -> dict:
        run_dir = Path(self.run.dir).parent  # .../wandb/offline-run-<time>-<id>
        if run_dir.is_relative_to(self.output_dir.resolve()):
            run_dir = run_dir.relative_to(self.output_dir.resolve())
        return {"id": self.run.id, "dir": str(run_dir), "mode": self.mode,
                "project": self.run.project, "group": self.run.group,
                **({"problems": list(self.problems)} if self.problems else {})}


DEFAULT_BASE_URL = "https://api.wandb.ai"
REACH_TIMEOUT_S = 5.0
INIT_TIMEOUT_S = 60.0


def unreachable(base_url: str) -> str | None:
    """Why the W&B server cannot be reached, or None if a TCP connection opens."""
    url = urlsplit(base_url)
    host, port = url.hostname or "", url.port or (443 if url.scheme == "https" else 80)
    try:
        socket.create_connection((host, port), timeout=REACH_TIMEOUT_S).close()
    except OSError as e:
        return f"cannot reach {host}:{port} ({e.strerror or e})"
    return None


def import_early(mode: str) -> None:
    """Import wandb, and what its first run imports, before TensorFlow is loaded:
    pydantic reads wandb's models' field docstrings through ``inspect.getmodule``,
    which walks every loaded module, TensorFlow's thousands included."""
    if mode == "disabled":
        return
    import wandb  # noqa: F401

    with contextlib.suppress(ImportError):  # a private module: absent in another wandb
        import wandb.sdk.launch.inputs.internal  # noqa: F401


def open_run(mode: str, output_dir: Path, **init):
    """``wandb.init`` in ``mode``; ``online`` without network or credentials falls
    back to ``offline`` with one warning, in bounded time (a TCP probe, then
    wandb's own init timeout). The run folder a failed online start leaves behind
    is set aside in ``.replaced/``, so no sync finds it."""
    import wandb

    extra_settings = init.pop("settings", {})
    run = None
    if mode == "online":
        quiet_unreadable_netrc()
        reason = unreachable(os.environ.get("WANDB_BASE_URL") or DEFAULT_BASE_URL)
        earlier = set(entries(output_dir / "wandb", "run-*"))
        if reason is None:
            try:
                run = wandb.init(mode="online", **init, settings=wandb.Settings(
                    init_timeout=INIT_TIMEOUT_S, **extra_settings))
            except Exception as e:  # no credentials, server errors, timeouts
                first = str(e).splitlines()[0][:200] if str(e) else ""
                reason = f"{type(e).__name__}: {first}"
                set_aside(sorted(set(entries(output_dir / "wandb", "run-*")) - earlier),
                          replaced_folder(output_dir) / "wandb")
        if run is None:
            log.warning("W&B online is unavailable (%s); logging offline instead, upload "
                        "later with: wandb sync %s/wandb/offline-run-*", reason,
                        shlex.quote(str(output_dir)))
    if run is None:
        run = wandb.init(mode="offline" if mode == "online" else mode, **init,
                         settings=wandb.Settings(**extra_settings))
    return run


def quiet_unreadable_netrc() -> None:
    """A ``~/.netrc`` that is not text: one warning, and W&B's own error reporting off
    for the process (its exporter reads that file and prints tracebacks at exit); a
    choice the user made in ``WANDB_ERROR_REPORTING`` stands."""
    path = os.environ.get("NETRC") or os.path.expanduser("~/.netrc")
    try:
        read_bytes(path, NETRC_LIMIT, follow_links=True).decode("utf-8")
    except UnicodeDecodeError as e:
        if "WANDB_ERROR_REPORTING" not in os.environ:
            log.warning("%s is not text (%s): W&B cannot read credentials from it", path, e.reason)
            os.environ["WANDB_ERROR_REPORTING"] = "false"
    except (OSError, ValueError):  # absent, or no file: W&B's login says what it lacks
        pass


NETRC_LIMIT = 1 << 20


@contextlib.contextmanager
def tracked_run(settings: Mapping, *, name: str, config: Mapping, tags: list[str],
                output_dir: str | Path, run_id: str | None = None) -> Iterator[Tracker]:
    """Open one W&B run for one training job (or a no-op tracker if disabled).
    ``settings``: the ``wandb`` config group; ``run_id`` continues an earlier run."""
    if settings["mode"] == "disabled":
        yield Tracker()
        return
    output_dir = make_folder(output_dir)
    with wandb_folders(output_dir / "wandb"):
        run = open_run(
            settings["mode"], output_dir,
            project=settings["project"],
            entity=settings.get("entity"),
            group=settings.get("group"),
            job_type="trial" if role(config) == "trial" else "train",  # a tuned sweep's search
            name=name,
            tags=list(dict.fromkeys([*tags, *(settings.get("tags") or [])])),
            config=wandb_config(config),
            dir=str(output_dir),
            reinit="finish_previous",
            settings=console_settings(settings),
            **({"id": run_id, "resume": "allow"} if run_id else {}),
        )
        # per-epoch metrics plotted against ``epoch``; the best validation, the final test
        run.define_metric("epoch")
        run.define_metric("*", step_metric="epoch")
        for metric, summary in {"val/top1": "max", "val/top5": "max", "test/*": "last"}.items():
            run.define_metric(metric, summary=summary)
        tracker = WandbTracker(run, output_dir)
        # Not ``with run:``: its exit prints the whole traceback on the terminal.
        try:
            yield tracker
        except BaseException as e:
            finish_stopped(run, e)
            raise
        tracker.attempt("finish the run", run.finish)
        log.info("%s", where(run))


@contextlib.contextmanager
def wandb_folders(folder: Path) -> Iterator[None]:
    """W&B's data (artifact staging) and cache folders inside ``folder`` for the
    block, unless the user chose them (``WANDB_DATA_DIR``, ``WANDB_CACHE_DIR``)."""
    chosen = {name: str(make_folder(folder / sub)) for name, sub in WANDB_FOLDERS.items()
              if name not in USER_WANDB_FOLDERS}  # never a link: W&B would write through it
    saved = {name: os.environ.get(name) for name in chosen}
    os.environ.update(chosen)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


WANDB_FOLDERS = {"WANDB_DATA_DIR": ".data", "WANDB_CACHE_DIR": ".cache"}
USER_WANDB_FOLDERS = frozenset(name for name in WANDB_FOLDERS if name in os.environ)


def finish_stopped(run, error: BaseException) -> None:
    """Finish a W&B run that ``error`` ended: a failure (exit code 1), or a stop
    (a signal, Ctrl-C) marked as preempting, with the signal's exit code: W&B's
    own state for a run that can be resumed."""
    code = 1
    if isinstance(error, KeyboardInterrupt):
        code = exit_code(error)
        try:
            run.mark_preempting()
        except Exception as e:  # noqa: BLE001 - the run is still finished below
            log.debug("W&B mark_preempting failed: %r", e)
    run.finish(exit_code=code)


def wandb_config(config: Mapping) -> dict:
    """The run's config: the resolved config, the switches as booleans, ``variant``,
    and ``environment``: the code, libraries and device (as in the record)."""
    out = dict(config)
    out["environment"] = environment()
    if all(k in config for k in SWITCHES):
        out.update({k: as_bool(config[k], k) for k in SWITCHES})
        out["variant"] = variant_label(out)
    return out


def console_settings(settings: Mapping) -> dict:
    """``wandb.Settings`` keywords: W&B's own console output off unless ``verbose``."""
    return {} if settings.get("verbose") else {"silent": True}


def where(run) -> str:
    """One line: where the run is and how to upload it (offline) or its page (online)."""
    folder = Path(run.dir).parent
    if run.offline:
        return (f"W&B offline run {run.id} in {folder} (upload later: "
                f"{shlex.join(['wandb', 'sync', str(folder)])})")
    return f"W&B run {run.id}: {run.url or folder}"


def set_aside_offline_runs(wandb_dir: str | Path, run_id: str | None,
                           target: str | Path) -> list[Path]:
    """Move the offline run folders of ``run_id`` (every one if None: a job starting
    over) in ``wandb_dir`` to ``target``, before a run is opened again under that
    id, so the old ones are not synced beside it. Returns their new paths."""
    old = sorted(p for p in entries(wandb_dir, "offline-run-*")
                 if run_id is None or p.name.endswith(f"-{run_id}"))
    moved = set_aside(old, target)
    if moved:
        log.info("%s: earlier offline folder(s) moved to %s (the new run replaces them)",
                 f"W&B run {run_id}" if run_id else "W&B", target)
    return moved
