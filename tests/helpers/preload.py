"""Command lines in processes forked from one that has already imported them.

A command-line test pays for importing TensorFlow, Keras, wandb and the suite
(seconds) in every process it starts; the suite starts dozens. This module's
server imports them once, in the order ``run_sweep.py`` and a job import them,
and then forks one process per command: the fork runs ``run_sweep.py`` (or
``-m module``) from its ``__main__``, with the command's argv, environment,
working folder and its own stdout and stderr, and exits with the command's
exit code, as a fresh ``python`` would.

What a fork cannot stand for, it is not asked to: a command whose environment
differs from the server's in anything but the settings read at run time
(W&B's, Hydra's, the sweep context's, proxies) runs in a fresh process, since
the backend, TensorFlow's logging and thread pools are fixed while importing;
so does a test that checks what importing prints or loads (``fresh=True`` in
:func:`tests.helpers.commands.run_cli`). The server never runs a TensorFlow
operation, so no fork inherits a running runtime.

One server per test process, started on first use and stopped at its exit
(or when it finds that process gone). ``VIT_TESTS_FRESH=1`` turns it off: every
command then starts fresh; ``VIT_TESTS_PRELOAD_DEBUG=1`` prints why a command
was not forked.

Protocol, over a Unix socket: the client sends one JSON line (argv, env, cwd)
with its stdout and stderr file descriptors attached; the server's waiter
answers ``pid N`` once the command runs and ``exit N`` when it ends (a signal's
death as ``-SIGNUM``, as subprocess reports it).
"""
from __future__ import annotations

import atexit
import contextlib
import io
import json
import locale
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

# Settings a command reads when it runs, not while it imports: a difference in
# these alone leaves the command to a fork. Everything else runs fresh.
RUN_TIME_PREFIXES = ("WANDB_", "HYDRA_", "VIT_ABLATION_SWEEP", "PYTEST_")
RUN_TIME_NAMES = {"http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "no_proxy",
                  "NO_PROXY", "all_proxy", "ALL_PROXY"}
OFF_ENV = "VIT_TESTS_FRESH"


def _read_time(name: str) -> bool:
    return name.startswith(RUN_TIME_PREFIXES) or name in RUN_TIME_NAMES


def forkable(env: dict, server_env: dict, set_by_imports=()) -> bool:
    """Whether a command with ``env`` may run in a fork of a server started with
    ``server_env``: they differ only in settings read at run time, or in those the
    imports themselves set (``set_by_imports``: a process that has imported
    TensorFlow passes them on, and a fork has them as a fresh command would)."""
    names = (set(env) | set(server_env)) - set(set_by_imports)
    return all(_read_time(n) for n in names if env.get(n) != server_env.get(n))


# ---------------------------------------------------------------------------
# The server (python -m tests.helpers.preload SOCKET)

def _preload() -> None:
    """What a command-line job imports, in its order: the command, wandb before
    TensorFlow, Keras through the suite's loader, then the job, training and report."""
    import run_sweep  # noqa: F401  (ablation.sweep.cli: TensorFlow's logging set-up first)
    from ablation.runs.tracking import import_early
    from ablation.runtime.keras_loader import import_keras

    import_early("offline")
    import_keras()
    import ablation.job.lifecycle
    import ablation.report.generation
    import ablation.train.fit  # noqa: F401


_SET_BY_IMPORTS: dict = {}  # the server's environment variables its imports set


def _own_process_state(env: dict) -> None:
    """In the fork: what a fresh process has of its own. Its environment is the
    command's, plus what importing set in it (the server's own changes); its
    temporary files go where the command's environment says; numpy's global
    generator is seeded afresh; wandb's media folder, which its import made and
    its exit deletes, is a new one."""
    import weakref

    import numpy as np

    os.environ.clear()
    os.environ.update(env)
    os.environ.update(_SET_BY_IMPORTS)
    tempfile.tempdir = None
    np.random.seed()  # numpy's global generator, seeded afresh as in a new process
    # what the imports made and would remove at exit (temporary folders) is the
    # server's: no fork's exit removes it
    for finalizer in list(weakref.finalize._registry):
        finalizer.detach()
    from wandb.sdk.data_types import _private

    own = tempfile.TemporaryDirectory("wandb-media")  # where a command's tables are written
    media = _private.MEDIA_TMP
    media.name, media._finalizer, media._own = own.name, own._finalizer, own


