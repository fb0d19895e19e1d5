"""Preemption signals turned into the exception Ctrl-C raises, so every stop is one path.

Slurm and most schedulers stop a job with SIGTERM (and, through submitit's
``--signal``, SIGUSR2 shortly before a time limit). Python's default for
SIGTERM ends the process on the spot: no record, no line, a W&B run left
"running". Inside :func:`interruptible`, SIGTERM raises :class:`Interrupted`
(a ``KeyboardInterrupt``) in the main thread instead, so the epoch in flight
is given up and the job ends exactly as after Ctrl-C: the record says
``interrupted`` with the epoch to resume from, the W&B run is finished as
preempted, and the process exits with ``128 + signal`` (143 for SIGTERM, 130
for Ctrl-C), the shell's and the schedulers' convention.

A stop raised where Python swallows exceptions (a finalizer, a library's
``except BaseException``) would let training run on: the stop is also kept as
pending (:func:`pending_stop`), and training checks it after every batch and
epoch (``ablation.train.fit``), raising it again. Ctrl-C takes the same path
inside the block (unless SIGINT is ignored, as for a background job).

A handler already installed in Python (submitit's, which requeues the Slurm
job) runs first; its ``SystemExit`` is replaced by :class:`Interrupted`, so the
job still writes its record before the process ends. Only the first stop
raises: any later one, Ctrl-C included (pressed twice, or a SIGTERM after
it), during the clean-up is noted and ignored, so the record still says
``interrupted`` and the exit status is the first stop's (the scheduler's
SIGKILL follows its grace time anyway).
"""
from __future__ import annotations

import contextlib
import logging
import signal
import threading
from collections.abc import Iterator

log = logging.getLogger(__name__)

# SIGTERM always; SIGUSR2 only where a launcher (submitit) already handles it.
PREEMPTION_SIGNALS = (signal.SIGTERM, signal.SIGUSR2)
STOP_CODES = frozenset(128 + s for s in (signal.SIGINT, *PREEMPTION_SIGNALS))  # exit statuses
_active = False  # an outer interruptible() block already handles them
_pending: int | None = None  # the signal that stopped the job, until the block ends


def pending_stop() -> KeyboardInterrupt | None:
    """The stop a signal asked for inside :func:`interruptible`, as the exception
    it raised (raise it again if the job is still running), or None."""
    if _pending is None:
        return None
    return KeyboardInterrupt() if _pending == signal.SIGINT else Interrupted(_pending)


class Interrupted(KeyboardInterrupt):
    """The job was stopped by a signal (a scheduler's preemption or time limit)."""

    def __init__(self, signum: int):
        self.signum = int(signum)
        super().__init__(signal.Signals(self.signum).name)

    @property
    def signal_name(self) -> str:
        return signal.Signals(self.signum).name


def stop_behind(error: BaseException) -> BaseException:
    """The stop a signal raised, where native code turned it into another error.

    A stop raised while TensorFlow's native code runs (building a model,
    tracing) reaches Python as ``SystemError: ... returned a result with an
    exception set`` with the stop as its cause, or as an error of the binding's
    own that names it only in its text (pybind11's ``... REPLACED BY
    Interrupted``): a new exception of that stop's kind, from the cause or, inside
    :func:`interruptible`, from the stop asked for. ``error`` itself when it is a
    stop or no stop was asked."""
    if isinstance(error, KeyboardInterrupt):
        return error
    link, seen = error.__cause__, set()
    while isinstance(link, SystemError) and id(link) not in seen:  # native code in native code
        seen.add(id(link))
        link = link.__cause__
    if isinstance(error, SystemError) and isinstance(link, KeyboardInterrupt):
        return Interrupted(link.signum) if isinstance(link, Interrupted) else KeyboardInterrupt()
    return pending_stop() or error


@contextlib.contextmanager
def native_stops_surfaced() -> Iterator[None]:
    """Within the block, a stop that native code turned into another error is
    raised as the stop (:func:`stop_behind`), caused by that error, so a log
    keeps the whole traceback."""
    try:
        yield
    except BaseException as e:
        stop = stop_behind(e)
        if stop is e:
            raise
        raise stop from e


def exit_code(error: BaseException) -> int:
    """The conventional exit status for a stop: ``128 + signal number``."""
    if isinstance(error, Interrupted):
        return 128 + error.signum
    return 128 + signal.SIGINT


def stop_name(error: BaseException) -> str:
    """``SIGTERM`` for a signal, ``Ctrl-C`` for a keyboard interrupt."""
    return error.signal_name if isinstance(error, Interrupted) else "Ctrl-C"


def stay_stopped() -> None:
    """For a process ending on a stop: ignore any later Ctrl-C or preemption
    signal, so the exit status stays the first stop's (Python puts its own
    handlers back to the default while it shuts down, and a second Ctrl-C
    there would end the process by the signal instead)."""
    for signum in (signal.SIGINT, *PREEMPTION_SIGNALS):
        signal.signal(signum, signal.SIG_IGN)


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """Within the block, preemption signals raise :class:`Interrupted`."""
    global _active, _pending
    if _active or threading.current_thread() is not threading.main_thread():
        yield  # already handled further out; or not the main thread, which alone gets signals
        return
    raised = False
    previous = {}

    def handler(signum, frame):
        nonlocal raised
        global _pending
        if raised:
            log.warning("%s received again while stopping: ignored",
                        "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name)
            return
        if signum == signal.SIGINT:
            raised, _pending = True, signum
            raise KeyboardInterrupt
        earlier = previous.get(signum)
        if callable(earlier):
            try:
                earlier(signum, frame)
            except (SystemExit, Exception) as e:  # submitit requeues, then exits
                log.debug("the launcher's %s handler ended with %r", signal.Signals(signum).name, e)
        raised = True
        _pending = signum
        raise Interrupted(signum)

    _active = True
    for signum in PREEMPTION_SIGNALS:
        current = signal.getsignal(signum)
        if signum != signal.SIGTERM and not callable(current):
            continue
        previous[signum] = current
        signal.signal(signum, handler)
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        previous[signal.SIGINT] = signal.default_int_handler
        signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        _active, _pending = False, None
        for signum, earlier in previous.items():
            signal.signal(signum, earlier if earlier is not None else signal.SIG_DFL)
