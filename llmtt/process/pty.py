"""The one process runner for every agent: a pseudo-terminal, a hard timeout, no leftovers.

The child runs in its own session, so its process group can be signalled as a whole. A
descendant that calls setsid() leaves that group; making this process a child subreaper keeps
it in our process tree anyway: when its parent dies it is re-parented to us. After every run,
the processes the run started are found by walking PPid links in /proc, terminated, killed and
reaped, so nothing a run started outlives it.

The child is started with glibc's posix_spawn (llmtt.process.spawn), not by forking this
process, which holds a whole plan; where that cannot set the working directory, ptyprocess
forks.
"""

from __future__ import annotations

import os
import select
import signal
import termios
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, TypeAlias

from ptyprocess import PtyProcess, PtyProcessError

from llmtt.events import MAX_TEXT
from llmtt.process import spawn
from llmtt.process.sandbox.bwrap import Confinement
from llmtt.process.tree import RunTree, become_subreaper, family, send_signal
from llmtt.process.watchdog import marked

READ_SIZE = 65536


DIMENSIONS = (50, 220)


# After the child exits, how long a descendant that still holds the PTY may keep us reading.
DRAIN_SECS = 0.2


# After SIGKILL, how long to wait for the run's processes to die and be reaped.
KILL_WAIT_SECS = 1.0


# How long to wait at most between looks at a run's processes (as long as the child runs, when
# there is no pidfd to wait on; after its exit, for what it left to end), and at least, after
# its exit: a run whose processes keep ending (a loop of short children deaf to TERM) is looked
# at no more than a thousand times a second.
POLL_SECS = 0.02
MIN_POLL_SECS = 0.001


# The child under its PTY: spawned (spawn.Child), or forked by ptyprocess where it cannot be.
_Spawned: TypeAlias = "PtyProcess | spawn.Child"


# The signals the interpreter sets to be ignored at start (those subprocess restores).
_PYTHON_IGNORES = tuple(
    getattr(signal, name) for name in ("SIGPIPE", "SIGXFZ", "SIGXFSZ") if hasattr(signal, name)
)


_EOF = b"\x04"


@dataclass(frozen=True)
class ProcessResult:
    """How a process under the PTY ended and what it printed.

    `exit_code` is None when the run timed out or the process died of a signal (then `signal`
    says which). `output` is everything the PTY produced, decoded, with "\\r\\n" made "\\n".
    """

    exit_code: int | None
    signal: int | None
    timed_out: bool
    duration_secs: float
    output: str
    stopped: bool = False  # ended early because the caller's `stop()` said so


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
    stop: Callable[[], bool] | None = None,
    confine: Confinement | None = None,
) -> ProcessResult:
    """Run `argv` under a PTY; at `timeout_secs` or its exit, end every process it started.

    Raw output goes to `transcript` (flushed) and `on_output` as it arrives. `stdin_data` is
    typed into the terminal, followed by end-of-file (so a line discipline applies: control
    characters act, lines over 4095 bytes are cut); with none the child reads EOF at once.
    Killing takes at most `grace_secs` (TERM to KILL) plus KILL_WAIT_SECS. `argv[0]` is looked
    up in `env`'s PATH; a missing command or `cwd` raises FileNotFoundError. Other threads of
    this process must not start new-session children (start_new_session) during a run: they
    would be taken for the run's own. `confine`: in that sandbox.
    """
    if not cwd.is_dir():
        raise FileNotFoundError(f"working directory {cwd} does not exist")
    if confine is not None:
        argv = confine.wrap(argv)  # bubblewrap looks the command up inside
    executable = _executable(argv, cwd, env)
    become_subreaper()
    me = os.getpid()
    before = {p.pid: p.start for p in family(me, deep=False)}
    kept = _Capture(MAX_TEXT)

    def take(data: bytes) -> None:
        kept.add(data)
        if transcript is not None:
            transcript.write(data)
            transcript.flush()
        if on_output is not None:
            on_output(data)

    started = time.monotonic()
    proc: _Spawned
    if spawn.available():
        # The watchdog's mark in the environment: ended even if this process is killed.
        proc = spawn.spawn(
            executable, [executable, *argv[1:]], marked(env), cwd, DIMENSIONS, _PYTHON_IGNORES
        )
    else:
        proc = _fork_spawn(executable, argv, env, cwd)
    tree = RunTree(proc.pid, before)
    pidfd = _pidfd(proc.pid)
    try:
        terminal = _Terminal(proc.fd, _stdin_bytes(proc.fd, stdin_data), take)
        if pidfd is not None:
            terminal.watch(pidfd)
        ended = _until_exit(proc, terminal, started + timeout_secs, stop)
        timed_out, stopped = ended == "timeout", ended == "stopped"
        _end_run(proc, tree, terminal, grace_secs)
    except BaseException:
        _end_run(proc, tree, None, 0.0)  # our own failure (or ^C): leave nothing behind
        raise
    finally:
        if pidfd is not None:
            os.close(pidfd)
        try:
            proc.close()
        except PtyProcessError:  # the child survived SIGKILL (stuck in the kernel)
            pass
    exit_code, sig = _status(proc, timed_out or stopped)
    duration = time.monotonic() - started
    return ProcessResult(exit_code, sig, timed_out, duration, kept.text(), stopped)


