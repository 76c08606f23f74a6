"""The one process runner for every agent: a pseudo-terminal, a hard timeout, no leftovers.

The child runs in its own session (so its process group can be killed as a whole). Descendants
that call setsid() leave that group; making this process a child subreaper catches them: when
their parent dies they are re-parented to us, and are found and killed after the run.
"""

from __future__ import annotations

import ctypes
import os
import select
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from ptyprocess import PtyProcess

READ_SIZE = 65536
DRAIN_SECS = 0.2
PR_SET_CHILD_SUBREAPER = 36


@dataclass(frozen=True)
class ProcessResult:
    """How a process under the PTY ended and what it printed."""

    exit_code: int | None
    signal: int | None
    timed_out: bool
    duration_secs: float
    output: str


_subreaper = False


def _become_subreaper() -> None:
    global _subreaper
    if _subreaper:
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: process-group killing still applies
        pass
    _subreaper = True


def run_in_pty(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout_secs: float,
    transcript: BinaryIO | None = None,
    on_output: Callable[[bytes], None] | None = None,
    stdin_data: bytes | None = None,
    grace_secs: float = 1.0,
) -> ProcessResult:
    """Run `argv` under a PTY; kill its whole tree at `timeout_secs` or when it exits."""
    _become_subreaper()
    before = _children(os.getpid())
    started = time.monotonic()
    proc = PtyProcess.spawn(
        list(argv), cwd=str(cwd), env=dict(env), dimensions=(50, 220), echo=False
    )
    # ptyprocess sleeps 0.1 s in close() by default; we close only after the tree is dead.
    proc.delayafterclose = 0.0
    chunks: list[bytes] = []

    def take(data: bytes) -> None:
        chunks.append(data)
        if transcript is not None:
            transcript.write(data)
            transcript.flush()
        if on_output is not None:
            on_output(data)

    try:
        _feed_stdin(proc, stdin_data)
        timed_out = _pump(proc, started + timeout_secs, take)
        exit_code, sig = _status(proc, timed_out, grace_secs, before)
    finally:
        if proc.isalive():  # an exception in our own code: leave nothing behind
            _kill_tree(proc, before, 0.2)
        proc.close()
    text = b"".join(chunks).decode("utf-8", errors="replace").replace("\r\n", "\n")
    return ProcessResult(exit_code, sig, timed_out, time.monotonic() - started, text)


def _feed_stdin(proc: PtyProcess, data: bytes | None) -> None:
    try:
        if data:
            proc.write(data)
        proc.sendeof()
    except OSError:
        pass


def _pump(proc: PtyProcess, deadline: float, take: Callable[[bytes], None]) -> bool:
    """Read until the child exits (then drain briefly) or the deadline passes (returns True).

    A background descendant may keep the PTY open after the child exits: draining stops
    DRAIN_SECS after the exit, whatever that descendant still writes.
    """
    fd = proc.fd
    exited_at: float | None = None
    while True:
        now = time.monotonic()
        if exited_at is None and not proc.isalive():
            exited_at = now
        if exited_at is None and now >= deadline:
            return True
        if exited_at is not None and now - exited_at >= DRAIN_SECS:
            return False
        wait = 0.05 if exited_at is None else DRAIN_SECS
        ready, _, _ = select.select([fd], [], [], min(wait, max(0.0, deadline - now)))
        if not ready:
            continue
        try:
            data = os.read(fd, READ_SIZE)
        except OSError:  # EIO: every holder of the PTY has closed it
            data = b""
        if not data:
            # Nobody holds the PTY any more; the child is exiting. Give it until the deadline.
            while proc.isalive():
                if time.monotonic() >= deadline:
                    return True
                time.sleep(0.005)
            return False
        take(data)


def _kill_tree(proc: PtyProcess, before: set[int], grace_secs: float) -> None:
    """TERM the child's group and every new descendant, wait up to `grace_secs`, then KILL.

    With this process a subreaper, every descendant of the run stays in our process tree even
    after its parent dies or it calls setsid(), so walking the tree finds all of them.
    """
    me = os.getpid()

    def new() -> set[int]:
        # The child itself is reaped by ptyprocess (which keeps its exit status), not here.
        return {p for p in _descendants(me) if p not in before and p != proc.pid}

    def send(sig: int, pids: set[int]) -> None:
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        for pid in pids:
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass

    alive = {p for p in new() if _is_running(p)} | ({proc.pid} if proc.isalive() else set())
    if not alive:
        _reap(new())
        return
    send(signal.SIGTERM, alive)
    deadline = time.monotonic() + grace_secs
    while time.monotonic() < deadline:
        _reap(new())
        alive = {p for p in new() if _is_running(p)} | ({proc.pid} if proc.isalive() else set())
        if not alive:
            return
        time.sleep(0.02)
    send(signal.SIGKILL, alive)
    end = time.monotonic() + 2.0
    while time.monotonic() < end:
        _reap(new())
        if not proc.isalive() and not any(_is_running(p) for p in new()):
            return
        time.sleep(0.02)


def _reap(pids: set[int]) -> None:
    for pid in pids:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass  # not our child (yet), or already reaped


def _children(pid: int) -> set[int]:
    """Direct children of `pid` (Linux /proc)."""
    found: set[int] = set()
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{task}/children") as handle:
                    found.update(int(p) for p in handle.read().split())
            except OSError:
                continue
    except OSError:
        return set()
    return found


def _descendants(pid: int) -> set[int]:
    seen: set[int] = set()
    todo = list(_children(pid))
    while todo:
        child = todo.pop()
        if child not in seen:
            seen.add(child)
            todo.extend(_children(child))
    return seen


def _is_running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            state = handle.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _status(
    proc: PtyProcess, timed_out: bool, grace_secs: float, before: set[int]
) -> tuple[int | None, int | None]:
    """Kill what is left of the run, then the child's exit status (None when it was killed)."""
    _kill_tree(proc, before, grace_secs)
    try:
        proc.wait()
    except Exception:  # noqa: BLE001 - ptyprocess already reaped it
        pass
    sig = proc.signalstatus
    if timed_out or sig is not None:
        return None, sig
    return proc.exitstatus, None
