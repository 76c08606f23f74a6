"""Running a shell command (setup, gates, version probes, the litellm agent's commands) with
a timeout that kills its group.

Output goes to temporary files, not pipes: a background process the command leaves behind
cannot keep us waiting for an end-of-file, and it is killed with the group when we are done.
The command has no terminal: stdin is /dev/null and it runs in a session of its own.
"""

from __future__ import annotations

import math
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from llmtt.process.sandbox.bwrap import Confinement
from llmtt.process.tree import become_subreaper
from llmtt.process.watchdog import marked

MAX_CAPTURE = 1_000_000
# The exit code of a command refused for a NUL byte: bash's for a command it cannot execute
# (as it says of a script file with a NUL byte in its first line).
REFUSED = 126
_MAX_POLL_MS = 2**31 - 1  # poll()'s longest wait; a longer timeout (or none: inf) waits again


def tool_path() -> str:
    """PATH for runs: the caller's PATH with this Python's bin folder first.

    Tools installed beside llmtt (e.g. in its virtualenv) are found even when that
    virtualenv is not activated.
    """
    here = str(Path(sys.executable).parent)
    parts = [here] + [p for p in os.environ.get("PATH", os.defpath).split(os.pathsep) if p != here]
    return os.pathsep.join(parts)


@dataclass(frozen=True)
class ShellResult:
    """What one shell command did."""

    command: str
    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool
    duration_secs: float
    signal: int | None = None  # the signal that ended the command (then exit_code is None)

    @property
    def ok(self) -> bool:
        """True when the command exited 0 within its time."""
        return self.exit_code == 0 and not self.timed_out

    def describe(self) -> str:
        """A one-line account: `exit 3`, `timed out after 5s`, `killed by signal 9`."""
        if self.timed_out:
            return f"timed out after {self.duration_secs:.0f}s"
        if self.signal is not None:
            return f"killed by signal {self.signal}"
        if self.exit_code is None:
            return "killed by a signal"
        return f"exit {self.exit_code}"

    @property
    def shell_exit_code(self) -> int | None:
        """The exit code as a shell reports it: `128+N` for a death by signal N; None when
        the command was stopped at its timeout."""
        if self.signal is not None:
            return 128 + self.signal
        return self.exit_code


def nul_refusal(command: str) -> str | None:
    """Why `command` is not run, when it holds a NUL byte: a program's argument ends there, so
    bash would be given another command (Python refuses to start it: "embedded null byte")."""
    at = command.find("\0")
    if at < 0:
        return None
    return (
        f"llmtt: not run: the command contains a NUL byte (character {at + 1}), which no "
        "command line can hold"
    )


def run_shell(
    command: str,
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout_secs: float,
    combined: bool = False,
    keep_tail: bool = False,
    confine: Confinement | None = None,
) -> ShellResult:
    """Run `command` with bash in `cwd`; never waits longer than `timeout_secs` (+ ~1 s).
    `confine`: in that sandbox (its view's working folder is `cwd`).

    `combined`: stderr goes into `stdout`, interleaved in the order written (as a terminal
    shows them). Output past MAX_CAPTURE bytes is cut: its head is kept, and with `keep_tail`
    its last bytes too (where a failing command says why). A command holding a NUL byte is
    not run: it exits REFUSED, saying why on stderr.
    """
    refused = nul_refusal(command)
    if refused is not None:
        said = refused + "\n"
        return ShellResult(
            command, REFUSED, said if combined else "", "" if combined else said, False, 0.0
        )
    started = time.monotonic()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        argv = ["bash", "-c", command]
        if confine is not None:
            # bubblewrap's own process outlives the command by a moment: it is handed to this
            # process and reaped here, not left to a system init that may never reap it.
            become_subreaper()
        proc = subprocess.Popen(
            confine.wrap(argv) if confine is not None else argv,
            cwd=cwd,
            env=marked(env),  # the watchdog's mark: ended even if this process is killed
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT if combined else err,
            start_new_session=True,
        )
        timed_out = False
        try:
            code: int | None = _wait(proc, timeout_secs)
        except subprocess.TimeoutExpired:
            timed_out = True
            code = None
        except BaseException:  # ^C or SIGTERM: the command's group ends with us
            kill_group(proc.pid, grace_secs=0.0)
            raise
        kill_group(proc.pid)
        signal_number = None
        if timed_out:
            proc.wait(timeout=5)
        elif code is not None and code < 0:
            signal_number, code = -code, None
        duration = time.monotonic() - started
        stdout, stderr = _read(out, keep_tail), _read(err, keep_tail)
        return ShellResult(command, code, stdout, stderr, timed_out, duration, signal_number)


def _wait(proc: subprocess.Popen[bytes], timeout_secs: float) -> int:
    """`proc.wait(timeout_secs)`, woken by the process's end itself (through a pidfd) rather
    than by subprocess's look every few milliseconds, which added 1-4 ms to every short
    command, such as a gate's."""
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # before Linux 5.3, or not Linux
        return proc.wait(timeout=timeout_secs)
    try:
        ended = select.poll()
        ended.register(pidfd, select.POLLIN)
        deadline = time.monotonic() + timeout_secs
        while (code := proc.poll()) is None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise subprocess.TimeoutExpired(proc.args, timeout_secs)
            ended.poll(_MAX_POLL_MS if left * 1000 >= _MAX_POLL_MS else math.ceil(left * 1000))
        return code
    finally:
        os.close(pidfd)


def kill_group(pgid: int, grace_secs: float = 0.5) -> None:
    """TERM then KILL every process left in a process group, reaping those that were handed
    to this process (a subreaper: bubblewrap's own processes end after the command's exit)."""
    try:
        os.killpg(pgid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        return
    deadline = time.monotonic() + grace_secs
    pause = 0.0005  # most groups are gone within a millisecond: look again soon, then less often
    while True:
        _reap(pgid)
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return
        if time.monotonic() >= deadline:
            break
        time.sleep(pause)
        pause = min(pause * 2, 0.02)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    _reap(pgid)


def _reap(pgid: int) -> None:
    """Collect the ended processes of group `pgid` that are this process's children."""
    while True:
        try:
            pid, _ = os.waitpid(-pgid, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _read(handle: BinaryIO, keep_tail: bool) -> str:
    """The captured output decoded (bytes that are not UTF-8 replaced), cut past MAX_CAPTURE."""
    size = handle.seek(0, os.SEEK_END)
    handle.seek(0)
    # Read no more than was measured: a process that escaped the group may still be writing.
    if size <= MAX_CAPTURE:
        return _decode(handle.read(size))
    if not keep_tail:
        head = _decode(handle.read(MAX_CAPTURE))
        return head + f"\n[... output truncated at {MAX_CAPTURE} bytes ...]\n"
    half = MAX_CAPTURE // 2
    head = _decode(handle.read(half))
    handle.seek(size - half)
    tail = _decode(handle.read(half))
    return f"{head}\n[... {size - 2 * half} bytes of output cut ...]\n{tail}"


def _decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")
