"""What the benchmarks read of running processes from /proc: a process tree and resident
memory."""

from __future__ import annotations

import os


def tree(pid: int) -> list[int]:
    """`pid` and its descendants (from the children lists in /proc)."""
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        try:
            for tid in os.listdir(f"/proc/{current}/task"):
                with open(f"/proc/{current}/task/{tid}/children") as handle:
                    todo += [int(c) for c in handle.read().split()]
        except OSError:
            continue
    return found


def rss_mb(pid: int) -> float:
    """A process's resident memory in MB (0 once it has ended)."""
    try:
        with open(f"/proc/{pid}/status") as handle:
            for line in handle:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0
