"""spawn.Child on its own: what the runner leaves to its close() (the rest of the spawned
child's behaviour is proven through the runner, in test_runner.py)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from llmtt.agents import spawn

ENV = {"PATH": os.environ["PATH"], "LANG": "C.UTF-8"}


def test_a_spawned_child_still_alive_at_close_is_killed_and_reaped(tmp_path: Path) -> None:
    # It ignores the hangup that closing its terminal sends: only the KILL ends it.
    script = "trap '' HUP; echo ready; exec sleep 30"
    child = spawn.spawn("/bin/sh", ["sh", "-c", script], ENV, tmp_path, (50, 220), ())
    assert os.read(child.fd, 100).strip() == b"ready"
    child.close()
    assert not child.isalive() and child.signalstatus == signal.SIGKILL
    assert not Path(f"/proc/{child.pid}").exists()  # reaped, not a zombie