def _command_frames(tb):
    """A traceback from the command's own first frame on, as a fresh python shows it
    (without this module's and runpy's frames)."""
    import runpy

    outer = {__file__, runpy.__file__, "<frozen runpy>"}
    while tb is not None and tb.tb_next is not None and tb.tb_frame.f_code.co_filename in outer:
        tb = tb.tb_next
    return tb


def _is_module_file(name: str) -> bool:
    module = sys.modules.get(name)
    return module is not None and not hasattr(module, "__path__")  # not a package


def _run_command(argv: list[str], env: dict, cwd: str, out: int, err: int) -> None:
    """In the fork: become ``python ARGV`` and never return."""
    import runpy
    import threading

    code, killed_by = 0, None
    try:
        os.dup2(out, 1)
        os.dup2(err, 2)
        os.close(out)
        os.close(err)
        os.chdir(cwd)
        _own_process_state(env)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        if argv[0] == "-m":
            sys.argv = [argv[1], *argv[2:]]
            sys.path[0] = os.getcwd()
            for name in (argv[1], f"{argv[1]}.__main__"):  # run as new, as a fresh python does
                if _is_module_file(name):
                    del sys.modules[name]
            runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        else:
            sys.argv = list(argv)
            sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))
            runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if not isinstance(e.code, (int, type(None))):
            print(e.code, file=sys.stderr)
    except BaseException as e:  # noqa: BLE001 (as the interpreter reports an uncaught one)
        sys.excepthook(type(e), e, _command_frames(e.__traceback__))
        code = 1
        if isinstance(e, KeyboardInterrupt):  # and then dies of the SIGINT
            killed_by = signal.SIGINT
    try:  # as the interpreter exits: threads joined, then the exit functions
        threading._shutdown()
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
        if killed_by is not None:
            signal.signal(killed_by, signal.SIG_DFL)
            os.kill(os.getpid(), killed_by)
    finally:
        os._exit(code)


def _serve_one(conn: socket.socket) -> None:
    """In the waiter (a fork of the server): run the command in a fork of its
    own, answer its pid, wait for it, answer its exit."""
    msg, fds, _flags, _addr = socket.recv_fds(conn, 1 << 20, 2)
    while not msg.endswith(b"\n"):
        more = conn.recv(1 << 20)
        if not more:
            os._exit(1)
        msg += more
    request = json.loads(msg.decode())
    pid = os.fork()
    if pid == 0:
        conn.close()
        _run_command(request["argv"], request["env"], request["cwd"], *fds)
    for fd in fds:
        os.close(fd)
    conn.sendall(f"pid {pid}\n".encode())
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    conn.sendall(f"exit {code}\n".encode())


def serve(path: str) -> None:
    tempfile.tempdir = os.path.dirname(path)  # what importing leaves goes with the server
    before = dict(os.environ)
    _preload()
    _SET_BY_IMPORTS.update({k: v for k, v in os.environ.items() if before.get(k) != v})
    threads = len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else 1
    if threads > 3:  # the main thread and two idle native ones after TensorFlow's import
        sys.exit(f"the preloaded imports started {threads} threads: forking them is unsafe")
    sys.stdout.flush()
    sys.stderr.flush()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # waiters are reaped by the kernel
    parent = os.getppid()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(path)
        listener.listen(16)
        listener.settimeout(2)
        print("ready", json.dumps(sorted(_SET_BY_IMPORTS)), flush=True)
        while os.getppid() == parent:  # a test process killed outright leaves no server
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            conn.setblocking(True)
            if os.fork() == 0:
                listener.close()
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                try:
                    _serve_one(conn)
                finally:
                    os._exit(0)
            conn.close()
    # the test process is gone: so are this server's folder, commands and waiters
    shutil.rmtree(os.path.dirname(path), ignore_errors=True)
    os.killpg(0, signal.SIGKILL)