def _fork_spawn(
    executable: str, argv: Sequence[str], env: Mapping[str, str], cwd: Path
) -> PtyProcess:
    """ptyprocess's way, where glibc's posix_spawn cannot set the working directory: fork
    this process, then exec in the child."""

    def in_child() -> None:
        os.chdir(cwd)
        # Python ignores these for itself, and an ignored signal stays ignored through exec:
        # the agent's `yes | head -1` would print "Broken pipe" where a terminal prints nothing.
        for number in _PYTHON_IGNORES:
            signal.signal(number, signal.SIG_DFL)

    # cwd goes through preexec_fn: ptyprocess reports its failure to us, whereas a failing
    # chdir in its own `cwd` handling raises inside the forked child, which then runs our code.
    proc = PtyProcess.spawn(
        [executable, *argv[1:]],
        env=marked(env),  # the watchdog's mark: ended even if this process is killed
        echo=False,
        dimensions=DIMENSIONS,
        preexec_fn=in_child,
    )
    proc.delayafterclose = 0.0  # ptyprocess sleeps in close(); we close once the tree is dead
    proc.delayafterterminate = 0.0
    return proc


class _Capture:
    """What a process printed, in bounded memory: its first and last `limit // 2` bytes and how
    many were left out between them (all of it reaches the transcript as it arrives)."""

    def __init__(self, limit: int) -> None:
        self.half = limit // 2
        self.head = bytearray()
        self.tail = bytearray()
        self.size = 0

    def add(self, data: bytes) -> None:
        self.size += len(data)
        room = self.half - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            if len(self.tail) > 2 * self.half:  # trimmed now and then, not on every chunk
                del self.tail[: len(self.tail) - self.half]

    def text(self) -> str:
        """The output decoded, "\\r\\n" made "\\n", with a marker where bytes were left out."""
        tail = bytes(self.tail[-self.half :]) if self.half else b""
        cut = self.size - len(self.head) - len(tail)
        if cut <= 0:
            return _decode(bytes(self.head) + tail)
        marker = f"\n[... {cut} bytes of output cut by llmtt ...]\n"
        return _decode(bytes(self.head)) + marker + _decode(tail)


def _decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace").replace("\r\n", "\n")


def _executable(argv: Sequence[str], cwd: Path, env: Mapping[str, str]) -> str:
    """`argv[0]` as an absolute path, found as the child would: `env`'s PATH, from `cwd`.

    ptyprocess would search our own PATH, and resolve "./x" against our working directory.
    """
    if not argv:
        raise ValueError("run_in_pty needs a command (argv is empty)")
    command = argv[0]
    if os.sep in command:
        candidates = [cwd / command]
    else:  # an empty PATH entry means the working directory
        path = env.get("PATH", os.defpath).split(os.pathsep)
        candidates = [cwd / (entry or ".") / command for entry in path]
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate.absolute())
    raise FileNotFoundError(
        f"command {command!r} not found, or not executable, on the PATH given (from {cwd})"
    )


def _pidfd(pid: int) -> int | None:
    """A descriptor that becomes readable when `pid` exits (Linux >= 5.3), else None."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def _stdin_bytes(fd: int, data: bytes | None) -> bytes:
    """What to type: the data, then the terminal's EOF character where read() sees EOF."""
    try:
        eof = termios.tcgetattr(fd)[6][termios.VEOF]
    except (termios.error, OSError, IndexError):
        eof = _EOF
    if not isinstance(eof, bytes) or eof in (b"", b"\0"):  # "\0": the key is disabled
        eof = _EOF
    if not data:
        return eof
    # EOF only ends input at the start of a line; after a partial line it just flushes it.
    return data + (eof if data.endswith(b"\n") else eof + eof)


class _Terminal:
    """The PTY master: types stdin, reads output in large chunks, notices when it closes."""

    def __init__(self, fd: int, stdin: bytes, take: Callable[[bytes], None]) -> None:
        self.fd = fd
        self.pending = stdin
        self.take = take
        self.open = True
        self.pidfd: int | None = None
        os.set_blocking(fd, False)  # stdin is written as the child takes it, never blocking
        # poll, not select: select() fails on descriptors numbered over 1023
        self.poller = select.poll()
        self.poller.register(fd, self._mask())

    def watch(self, pidfd: int) -> None:
        """Also wake up when the process behind `pidfd` exits."""
        self.pidfd = pidfd
        self.poller.register(pidfd, select.POLLIN)

    def wait(self, timeout: float, ends: Sequence[int] = ()) -> None:
        """Handle what is ready, waiting at most `timeout` seconds (capped at 1) for it, or
        for one of the processes behind the pidfds `ends` to exit."""
        registered: list[int] = []
        try:
            for fd in ends:
                self.poller.register(fd, select.POLLIN)
                registered.append(fd)
            ready = self.poller.poll(min(max(0.0, timeout), 1.0) * 1000)
        finally:
            for fd in registered:
                self.poller.unregister(fd)
        for fd, events in ready:
            if fd in ends:
                continue
            if fd == self.pidfd:  # stays readable once the child exited: stop watching
                self.poller.unregister(fd)
                self.pidfd = None
                continue
            if events & select.POLLOUT and self.pending:
                self._write()
            if events & (select.POLLIN | select.POLLHUP | select.POLLERR) and self.open:
                self._read()

    def _read(self) -> None:
        try:
            data = os.read(self.fd, READ_SIZE)
        except BlockingIOError:
            return
        except OSError:  # EIO: every holder of the PTY's other end has closed it
            data = b""
        if data:
            self.take(data)
            return
        self.open = False
        self.pending = b""
        self.poller.unregister(self.fd)

    def _write(self) -> None:
        try:
            self.pending = self.pending[os.write(self.fd, self.pending) :]
        except BlockingIOError:
            return
        except OSError:
            self.pending = b""
        self.poller.modify(self.fd, self._mask())

    def _mask(self) -> int:
        return select.POLLIN | (select.POLLOUT if self.pending else 0)


