"""SIGTERM ends a `doit run` as ^C does, and doit's workers end when their parent dies.

A CI cancel, `kill`, a container stop or a closed laptop sends SIGTERM, which Python would
obey by dying at once: the agent under way would keep running (and spending) with nobody to
stop it. Raised as `Terminated`, a KeyboardInterrupt, it takes ^C's path instead: the agent's
processes are ended, what finished is kept, and doit stops its workers. The workers of `-n N`
(and the forker they are forked from, llmtt.taskgraph.forker) inherit the handler (where it
exits the process instead), and ask the kernel for SIGTERM when their parent dies, so a SIGKILL
of doit ends the forker, and the forker's end its workers, the same way.
"""

from __future__ import annotations

import atexit
import ctypes
import multiprocessing
import multiprocessing.util
import os
import signal
import time
from types import FrameType

_PR_SET_PDEATHSIG = 1


class Terminated(KeyboardInterrupt):
    """SIGTERM, taking ^C's path through llmtt and doit."""


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    if _PARENT is not None and os.getpid() != _PARENT.pid:
        # A worker: stopped by doit (after ^C or SIGTERM) or orphaned. SystemExit unwinds
        # through the agent's clean-up like any exception, and multiprocessing ends the
        # worker on it quietly, even when it arrives while the worker reports to doit.
        raise SystemExit(128 + signal.SIGTERM)
    raise Terminated("terminated (SIGTERM)")


class _Parent:
    """The process whose forked workers must die with it (kept alive for the fork hook)."""

    def __init__(self) -> None:
        self.pid = os.getpid()


_PARENT: _Parent | None = None


def _die_with_parent(parent: _Parent) -> None:
    """In a freshly forked process (the forker of llmtt.taskgraph.forker, a worker): SIGTERM
    when the process that forked it dies (now, if it already has)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, ctypes.c_ulong(signal.SIGTERM), 0, 0, 0)
    except (OSError, AttributeError):  # not Linux
        return
    forker = multiprocessing.parent_process()  # doit's main process, or the forker
    if os.getppid() != (forker.pid if forker is not None else parent.pid):
        os.kill(os.getpid(), signal.SIGTERM)


def install() -> None:
    """In doit's main process, before it forks workers: SIGTERM acts like ^C everywhere."""
    global _PARENT
    signal.signal(signal.SIGTERM, _on_sigterm)
    if _PARENT is None:
        _PARENT = _Parent()
        multiprocessing.util.register_after_fork(_PARENT, _die_with_parent)
        atexit.register(end_workers)  # before multiprocessing's own wait, which has no limit


def end_workers(grace_secs: float = 5.0) -> None:
    """Wait a little for doit's workers to end, then kill those that did not.

    doit stops its workers with SIGTERM when interrupted, but a worker idle in its job
    queue can miss it (seen under load: the signal is taken while the worker is between
    jobs, and it waits for a job that never comes); the interpreter would then wait for it
    forever. Whatever such a worker started is ended by the watchdog once doit has gone.
    """
    deadline = time.monotonic() + grace_secs
    for child in multiprocessing.active_children():
        child.join(max(0.0, deadline - time.monotonic()))
    for child in multiprocessing.active_children():
        child.kill()
        child.join(1)


def exit_terminated() -> None:
    """End this process as killed by SIGTERM (status 143) once its workers have ended."""

    def die() -> None:
        end_workers()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)

    atexit.register(die)  # run first, as the last registered, with the interpreter still whole
