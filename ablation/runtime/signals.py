"""Preemption signals turned into the exception Ctrl-C raises, so every stop is one path.

Schedulers stop a job with SIGTERM (submitit also sends SIGUSR2 before a time
limit), whose default ends the process on the spot: no record, a W&B run left
"running". Inside :func:`interruptible` it raises :class:`Interrupted` (a
``KeyboardInterrupt``) in the main thread instead, so the job ends as after
Ctrl-C: an ``interrupted`` record, the W&B run finished as preempted, exit
``128 + signal``.

A stop raised where Python swallows exceptions (a finalizer, a library's
``except BaseException``) would let training run on, so it is also kept as
pending (:func:`pending_stop`), which training checks after every batch. A handler
already installed (submitit's, which requeues the job) runs first; its
``SystemExit`` is replaced by :class:`Interrupted`, so the job still writes its
record. Only the first stop raises: a later one during the clean-up is ignored, so
the record and exit status stay the first stop's.
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


def stop_behind(error: BaseException) -> BaseException:
    """The stop a signal raised, where native code turned it into another error.

    A stop raised while TensorFlow's native code runs reaches Python as a
    ``SystemError`` caused by it, or as the binding's own error (pybind11's ``...
    REPLACED BY Interrupted``): a new exception of that stop's kind, from the cause
    or the stop asked for. ``error`` itself when it is a stop or no stop was asked."""
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
    return signal.Signals(error.signum).name if isinstance(error, Interrupted) else "Ctrl-C"


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
        earlier = previous.get(signum)
        if signum != signal.SIGINT and callable(earlier):
            try:
                earlier(signum, frame)
            except (SystemExit, Exception) as e:  # submitit requeues, then exits
                log.debug("the launcher's %s handler ended with %r", signal.Signals(signum).name, e)
        raised, _pending = True, signum
        raise pending_stop()  # KeyboardInterrupt for Ctrl-C, else Interrupted

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
