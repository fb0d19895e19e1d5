"""Write every output of the report next to the sweep, and log it to W&B."""
from __future__ import annotations

import logging
import os
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ablation.runs.lock import REPORT_LOCK_FILE, JobBusy, job_lock
from ablation.files import (atomic_write, is_folder, is_regular, make_folder,
                            remove_empty_folder, remove_file)
from ablation.runs.record import RECORD_FILENAME, find_records
from ablation.report import (export, latex, locality_plots, locality_table, plots, render,
                             temperature_plot, tuned_block)
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


def _most_common(values) -> str | None:
    values = [v for v in values if v]
    return Counter(values).most_common(1)[0][0] if values else None


def write_report(path: str | Path, *, out_dir: str | Path | None = None,
                 wandb_settings: Mapping | None = None, make_plots: bool = True,
                 lock_wait_s: float = LOCK_WAIT_S, split_by_code: bool = False) -> Report:
    """Read the records below ``path``; write the report's files into ``out_dir``
    (default: ``path``, or its folder) and log it to W&B (``wandb_settings``: mode,
    project, entity; the mode defaults to the runs').

    One report at a time per output folder: it holds the folder's report lock,
    waiting up to ``lock_wait_s`` for another report, then :class:`ReportError`.
    """
    path = Path(path)
    out = Path(out_dir) if out_dir else (path if path.is_dir() else path.parent)
    if not path.exists() or not find_records(path):
        load_runs(path)  # its one-line error, before a lock file is made
    new_folder, new_lock = not os.path.lexists(out), not os.path.lexists(out / REPORT_LOCK_FILE)
    try:
        with job_lock(out, name=REPORT_LOCK_FILE, wait_s=lock_wait_s):
            return _write_report(path, out, wandb_settings, make_plots, split_by_code)
    except ReportError:  # refused: leave the folder as it was found
        if new_lock:
            remove_file(out / REPORT_LOCK_FILE)
        if new_folder:
            remove_empty_folder(out)
        raise
    except JobBusy as e:
        raise ReportError(f"{e.folder} is being reported by another process "
                          f"(host {e.holder.get('host', '?')}, pid {e.holder.get('pid', '?')}); "
                          f"waited {lock_wait_s:g} s") from None


def _write_report(path: Path, out: Path, wandb_settings: Mapping | None,
                  make_plots: bool, split_by_code: bool) -> Report:
    runs, trials = load(path, split_by_code=split_by_code)
    make_folder(out)
    with generation(out) as current:
        report = _write_files(runs, current.stage, make_plots, trials)
    report.files = [out / f.name for f in report.files]
    settings = dict(wandb_settings or {})
    settings.setdefault("mode", _most_common(runs["wandb_mode"]) or "disabled")
    if settings["mode"] != "disabled" and (problem := _wandb_folder_problem(out)):
        log.warning("W&B report run not logged: %s; the report files are written", problem)
    elif settings["mode"] != "disabled":
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


def _wandb_folder_problem(out: Path) -> str | None:
    """Why the report's W&B run may not go into ``<out>/wandb``, or None: a job's
    folder (its ``wandb/`` is the job's own, and ``wandb sync`` would upload the
    report as the job), or a ``wandb`` entry that is a link or not a folder."""
    if is_regular(out / RECORD_FILENAME):
        return (f"{out} is a job's folder, whose wandb/ holds the job's own run: report "
                f"it with --out <another folder>, or report its sweep")
    wandb = out / "wandb"
    if os.path.lexists(wandb) and not is_folder(wandb):
        return f"{wandb} is a symbolic link or not a folder: remove it"
    return None


def _write_files(runs: pd.DataFrame, out: Path, make_plots: bool,
                 trials: pd.DataFrame) -> Report:
    """Every file of one report generation, into the folder ``out``."""
    table, effects = comparison(runs), factorial(runs)
    local, local_effects = locality_table.locality_table(runs), locality_table.locality_effects(runs)

    def page(style):
        return (render.elements(table, effects, style)
                + locality_table.elements(local, local_effects, style))

    images = []
    if make_plots:  # before the HTML, which embeds them
        images = [plots.top1_bars(table, out / "top1.png"),
                  plots.val_curves(table, runs, out / "val_top1.png"),
                  temperature_plot.temperature_figure(table, runs, out / "temperature.png"),
                  tuned_block.figure(trials, out / "tuning.png"),
                  *locality_plots.figures(runs, out)]
        images = [image for image in images if image]
    local_tex = locality_table.latex(local, local_effects)
    texts = {"comparison.md": render.markdown_page(page(render.MARKDOWN)),
             # the tables a paper prints, and every column for an appendix
             "comparison.tex": latex.document(table, effects, local_tex),
             "comparison_full.tex": latex.document(table, effects, local_tex, full=True),
             "comparison.html": render.html_page(page(render.HTML)) + plots.html_figures(images),
             "comparison.csv": export.comparison_csv(table)}
    for name, frame in (("factorial_effects.csv", effects), ("locality.csv", local),
                        ("locality_effects.csv", local_effects)):
        if not frame.empty:
            texts[name] = (export.effects_csv(frame, table) if frame is effects
                           else export.csv_text(frame))
    # the umask's mode, like run.json
    files = [atomic_write(out / name, text, fsync=False) for name, text in texts.items()]
    return Report(runs, table, effects, texts["comparison.md"], files + images)
