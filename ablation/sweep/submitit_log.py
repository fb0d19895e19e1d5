"""submitit's log, as a sweep's terminal shows it.

On a Slurm cluster without an accounting database, ``sacct`` fails, and submitit
warns on every poll of its jobs ("Bypassing sacct error ..., status may be
inaccurate") before it reads their states from ``squeue`` instead; a sweep of
an hour polls hundreds of times. :func:`say_sacct_failure_once` keeps the first
of those warnings, as one plain line on stderr, and drops the rest; submitit's
other messages pass unchanged. (``sacct`` itself still prints "Slurm accounting
storage is disabled" each time it is called: its own stderr, not submitit's log.)
"""
from __future__ import annotations

import logging
import sys

SACCT_FAILURE = "Bypassing sacct error"
NOTE = ("Slurm's sacct fails here (no accounting database?): submitit reads the jobs' "
        "states from squeue instead; this is said once")


class _SacctFailureOnce(logging.Filter):
    def __init__(self):
        super().__init__()
        self.said = False

    def filter(self, record: logging.LogRecord) -> bool:
        if SACCT_FAILURE not in record.getMessage():
            return True
        if not self.said:  # printed, not logged: submitit's logger has two handlers and
            self.said = True  # propagates to Hydra's, which would print it three times
            print(f"note: {NOTE}", file=sys.stderr, flush=True)
        return False


def say_sacct_failure_once(logger_name: str = "submitit") -> None:
    """Install the filter on submitit's logger (once per process)."""
    logger = logging.getLogger(logger_name)
    if not any(isinstance(f, _SacctFailureOnce) for f in logger.filters):
        logger.addFilter(_SacctFailureOnce())
