"""A report folder holds one complete generation of the report, never a mix.

A report is written into a hidden staging folder; only when every file is there
do the files the earlier generation listed in ``report.json`` move to
``.replaced/report-<time>/`` and the new ones move in, so no stale file stays
behind to contradict it and a killed report leaves the earlier one as it was.
Only names a report writes and its manifest lists are ever moved; a file of the
user's in the way stops the report. ``.replaced/`` keeps the newest
:data:`KEEP_REPLACED` generations.
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from ablation.files import (REPLACED_DIR, atomic_write, entries, is_folder, is_regular,
                            make_folder, move, read_text, remove_empty_folder, remove_tree,
                            replaced_folder, set_aside)
from ablation.report.load import ReportError

MANIFEST = "report.json"
MANIFEST_LIMIT = 1 << 20
STAGING_PREFIX = ".report-new-"
KEEP_REPLACED = 3
# What a report may write (for a folder whose report predates the manifest).
REPORT_NAMES = ("comparison.md", "comparison.tex", "comparison_full.tex", "comparison.html",
                "comparison.csv", "factorial_effects.csv", "locality.csv",
                "locality_effects.csv", "wandb_dashboard.json")
REPORT_GLOBS = ("top1.png", "val_top1.png", "temperature.png", "tuning.png",
                "locality_distance.png", "locality_entropy.png", "attention_maps.png",
                "attention_maps_*.png")
# What a set-aside generation is named: nothing else is pruned.
GENERATION_NAME = re.compile(r"^report-\d{8}-\d{6}-\d{6}$")


def report_name(name: str) -> bool:
    """Whether ``name`` is a file a report writes."""
    return name in REPORT_NAMES or any(Path(name).match(g) for g in REPORT_GLOBS)


def _manifest(out: Path) -> tuple[list[Path], str | None]:
    """(the files of the earlier generation that its manifest lists and a report
    writes; why ``report.json`` could not be read, or None when it is absent or read)."""
    if not os.path.lexists(out / MANIFEST):
        return [], None
    try:
        names = json.loads(read_text(out / MANIFEST, MANIFEST_LIMIT))["files"]
        names = [n for n in names if isinstance(n, str)]
    except (OSError, ValueError, KeyError, TypeError) as e:
        return [], f"{type(e).__name__}: {' '.join(str(e).split())[:120]}"
    return [out / n for n in names
            if n == Path(n).name and report_name(n) and is_regular(out / n)], None


@dataclass
class Generation:
    """One report generation: the folder its files are written into, and the
    ``.replaced/report-<time>/`` where everything it replaces is set aside."""

    stage: Path
    replaced: Path


def recover(out: Path) -> None:
    """Finish or undo the swap of a report killed half-way, so ``out`` holds one whole
    generation again: a staging folder holding its manifest began a swap; where
    that manifest is already ``out``'s, the rest of its files move in, else the
    generation it set aside moves back. Any other staging folder (a report killed
    while writing) is removed."""
    for stage in entries(out, STAGING_PREFIX + "*"):
        staged, current = _read_manifest(stage), _read_manifest(out)
        if staged and current and current.get("generation") == staged.get("generation"):
            for name in staged["files"]:
                if report_name(name) and is_regular(stage / name):
                    move(stage / name, out / name)
        elif staged and GENERATION_NAME.match(name := f"report-{staged.get('generation')}"):
            aside = out / REPLACED_DIR / name  # a name of that pattern: never leads out
            for path in entries(aside):
                if (report_name(path.name) or path.name == MANIFEST) and is_regular(path) \
                        and not os.path.lexists(out / path.name):
                    move(path, out / path.name)
            remove_empty_folder(aside)
        remove_tree(stage)


def _read_manifest(folder: Path) -> dict | None:
    """``folder``'s ``report.json`` when it is one (a dict listing plain file names)."""
    try:
        manifest = json.loads(read_text(folder / MANIFEST, MANIFEST_LIMIT))
    except (OSError, ValueError):
        return None
    ok = isinstance(manifest, dict) and isinstance(manifest.get("files"), list) and all(
        isinstance(n, str) and n == Path(n).name for n in manifest["files"])
    return manifest if ok else None


@contextlib.contextmanager
def generation(out: Path) -> Iterator[Generation]:
    """A staging folder to write a whole report into; on success it becomes ``out``'s."""
    recover(out)  # a report killed earlier: its swap finished or undone first
    moved = replaced_folder(out)  # not created until something is set aside
    try:  # from the stage's making on: a stop at any point leaves no stage behind
        stage = make_folder(out / f"{STAGING_PREFIX}{uuid.uuid4().hex[:8]}")
        current = Generation(stage, moved.with_name("report-" + moved.name))
        yield current
        files = sorted(p.name for p in entries(stage) if is_regular(p))
        earlier, damaged = _manifest(out)
        theirs = [n for n in files if os.path.lexists(out / n) and out / n not in earlier]
        if theirs and damaged:
            raise ReportError(
                f"{out / MANIFEST}, which lists what an earlier report wrote, cannot be read "
                f"({damaged}), so {', '.join(theirs)} may be the user's: nothing was replaced; "
                f"move {MANIFEST} and those files aside, or write the report elsewhere (--out DIR)")
        if theirs:
            raise ReportError(
                f"{out} holds {', '.join(theirs)}, which no earlier report there wrote: "
                f"nothing was replaced; move them, or write the report elsewhere (--out DIR)")
        earlier += [out / MANIFEST] if is_regular(out / MANIFEST) else []
        target = current.replaced
        # the manifest goes first into the stage: a swap killed after this point is
        # finished or undone by the next report (recover), never left half-way
        manifest = json.dumps({
            "generation": target.name.removeprefix("report-"),
            "written_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "files": files}, indent=2) + "\n"
        atomic_write(stage / MANIFEST, manifest)
        set_aside(earlier, target)
        atomic_write(out / MANIFEST, manifest)
        for name in files:
            move(stage / name, out / name)
    finally:
        recover(out)


def prune_replaced(out: Path) -> list[Path]:
    """Remove all but the newest :data:`KEEP_REPLACED` report generations in ``out/.replaced/``;
    entries holding anything else are kept."""
    folder = out / REPLACED_DIR
    if not is_folder(folder):  # absent, or a link: nothing of this report's
        return []
    allowed = {*REPORT_NAMES, MANIFEST, "wandb"}

    def report_only(entry: Path) -> bool:
        return bool(GENERATION_NAME.match(entry.name)) and is_folder(entry) and all(
            report_name(p.name) or p.name in allowed for p in entries(entry))

    generations = sorted((e for e in entries(folder) if report_only(e)),
                         key=lambda e: e.name.removeprefix("report-"))
    removed = generations[:-KEEP_REPLACED]
    for entry in removed:
        remove_tree(entry)
    return removed
