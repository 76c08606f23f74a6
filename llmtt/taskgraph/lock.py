"""One writer per project: `doit run` (forget, clean, ...) holds the results folder's lock.

Two invocations writing one project would interleave their runs' folders, the dependency file
and the budget ledger. The second is refused at once, with one line naming the first: waiting
silently behind agent runs that take minutes would look like a hang. The exception is a holder
that is already dead: its workers are still ending their agents after a kill, which takes
seconds, so the newcomer waits for them.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import os
import sys
import time
from pathlib import Path

from llmtt.errors import LlmttError, no_space
from llmtt.process.watchdog import start_ticks

LOCK_NAME = ".llmtt-lock"
# How long a newcomer waits for the workers of a dead holder to finish their clean-up.
ORPHAN_WAIT_SECS = 15.0


class ProjectBusy(LlmttError):
    """Another invocation is writing this project."""


def hold(results: Path, command: str) -> int:
    """Take the project's lock for this process (and the workers it forks); the descriptor.

    The lock lasts as long as the descriptor is open: until the process and its workers end.
    """
    path = results / LOCK_NAME
    try:
        results.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise _unwritable(exc, path) from None
    deadline: float | None = None
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            holder = _holder(path)
            if _alive(holder):
                os.close(fd)
                raise ProjectBusy(_busy(results, holder)) from None
            deadline = deadline or time.monotonic() + ORPHAN_WAIT_SECS
            if time.monotonic() >= deadline:
                os.close(fd)
                raise ProjectBusy(_busy(results, holder, orphans=True)) from None
            time.sleep(0.1)
    me = {
        "pid": os.getpid(),
        "start": start_ticks(os.getpid()),
        "command": f"doit {command}",
        "argv": sys.argv[1:],
        "since": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(me).encode() + b"\n", 0)
    except OSError as exc:  # a full disk: the run could not record anything either
        os.close(fd)
        raise _unwritable(exc, path) from None
    return fd


def _unwritable(exc: OSError, path: Path) -> LlmttError:
    return no_space(exc, path) or LlmttError(f"cannot write {path}: {exc.strerror or exc}")


def _holder(path: Path) -> dict[str, object]:
    try:
        data = json.loads(path.read_text(encoding="utf-8") or "{}")
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _alive(holder: dict[str, object]) -> bool:
    """Whether the process that wrote the lock is still the same running process."""
    pid, start = holder.get("pid"), holder.get("start")
    if not isinstance(pid, int):
        return True  # written by something we do not know: do not steal it
    return start_ticks(pid) == start and start is not None


def _busy(results: Path, holder: dict[str, object], *, orphans: bool = False) -> str:
    what = f"{holder.get('command', 'doit')} (pid {holder.get('pid', '?')}"
    argv = holder.get("argv")
    if isinstance(argv, list) and argv:
        what = f"`doit {' '.join(str(a) for a in argv)}` (pid {holder.get('pid', '?')}"
    what += f", since {holder['since']})" if "since" in holder else ")"
    if orphans:
        return (
            f"{results} is still locked by the workers of {what}, which was killed and whose "
            f"workers did not end within {ORPHAN_WAIT_SECS:.0f} s; end them and run again"
        )
    return (
        f"{results} is in use by {what}; one invocation writes a project at a time: "
        "wait for it to finish (or stop it), then run again"
    )
