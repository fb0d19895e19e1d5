"""``python -m ablation.report <sweep folder or results/>``: tables, plots, W&B report."""
from __future__ import annotations

import argparse
import errno
import logging
import sys

from ablation.runtime.signals import exit_code, interruptible, stay_stopped, stop_name

REFUSED = 2  # refused input, as the sweep command exits; 1: the report could not be made


def main(argv: list[str] | None = None) -> int:
    """The command: its imports and work stopped by Ctrl-C or a preemption signal end
    in one line and ``128 + signal``; the folder keeps one whole report."""
    with interruptible():
        try:
            return _main(argv)
        except KeyboardInterrupt as e:
            stay_stopped()
            print(f"error: the report was stopped by {stop_name(e)}: the folder holds the "
                  f"previous report or this one whole, never a mix; rerun to write it",
                  file=sys.stderr)
            return exit_code(e)


def _main(argv: list[str] | None) -> int:
    from ablation.config.refusals import ConfigError
    from ablation.config.secrets import check_no_secrets
    from ablation.config.validate import check_wandb_destination
    from ablation.report.load import ReportError
    from ablation.report.write import write_report
    from ablation.runs.record import RecordError

    parser = argparse.ArgumentParser(
        prog="python -m ablation.report",
        description="Turn run records (run.json) into the top-1/top-5 comparison table, "
                    "factorial effects, plots, and a W&B report run.")
    parser.add_argument("path", help="a sweep folder, results/, or any folder above run.json files")
    parser.add_argument("--out", help="where to write the outputs (default: PATH)")
    parser.add_argument("--wandb-mode", choices=["online", "offline", "disabled"],
                        help="W&B mode of the report run (default: the runs' own mode)")
    parser.add_argument("--project", help="W&B project (default: vit-ablation)")
    parser.add_argument("--entity", help="W&B entity")
    parser.add_argument("--no-plots", action="store_true", help="skip the PNG figures")
    parser.add_argument("--split-by-code", action="store_true",
                        help="put runs of different code (package commit, backend, Keras or "
                             "NumPy version) in separate blocks instead of one block whose "
                             "caption says they differ")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="warning: %(message)s")
    settings = {k: v for k, v in (("mode", args.wandb_mode), ("project", args.project),
                                  ("entity", args.entity)) if v}
    try:
        check_no_secrets({"--project": args.project, "--entity": args.entity})
        check_wandb_destination(args.project, args.entity, spelled="--{key} ")
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return REFUSED
    try:
        report = write_report(args.path, out_dir=args.out, wandb_settings=settings,
                              make_plots=not args.no_plots, split_by_code=args.split_by_code)
    except (ReportError, RecordError) as e:  # nothing to report, or records in the way
        print(f"error: {e}", file=sys.stderr)
        return REFUSED
    except OSError as e:  # a read-only folder, a full disk, a planted link
        where = args.out or args.path
        if args.out and e.errno in (errno.EEXIST, errno.ENOTDIR):  # --out names no folder
            print(f"error: --out {args.out} is not a folder (or lies below a file): give a "
                  f"folder, which is made if it does not exist", file=sys.stderr)
            return REFUSED
        print(f"error: the report could not be written to {where} "
              f"({e.strerror or e}{': ' + str(e.filename) if e.filename else ''}); "
              f"write it elsewhere with --out DIR", file=sys.stderr)
        return 1
    print(report.markdown)
    failed, interrupted = (int((report.runs["status"] == s).sum())
                           for s in ("failed", "interrupted"))
    print(f"{len(report.runs)} runs ({failed} failed, {interrupted} interrupted) -> "
          + ", ".join(str(f) for f in report.files))
    if report.wandb:
        print(f"W&B report run {report.wandb['id']} in {report.wandb['dir']}")
        if report.wandb.get("sync"):
            print(f"upload the runs and the report run later: {report.wandb['sync']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
