"""No process a run started outlives its `doit` invocation, even one killed by SIGKILL.

Every process llmtt starts for a run (agent, setup command, gate, solution step) carries a mark
in its environment, `LLMTT_INVOCATION=<token>`, which its own children inherit. A `doit run`
starts one small watchdog process in a session of its own: it waits for the doit process to
end, however it ends, then kills every process still carrying that invocation's mark. On a
normal exit llmtt has already ended them all, and the watchdog finds nothing.

Run as `python -m llmtt.process.watchdog <pid> <start ticks> <token>`.
"""

from __future__ import annotations

import os
import secrets
import select
import signal
import subprocess
import sys
import time
from collections.abc import Collection, Mapping

MARK = "LLMTT_INVOCATION"
# After the invocation ended, how long its workers get to end their own runs' processes.
GRACE_SECS = 1.0
# How long the watchdog keeps looking for marked processes (a dying one may still fork).
SWEEP_SECS = 5.0
# How long `doit run` keeps looking for what a worker that died left running.
STRAY_SECS = 2.0


def marked(env: Mapping[str, str]) -> dict[str, str]:
    """`env` with this invocation's mark, when there is one (under `doit run`)."""
    token = os.environ.get(MARK)
    return {**env, MARK: token} if token else dict(env)


def start() -> None:
    """Mark this process's future runs and start the watchdog that ends them after it.

    The mark goes into `os.environ`, not into this process's own /proc environment, so neither
    this process nor the workers it forks carry it.
    """
    if MARK in os.environ:
        return
    token = secrets.token_hex(8)
    os.environ[MARK] = token
    me = os.getpid()
    env = {k: v for k, v in os.environ.items() if k != MARK}
    try:
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "llmtt.process.watchdog",
                str(me),
                str(start_ticks(me)),
                token,
            ],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError:  # no watchdog costs only the guarantee after a SIGKILL
        pass


def start_ticks(pid: int) -> int | None:
    """When process `pid` started, in clock ticks after boot (None when it is gone): with its
    pid, what names one process even after the pid is reused."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return int(handle.read().rsplit(b")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def _wait_for_end(pid: int, ticks: int | None) -> None:
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        fd = None
    if fd is not None and start_ticks(pid) == ticks:
        select.select([fd], [], [])
        return
    while start_ticks(pid) == ticks and ticks is not None:
        time.sleep(0.2)


def _marked_pids(needle: bytes, spare: frozenset[int] = frozenset()) -> list[int]:
    """Processes carrying the mark, and every process in a session one of them is in.

    A run's agent, commands and gates run in sessions of their own; a process in there that
    cleared its environment (`env -i`) and left its process group still belongs to the
    session. Sessions in `spare` (the invocation's own, the user's terminal) are never swept.
    """
    me = os.getpid()
    marked, sessions = [], {}
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        pid = int(name)
        try:
            with open(f"/proc/{name}/environ", "rb") as handle:
                environ = handle.read()
            sessions[pid] = os.getsid(pid)
        except OSError:
            continue
        if needle in environ.split(b"\0"):
            marked.append(pid)
    swept = {sessions[pid] for pid in marked} - spare - {0, 1, os.getsid(0)}
    return sorted(set(marked) | {pid for pid, sid in sessions.items() if sid in swept})


def sweep(
    token: str,
    sweep_secs: float = SWEEP_SECS,
    spare: frozenset[int] = frozenset(),
    under: frozenset[int] = frozenset(),
) -> int:
    """Kill every process carrying `token`'s mark, and the rest of their sessions, until none
    is left, except those descended from a process in `under`; how many were killed."""
    needle = f"{MARK}={token}".encode()
    killed: set[int] = set()
    deadline = time.monotonic() + sweep_secs
    while time.monotonic() < deadline:
        pids = [pid for pid in _marked_pids(needle, spare) if not _descends(pid, under)]
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.05)
    return len(killed)


def _descends(pid: int, ancestors: frozenset[int]) -> bool:
    """Whether process `pid` descends from one of `ancestors` (a process gone counts as one
    that does: it is never signalled, in case its pid was reused)."""
    if not ancestors:
        return False
    from llmtt.process.tree import read_stat

    while pid > 1:
        if pid in ancestors:
            return True
        stat = read_stat(pid)
        if stat is None:
            return True
        pid = stat.ppid
    return False


def end_strays(alive: Collection[int]) -> int:
    """In `doit run`'s main process: kill what this invocation's runs started that descends
    from none of the processes `alive` (this process and its live workers), with the rest of
    its sessions: the processes of the run of a worker that died, which nothing else would end
    before the invocation does (nor hold to the run's time limit). How many were killed."""
    token = os.environ.get(MARK)
    if token is None:
        return 0
    return sweep(token, STRAY_SECS, frozenset({os.getsid(0)}), frozenset(alive))


def main(argv: list[str]) -> int:
    """Wait for the invocation `argv` names to end, then end what it left behind."""
    pid, ticks, token = int(argv[0]), (int(argv[1]) if argv[1] != "None" else None), argv[2]
    try:
        spare = frozenset({os.getsid(pid)})  # doit's own session: the user's terminal
    except OSError:
        spare = frozenset()
    _wait_for_end(pid, ticks)
    needle = f"{MARK}={token}".encode()
    if _marked_pids(needle, spare):
        time.sleep(GRACE_SECS)  # workers that are still ending their runs finish first
        sweep(token, spare=spare)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
