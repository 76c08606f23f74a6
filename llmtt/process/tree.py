"""The processes a run started, found in /proc: this process made a child subreaper (a
descendant that calls setsid() is re-parented to us when its parent dies), a run's tree told from
our other children, signalled as a whole and reaped."""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass

_PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> bool:
    """Make this process a child subreaper (Linux) so orphaned descendants re-parent to it.

    Idempotent. Set on every run rather than once per import: the attribute is not inherited
    through fork(), and doit -n forks the worker processes that run agents.
    """
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        one, zero = ctypes.c_ulong(1), ctypes.c_ulong(0)
        return int(libc.prctl(_PR_SET_CHILD_SUBREAPER, one, zero, zero, zero)) == 0
    except (OSError, AttributeError):  # not Linux: process-group killing still applies
        return False


@dataclass(frozen=True)
class Proc:
    """One line of /proc/<pid>/stat, the fields we need."""

    pid: int
    state: str
    ppid: int
    pgrp: int
    session: int
    start: int  # clock ticks after boot


def processes() -> list[Proc]:
    """Every process visible in /proc (none where there is no /proc)."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    found = []
    for name in names:
        if name.isdigit():
            proc = read_stat(int(name))
            if proc is not None:
                found.append(proc)
    return found


def children(pid: int) -> list[int] | None:
    """`pid`'s children, from every thread's /proc/PID/task/TID/children; None where the
    kernel does not offer those files."""
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []  # gone
    found: list[int] = []
    for tid in threads:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as handle:
                found += map(int, handle.read().split())
        except FileNotFoundError:
            if not os.path.exists(f"/proc/{pid}/task/{tid}"):
                continue  # the thread ended
            return None  # no CONFIG_PROC_CHILDREN
        except OSError:
            continue
    return found


def family(root: int, *, deep: bool, keep: Callable[[Proc], bool] | None = None) -> list[Proc]:
    """`root`'s children that `keep` accepts and (`deep`) all their descendants, read from the
    children lists of those processes alone, not from a scan of every process on the machine
    (which is done only where the kernel keeps no children lists)."""
    kids: Callable[[int], list[Proc]]
    top = children(root)
    if top is None:
        by_parent: dict[int, list[Proc]] = {}
        for proc in processes():
            by_parent.setdefault(proc.ppid, []).append(proc)
        kids = lambda pid: by_parent.get(pid, [])  # noqa: E731
        first = kids(root)
    else:
        kids = child_stats
        first = stats(top)
    todo = [p for p in first if keep is None or keep(p)]
    found: dict[int, Proc] = {}
    while todo:
        proc = todo.pop()
        if proc.pid not in found:
            found[proc.pid] = proc
            if deep:
                todo.extend(kids(proc.pid))
    return list(found.values())


def child_stats(pid: int) -> list[Proc]:
    return stats(children(pid) or [])


def stats(pids: list[int]) -> list[Proc]:
    return [p for p in map(read_stat, pids) if p is not None]


def read_stat(pid: int) -> Proc | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            raw = handle.read()
        # the command name, in parentheses, may itself contain ")" and spaces
        fields = raw.rsplit(b")", 1)[1].split()
        ppid, pgrp, session, start = (int(fields[i]) for i in (1, 2, 3, 19))
        return Proc(pid, fields[0].decode(), ppid, pgrp, session, start)
    except (OSError, IndexError, ValueError):
        return None


class RunTree:
    """The processes one run started: the child's subtree, and its orphans re-parented to us.

    A child of ours belongs to the run if it was not our child before the spawn, started no
    earlier than the run's child, and is outside our session (a run's processes can never
    join our session; a child another thread of ours starts normally stays in it).
    """

    def __init__(self, child: int, before: Mapping[int, int]) -> None:
        self.me = os.getpid()
        self.session = os.getsid(0)
        self.child = child
        self.before = before
        stat = read_stat(child)
        self.child_start = stat.start if stat is not None else 0
        self.procfs = stat is not None  # without /proc, only the process group is seen

    def group_alive(self) -> bool:
        """Whether the child's process group still has a member (for use without /proc)."""
        try:
            os.killpg(self.child, 0)
        except (ProcessLookupError, PermissionError):
            return False
        return True

    def members(self) -> list[Proc]:
        """The run's processes now, zombies included (the child only until it is reaped)."""
        return family(self.me, deep=True, keep=self._started_by_run)

    def _started_by_run(self, proc: Proc) -> bool:
        return (
            self.before.get(proc.pid) != proc.start
            and proc.start >= self.child_start
            and proc.session != self.session
        )

    def reap(self, members: list[Proc]) -> set[int]:
        """Reap the run's zombies that are our children; the pids reaped.

        The child itself is left to ptyprocess, which keeps its exit status.
        """
        reaped = set()
        for proc in members:
            if proc.state in "ZX" and proc.ppid == self.me and proc.pid != self.child:
                try:
                    if os.waitpid(proc.pid, os.WNOHANG)[0] == proc.pid:
                        reaped.add(proc.pid)
                except ChildProcessError:  # already reaped
                    reaped.add(proc.pid)
        return reaped


def send_signal(procs: list[Proc], group: int, sig: int, blind: bool = False) -> None:
    """Send `sig` to `procs`, and to the child's process group while one of them is in it.

    The group signal also reaches a process forked after the last look at /proc. It is sent
    only while a member is seen (or `blind`ly, without /proc), so that a pid reused after the
    group emptied is never signalled.
    """
    targets = {p.pid for p in procs}
    if blind or any(p.pgrp == group for p in procs):
        try:
            os.killpg(group, sig)
        except (ProcessLookupError, PermissionError):
            pass
    for pid in targets:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
