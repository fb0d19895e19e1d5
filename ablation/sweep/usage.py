"""What the sweep command shows without training: its help page, each job's config.

``--help`` is Hydra's own, with the template ``conf/hydra/help/vit_ablation.yaml``;
its preset lines are read from each preset file's own header comment, so a new
preset shows up without a second description to keep in step. ``-m --cfg`` (which
Hydra alone refuses) prints every job's config, each by Hydra's own ``--cfg``.
"""
from __future__ import annotations

import contextlib
import io
import re
import sys
from pathlib import Path
from typing import Callable

from ablation.config import conf_dir
from ablation.files import discard_output, read_text

WIDTH = 100  # columns of the help page
# A sentence ends at ". " before a capital, not inside "e.g. X" or "i.e. X".
_SENTENCE_END = re.compile(r"(?<!e\.g)(?<!i\.e)\.\s+(?=[A-Z`])")
# Where a long first sentence may be cut, strongest first.
_CLAUSE_BREAKS = (": ", "; ", " (", ", ")


def header_summary(path: Path) -> str:
    """The first sentence of a YAML file's leading comment (Hydra's ``@package``
    line and indented example lines left out), or ``""`` when it has none."""
    lines = []
    for raw in read_text(path, 1 << 20).splitlines():
        if not raw.startswith("#"):
            break
        text = raw[1:]
        if text.strip().startswith("@package"):
            continue
        if text.startswith("   ") or not text.strip():  # an example command: the prose ended
            break
        lines.append(text.strip())
    prose = " ".join(lines)
    return _SENTENCE_END.split(prose, maxsplit=1)[0].rstrip(".:; ") if prose else ""


def shorten(text: str, width: int) -> str:
    """``text`` if it fits in ``width`` columns, else its longest leading clause
    that does (cut at a colon, semicolon or parenthesis before a comma)."""
    if len(text) <= width:
        return text
    for mark in _CLAUSE_BREAKS:
        cut = text.rfind(mark, 0, width + 1)
        if cut > 0:
            return text[:cut]
    return text[:width - 3].rstrip() + "..."


SMALL = "_tiny"  # a preset's small copy (model=cait_tiny): named on its preset's line


def preset_lines(*groups: str) -> str:
    """``  group=name   summary`` for every option of ``groups``, one line each, in
    the order given (option names sorted), a preset's small copy on its line
    (``model=cait, cait_tiny``), for the help page."""
    folder = conf_dir()
    entries = []
    for group in groups:
        stems = sorted(path.stem for path in (folder / group).glob("*.yaml"))
        for stem in stems:
            if stem.endswith(SMALL) and stem.removesuffix(SMALL) in stems:
                continue
            small = f", {stem}{SMALL}" if f"{stem}{SMALL}" in stems else ""
            entries.append((f"{group}={stem}{small}",
                            header_summary(folder / group / f"{stem}.yaml")))
    longest = max(*(len(name) for name, _ in entries),  # one column for every group's lines
                  *(len(f"{path.parent.name}={path.stem}") for path in folder.glob("*/*.yaml")))
    column = 2 + longest + 2  # one column for every group's lines
    lines = [f"  {name:<{column - 4}}  {shorten(summary, WIDTH - column)}".rstrip()
             for name, summary in entries]
    return "\n".join(lines).replace("$", "$$")  # Hydra fills in the page with string.Template


def other_groups(*shown: str) -> str:
    """The config groups ``shown`` leaves out, with their options where there is
    a choice: ``augmentation (keras_io, none, paper), gpu``."""
    folder = conf_dir()
    parts = []
    for group in sorted(p for p in folder.iterdir() if p.is_dir() and p.name != "hydra"):
        if group.name in shown:
            continue
        options = sorted(p.stem for p in group.glob("*.yaml"))
        parts.append(f"{group.name} ({', '.join(options)})" if len(options) > 1 else group.name)
    return ", ".join(parts).replace("$", "$$")


def register_help_resolvers() -> None:
    """``${help_presets:group,...}`` and ``${help_other_groups:group,...}`` for the help page."""
    from omegaconf import OmegaConf

    OmegaConf.register_new_resolver("help_presets", preset_lines, replace=True)
    OmegaConf.register_new_resolver("help_other_groups", other_groups, replace=True)


def wants_job_configs(args: list[str]) -> bool:
    """Whether ``args`` (argv without the program) asks for every job's config:
    ``-m`` with ``--cfg``."""
    from ablation.sweep.preflight import parse_flags

    parsed = parse_flags(args)
    return parsed is not None and bool(parsed.multirun and parsed.cfg
                                       and not (parsed.help or parsed.hydra_help))


def print_job_configs(args: list[str], show: Callable[[list[str]], None],
                      check: Callable[[list[str]], None]) -> None:
    """Print each job's config, each under a ``--- # job 2/4: spt=False`` line:
    ``show(job_args)`` is Hydra's ``--cfg`` for one job (Hydra's flags without ``-m``,
    and the job's overrides as the basic sweeper expands them). All are composed
    before any is printed; a job that fails is explained by ``check(job_args)`` in
    one line where it can be, else by Hydra's own message."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from ablation.config.hydra_internals import sweep_jobs
    from ablation.sweep.preflight import parse_flags

    parsed = parse_flags(args)
    flags = ["--cfg", parsed.cfg, *(["--resolve"] if parsed.resolve else [])]
    for name in ("package", "config_path", "config_name", "config_dir"):
        if (value := getattr(parsed, name)) is not None:
            flags += [f"--{name.replace('_', '-')}", value]
    jobs = sweep_jobs(OverridesParser.create().parse_overrides(parsed.overrides))
    shown = []
    for overrides in jobs:
        out, err = io.StringIO(), io.StringIO()
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                show([*flags, *overrides])
        except BaseException as e:
            if not (isinstance(e, SystemExit) and e.code in (0, None)):
                check([*flags, *overrides])  # raises the one-line refusal, if it knows one
                sys.stderr.write(err.getvalue())
                raise
        shown.append(out.getvalue())
    try:
        for number, (overrides, text) in enumerate(zip(jobs, shown), 1):
            sys.stdout.write(f"--- # job {number}/{len(jobs)}: "
                             f"{' '.join(overrides) or '(no overrides)'}\n{text}")
        sys.stdout.flush()
    except BrokenPipeError:  # piped into head or less, which has quit: nothing more to show
        discard_output(sys.stdout.fileno())
        raise SystemExit(0) from None
