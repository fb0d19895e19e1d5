"""Write every output of the report next to the sweep, and log it to W&B."""
from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ablation.runs.lock import REPORT_LOCK_FILE, JobBusy, job_lock
from ablation.files import atomic_write, make_folder
from ablation.runs.record import find_records
from ablation.report import (export, latex, locality_plots, locality_table, plots, render,
                             tuned_block)
from ablation.report.generation import generation, prune_replaced
from ablation.report.load import ReportError, load, load_runs
from ablation.report.tables import comparison, factorial

log = logging.getLogger(__name__)

# How long a report waits for another report of the same folder (two sweeps
# finishing together): longer than a report takes, short of hanging for good.
LOCK_WAIT_S = 300.0


@dataclass
class Report:
    runs: pd.DataFrame
    table: pd.DataFrame
    effects: pd.DataFrame
    markdown: str
    files: list[Path] = field(default_factory=list)
    wandb: dict | None = None


def _atomic_write(path: Path, text: str) -> Path:
    return atomic_write(path, text, fsync=False)  # the umask's mode, like run.json


def _most_common(values) -> str | None:
    values = [v for v in values if v]
    return Counter(values).most_common(1)[0][0] if values else None


def write_report(path: str | Path, *, out_dir: str | Path | None = None,
                 wandb_settings: Mapping | None = None, make_plots: bool = True,
                 lock_wait_s: float = LOCK_WAIT_S, split_by_code: bool = False) -> Report:
    """Read the records below ``path``; write comparison.{md,csv,tex,html},
    comparison_full.tex and PNGs.

    Outputs go to ``out_dir`` (default: ``path`` itself, or its folder if it is a
    file). ``wandb_settings`` (mode, project, entity) defaults to the mode the
    runs were logged with; the report run joins the runs' W&B group.
    ``split_by_code``: runs of different code are separate blocks
    (:func:`ablation.report.load.load_runs`).

    One report at a time per output folder: two sweeps finishing together (or a
    sweep and a hand-made report) would otherwise interleave their files and W&B
    report folders. The report holds the folder's report lock
    (:func:`ablation.runs.lock.job_lock`, file ``.report.lock``), waiting up to
    ``lock_wait_s`` for another report to finish and then making its own (with
    the records as they are then); after that wait, :class:`ReportError`.
    """
    path = Path(path)
    out = Path(out_dir) if out_dir else (path if path.is_dir() else path.parent)
    if not path.exists() or not find_records(path):
        load_runs(path)  # its one-line error, before a lock file is made
    try:
        with job_lock(out, name=REPORT_LOCK_FILE, wait_s=lock_wait_s):
            return _write_report(path, out, wandb_settings, make_plots, split_by_code)
    except JobBusy as e:
        raise ReportError(f"{e.folder} is being reported by another process "
                          f"(host {e.holder.get('host', '?')}, pid {e.holder.get('pid', '?')}); "
                          f"waited {lock_wait_s:g} s") from None


def _write_report(path: Path, out: Path, wandb_settings: Mapping | None,
                  make_plots: bool, split_by_code: bool = False) -> Report:
    runs, trials = load(path, split_by_code=split_by_code)
    make_folder(out)
    with generation(out) as current:
        report = _write_files(runs, current.stage, make_plots, trials)
    report.files = [out / f.name for f in report.files]
    settings = dict(wandb_settings or {})
    settings.setdefault("mode", _most_common(runs["wandb_mode"]) or "disabled")
    if settings["mode"] != "disabled":
        from ablation.report.wandb_run import log_report

        images = [f for f in report.files if f.suffix == ".png"]
        try:  # the tables and plots are written: W&B trouble must not undo the report
            report.wandb = log_report(report.table, report.effects, images, settings=settings,
                                      group=_most_common(runs["wandb_group"]), directory=out,
                                      replaced=current.replaced)
        except Exception as e:  # noqa: BLE001 - any W&B failure, one line
            detail = " ".join(str(e).split())[:200]
            log.warning("W&B report run not logged (%s: %s); the report files are written",
                        type(e).__name__, detail)
    prune_replaced(out)
    return report


def _write_files(runs: pd.DataFrame, out: Path, make_plots: bool,
                 trials: pd.DataFrame | None = None) -> Report:
    """Every file of one report generation, into the folder ``out``."""
    table = comparison(runs)
    effects = factorial(runs)
    # Locality diagnostics: empty when no run carries them.
    local, local_effects = locality_table.locality_table(runs), locality_table.locality_effects(runs)
    markdown = render.markdown(table, effects) + locality_table.markdown(local, local_effects)
    local_tex = locality_table.latex(local, local_effects)
    images = []
    if make_plots:  # before the HTML, which embeds them
        images.append(plots.top1_bars(table, out / "top1.png"))
        images.append(plots.val_curves(table, runs, out / "val_top1.png"))
        for extra in (plots.temperature_curves(table, runs, out / "temperature.png"),
                      tuned_block.figure(trials, out / "tuning.png") if trials is not None
                      and len(trials) else None):
            if extra:
                images.append(extra)
        images += locality_plots.figures(runs, out)
    files = [
        _atomic_write(out / "comparison.md", markdown),
        # the tables a paper prints, and every column for an appendix
        _atomic_write(out / "comparison.tex", latex.document(table, effects, local_tex)),
        _atomic_write(out / "comparison_full.tex",
                      latex.document(table, effects, local_tex, full=True)),
        _atomic_write(out / "comparison.html", render.html_page(table, effects)
                      + locality_table.html_section(local, local_effects)
                      + plots.html_figures(images)),
        _atomic_write(out / "comparison.csv", export.comparison_csv(table)),
    ]
    if not effects.empty:
        files.append(_atomic_write(out / "factorial_effects.csv",
                                   export.effects_csv(effects, table)))
    if not local.empty:
        files.append(_atomic_write(out / "locality.csv", export.csv_text(local)))
    if not local_effects.empty:
        files.append(_atomic_write(out / "locality_effects.csv",
                                   export.csv_text(local_effects)))
    files += images
    return Report(runs, table, effects, markdown, files)
