"""What each job hands back to its sweep, and the sweep's end computed from it.

A job returns its :func:`outcome`, which Hydra hands back to the sweeper as a
``JobReturn`` whichever launcher ran it (pickled back from workers or nodes), and
the sweeper ends the sweep with :func:`end_sweep`. Only this sweep's returns
count, so what another sweep did in the same folder never changes its exit
status. A return without an outcome is a job a launcher stopped waiting for (the
Slurm wait): it is listed as unfinished, with the line its record holds.
"""
from __future__ import annotations

import logging
import shlex
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import NamedTuple

from ablation.runs.lock import shown_path

log = logging.getLogger(__name__)

STATUSES = ("completed", "skipped", "busy", "failed")


def outcome(status: str, record: str, top1: float | None = None, top5: float | None = None,
            detail: str | None = None) -> dict:
    """What one job did, as its return value: a plain dict, which pickles from any
    worker and means the same to any copy of this module (Hydra's plugin scan runs
    the module again, so a class defined here would not stay one class).
    ``skipped``: completed earlier; ``busy``: another process was running it;
    ``detail``: one line, the error or who holds the folder."""
    assert status in STATUSES, status
    return {"status": status, "record": str(record), "top1": top1, "top5": top5,
            "detail": detail}


def outcome_of(ret) -> dict | None:
    """The outcome a ``JobReturn`` holds; None when the job handed back none (it raised,
    or a launcher stopped waiting for it)."""
    value = ret._return_value
    return value if isinstance(value, dict) and value.get("status") in STATUSES else None


class Tally(NamedTuple):
    """(job folder, one line) of the sweep's jobs that did not complete."""
    failed: list[tuple[Path, str]]
    busy: list[tuple[Path, str]]        # another process was running them
    unfinished: list[tuple[Path, str]]  # stopped before their end; resumable


def job_folder(ret, folder_of: Callable[[list[str]], Path]) -> Path:
    """The folder of the job whose ``JobReturn`` is ``ret``: its outcome's; else the
    one Hydra ran it in; else (a placeholder) ``folder_of`` its overrides."""
    if (done := outcome_of(ret)) is not None:
        return Path(done["record"]).parent
    if ret.hydra_cfg is not None:
        return Path(str(ret.hydra_cfg.hydra.runtime.output_dir))
    return folder_of(list(ret.overrides))


def tally(returns: Iterable, folder_of: Callable[[list[str]], Path]) -> Tally:
    """The failed, busy and unfinished jobs among ``returns`` (Hydra's ``JobReturn``\\ s),
    in launch order; ``folder_of`` composes a job's folder from its overrides."""
    from hydra.core.utils import JobStatus

    result = Tally([], [], [])
    for ret in returns:
        folder = shown_path(job_folder(ret, folder_of).resolve())
        done = outcome_of(ret)
        if ret.status == JobStatus.FAILED:  # raised outside the job's own handling
            error = ret._return_value
            log.error("%s: %s: %s", folder, type(error).__name__, error, exc_info=error)
            result.failed.append((folder, f"{type(error).__name__}: {error}"))
        elif done is not None:
            if done["status"] == "failed":
                result.failed.append((folder, done["detail"] or "unknown error"))
            elif done["status"] == "busy":
                result.busy.append((folder, done["detail"] or str(folder)))
        elif (line := _not_completed(folder)) is not None:
            result.unfinished.append((folder, line))
    return result


def _not_completed(folder: Path) -> str | None:
    """Why a job that handed back no outcome did not finish: its record's line; None
    when its record says it completed."""
    from ablation.runs.record import RECORD_FILENAME, RecordError, read_record

    try:
        record = read_record(folder / RECORD_FILENAME)
    except RecordError:
        return "it ended without a result and without a record"
    if record.get("status") == "completed":
        return None
    return record.get("error") or "it ended before its record did"


def summary(sweep_dir, failures: list[tuple[Path, str]], busy: list[tuple[Path, str]],
            unfinished: list[tuple[Path, str]] = (), resume: str | None = None) -> list[str]:
    """The lines that end a sweep: the busy jobs (and the report to run once they
    end), the unfinished ones (and ``resume``, the command that resumes them),
    then the failed ones; none when every job ran."""
    lines = []
    if busy:
        lines.append(f"{len(busy)} job(s) skipped: another process was running them:")
        lines += [f"  {detail}" for _, detail in busy]
        folder = shown_path(Path(str(sweep_dir)).resolve())
        report = shlex.join(["python", "-m", "ablation.report", str(folder)])
        lines.append(f"  once it ends, the report with them: {report}")
    if unfinished:
        lines.append(f"{len(unfinished)} run(s) did not finish:")
        lines += [f"  {folder}: {line}" for folder, line in unfinished]
        if resume:
            lines.append(f"  to resume them: {resume}")
    if failures:
        lines.append(f"{len(failures)} run(s) failed:")
        lines += [f"  {folder}: {error}" for folder, error in failures]
    return lines


def end_sweep(config, returns: list, folder_of: Callable[[list[str]], Path]) -> None:
    """The sweep's end, from its jobs' ``returns``: the report (``report.after_sweep``),
    then the lines of :func:`summary`; exit status 1 when a job failed or did not finish.
    Jobs skipped because another process was running them are listed and do not change it."""
    sweep_dir = str(config.hydra.sweep.dir)
    ended = tally(returns, folder_of)
    if config.report.after_sweep:
        report_sweep(config, sweep_dir)
    if lines := summary(sweep_dir, *ended, resume=resume_command()):
        print("\n".join(lines), flush=True)
    if ended.failed or ended.unfinished:
        raise SystemExit(1)


def report_sweep(config, sweep_dir) -> None:
    """The sweep's report, printed and written; a report that fails is logged, never
    raised: the records are what matter."""
    from omegaconf import OmegaConf

    from ablation.report import ReportError, write_report

    try:
        report = write_report(
            sweep_dir,
            wandb_settings=OmegaConf.to_container(config.wandb, resolve=True),
            make_plots=bool(config.report.plots))
    except KeyboardInterrupt as e:  # every job ended: only the report is left to write
        e.then = (f"every job's record stands; write the report with: python -m "
                  f"ablation.report {shlex.quote(str(sweep_dir))}")
        raise
    except ReportError as e:
        log.warning("no report: %s", e)
        return
    except OSError as e:  # a read-only folder, a full disk
        log.warning("no report: it could not be written to %s (%s); write it elsewhere: "
                    "python -m ablation.report %s --out DIR", sweep_dir,
                    e.strerror or e, shlex.quote(str(sweep_dir)))
        return
    except Exception:
        log.exception("the report failed; rerun it with: python -m ablation.report %s",
                      shlex.quote(str(sweep_dir)))
        return
    print(report.markdown, flush=True)
    log.info("report: %s", ", ".join(str(f) for f in report.files))


def resume_command() -> str:
    """The command that started this sweep, to paste again: it resumes what did not finish."""
    program, *args = sys.argv
    head = ["python", program] if program.endswith(".py") else [Path(program).name]
    return shlex.join([*head, *args])