def _until_exit(
    proc: _Spawned, terminal: _Terminal, deadline: float, stop: Callable[[], bool] | None
) -> str:
    """Pump the PTY until the child exits (then drain briefly): `exit`; or `timeout` if the
    deadline came first; or `stopped` once `stop()` (asked after each read) says so.

    A background descendant may hold the PTY open after the child exits: draining stops
    DRAIN_SECS after the exit, whatever that descendant still writes.
    """
    exited_at: float | None = None
    while True:
        now = time.monotonic()
        if exited_at is None and not proc.isalive():
            exited_at = now
        if exited_at is None:
            if now >= deadline:
                return "timeout"
            terminal.wait(deadline - now if terminal.pidfd is not None else POLL_SECS)
            if stop is not None and stop():
                return "stopped"
        else:
            left = exited_at + DRAIN_SECS - now
            if not terminal.open or left <= 0:
                return "exit"
            terminal.wait(left)


def _end_run(proc: _Spawned, tree: RunTree, terminal: _Terminal | None, grace_secs: float) -> None:
    """TERM what is left of the run, KILL it after `grace_secs`, reap it; bounded in time.

    Output that arrives meanwhile is still read (when `terminal` is given).
    """
    kill_at = time.monotonic() + grace_secs
    give_up = kill_at + KILL_WAIT_SECS
    termed: set[int] = set()
    group_termed = False
    while True:
        proc.isalive()  # reaps the child once it has exited
        members = tree.members()
        reaped = tree.reap(members)
        left = [p for p in members if p.pid not in reaped]
        group = not tree.procfs and tree.group_alive()
        now = time.monotonic()
        if not (left or group) or now >= give_up:
            return
        live = [p for p in left if p.state not in "ZX"]
        fresh = [p for p in live if p.pid not in termed]
        if now >= kill_at:
            send_signal(live, tree.child, signal.SIGKILL, group)
        elif fresh or (group and not group_termed):
            # CONT too: a stopped process acts on TERM only once continued
            for sig in (signal.SIGTERM, signal.SIGCONT):
                send_signal(fresh, tree.child, sig, group)
            termed.update(p.pid for p in fresh)
            group_termed = group
        _pause(terminal, [p.pid for p in live])


def _pause(terminal: _Terminal | None, pids: Sequence[int]) -> None:
    """Wait up to POLL_SECS for what is left of a run to end, reading its output meanwhile:
    back as soon as one of `pids` exits (woken through a pidfd), or at once if one is gone
    already. A run's last process is often bubblewrap's own, which outlives the command by the
    few milliseconds its namespaces take to go: a fixed pause made one run in three wait 20 ms
    for it. Never less than MIN_POLL_SECS."""
    started = time.monotonic()
    ends: list[int] = []
    try:
        for pid in pids:
            try:
                ends.append(os.pidfd_open(pid))
            except ProcessLookupError:
                return  # gone meanwhile: look again (after MIN_POLL_SECS, below)
            except (AttributeError, OSError):  # no pidfd (before Linux 5.3, or too many open):
                break  # the pause, woken only by those opened
        if terminal is not None and terminal.open:
            terminal.wait(POLL_SECS, ends)
        elif ends:
            poller = select.poll()
            for fd in ends:
                poller.register(fd, select.POLLIN)
            poller.poll(POLL_SECS * 1000)
        else:
            time.sleep(POLL_SECS)
    finally:
        for fd in ends:
            os.close(fd)
        left = started + MIN_POLL_SECS - time.monotonic()
        if left > 0:
            time.sleep(left)


def _status(proc: _Spawned, timed_out: bool) -> tuple[int | None, int | None]:
    """(exit code, signal): the code is None when the run timed out or a signal ended it."""
    if proc.isalive():  # survived SIGKILL: nothing to report
        return None, None
    sig: int | None = proc.signalstatus
    if timed_out or sig is not None:
        return None, sig
    code: int | None = proc.exitstatus
    return code, None
