"""Running a shell command (setup, gates, version probes) with a timeout that kills its group.

Output goes to temporary files, not pipes: a background process the command leaves behind
cannot keep us waiting for an end-of-file, and it is killed with the group when we are done.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from llmtt.invocation.watchdog import marked

MAX_CAPTURE = 1_000_000


@dataclass(frozen=True)
class ShellResult:
    """What one shell command did."""

    command: str
    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool
    duration_secs: float

    @property
    def ok(self) -> bool:
        """True when the command exited 0 within its time."""
        return self.exit_code == 0 and not self.timed_out

    def describe(self) -> str:
        """A one-line account: `exit 3`, `timed out after 5s`, `killed by signal 9`."""
        if self.timed_out:
            return f"timed out after {self.duration_secs:.0f}s"
        if self.exit_code is None:
            return "killed by a signal"
        return f"exit {self.exit_code}"


def run_shell(
    command: str, *, cwd: Path, env: Mapping[str, str], timeout_secs: float
) -> ShellResult:
    """Run `command` with bash in `cwd`; never waits longer than `timeout_secs` (+ ~1 s)."""
    started = time.monotonic()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            ["bash", "-c", command],
            cwd=cwd,
            env=marked(env),  # the watchdog's mark: ended even if this process is killed
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,
        )
        timed_out = False
        try:
            code: int | None = proc.wait(timeout=timeout_secs)
        except subprocess.TimeoutExpired:
            timed_out = True
            code = None
        except BaseException:  # ^C or SIGTERM: the command's group ends with us
            kill_group(proc.pid, grace_secs=0.0)
            raise
        kill_group(proc.pid)
        if timed_out:
            proc.wait(timeout=5)
        elif code is not None and code < 0:
            code = None
        duration = time.monotonic() - started
        return ShellResult(command, code, _read(out), _read(err), timed_out, duration)


def kill_group(pgid: int, grace_secs: float = 0.5) -> None:
    """TERM then KILL every process left in a process group."""
    try:
        os.killpg(pgid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        return
    deadline = time.monotonic() + grace_secs
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return
        time.sleep(0.02)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _read(handle: object) -> str:
    assert hasattr(handle, "seek") and hasattr(handle, "read")
    handle.seek(0)
    data: bytes = handle.read(MAX_CAPTURE + 1)
    text = data[:MAX_CAPTURE].decode("utf-8", errors="replace")
    if len(data) > MAX_CAPTURE:
        text += f"\n[... output truncated at {MAX_CAPTURE} bytes ...]\n"
    return text