# ---------------------------------------------------------------------------
# The client

class _Server:
    def __init__(self, env: dict, cwd: Path):
        self.env = dict(env)
        self.folder = tempfile.mkdtemp(prefix="preload-")
        self.path = os.path.join(self.folder, "socket")
        self.log = open(os.path.join(self.folder, "server.log"), "w+b")  # noqa: SIM115 (kept open)
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.helpers.preload", self.path],
                                     cwd=cwd, env=self.env, stdout=subprocess.PIPE,
                                     stderr=self.log, start_new_session=True)
        ready = self.proc.stdout.readline().decode()
        if ready.startswith("ready "):
            self.set_by_imports = json.loads(ready[len("ready "):])
        else:
            self.log.seek(0)
            raise RuntimeError("the preloaded server did not start: "
                               + self.log.read().decode(errors="replace")[-3000:])
        atexit.register(self.stop)

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):  # its waiters and commands too
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self.log.close()
        shutil.rmtree(self.folder, ignore_errors=True)


_server: _Server | None = None


def server_for(env: dict, cwd: Path, start_env: dict | None = None) -> _Server | None:
    """The running server if a command with ``env`` may use it, else None. It is
    started on the first call, with ``start_env`` (the worker's plain environment:
    not a test's hostile one, whose imports would fail), or else ``env``."""
    global _server
    if os.environ.get(OFF_ENV) or env.get(OFF_ENV):
        return None
    if _server is None or _server.proc.poll() is not None:
        _server = _Server(env if start_env is None else start_env, cwd)
    if forkable(env, _server.env, _server.set_by_imports):
        return _server
    if os.environ.get("VIT_TESTS_PRELOAD_DEBUG"):
        print("preload: fresh for", sorted(n for n in set(env) | set(_server.env)
                                           if env.get(n) != _server.env.get(n)), file=sys.stderr)
    return None


def runs_here(argv: list[str]) -> bool:
    """Whether ``python ARGV`` is a form a fork runs: a script, or ``-m module``
    (no ``-c``, no interpreter options)."""
    return bool(argv) and (argv[0] == "-m" and len(argv) > 1 or not argv[0].startswith("-"))


def run(server: _Server, argv: list[str], env: dict, cwd: Path,
        timeout: float) -> subprocess.CompletedProcess:
    """``python ARGV`` in a fork of ``server``, as :func:`subprocess.run` with
    ``capture_output=True, text=True`` would run it."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.connect(server.path)
        request = json.dumps({"argv": argv, "env": env, "cwd": str(cwd)}).encode() + b"\n"
        socket.send_fds(conn, [request], [out.fileno(), err.fileno()])
        conn.settimeout(timeout)  # a wedged server fails the test, as a hung command does
        answers = conn.makefile("r")
        pid, line = None, ""
        try:
            started = answers.readline()
            if started.startswith("pid "):
                pid = int(started.split()[1])
                line = answers.readline()
        except TimeoutError:
            if pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            raise subprocess.TimeoutExpired([sys.executable, *argv], timeout,
                                            _text(out), _text(err)) from None
        if not line.startswith("exit"):
            raise RuntimeError(f"the preloaded command {argv} ended without an exit code")
        code = int(line.split()[1])
        done = subprocess.CompletedProcess([sys.executable, *argv], code, _text(out), _text(err))
        done.forked = True  # for the tests of this module
        return done


def _text(file) -> str:
    """What the command wrote, read back as ``subprocess.run(text=True)`` reads a
    pipe: the locale's encoding and universal newlines."""
    file.seek(0)
    return io.TextIOWrapper(file, encoding=locale.getpreferredencoding(False)).read()


if __name__ == "__main__":
    serve(sys.argv[1])
