"""Start a command under a new pseudo-terminal without forking this process.

ptyprocess forks the harness, then execs: the fork copies the page tables of a process that
holds a whole plan (3.3 ms at 60 MB here), the harness then pays copy-on-write faults on what
it writes, and the child closes every descriptor up to the limit before its exec. glibc's
posix_spawn starts the child with vfork semantics whatever this process holds (0.7 ms); an
extra trivial run went from 23.6 to 9.7 ms (bench/README.md, session 11). The
child is what ptyprocess made: the leader of a session of its own whose controlling terminal
is the PTY (opened in the child after setsid, so it becomes its terminal), on 0, 1 and 2, no
other descriptor, in `cwd`, window size and echo as asked, and no signal ignored that Python
ignores for itself.

Python's os.posix_spawn has no working-directory action, so glibc is called through ctypes.
Where glibc lacks the actions this needs (posix_spawn_file_actions_addchdir_np, 2.29;
addclosefrom_np, 2.34) or is not the C library, or where a terminal cannot be opened by its
name, `available()` is false and the runner falls back to ptyprocess.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import functools
import os
import signal
import struct
import termios
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ptyprocess import PtyProcessError

# glibc's attribute flags (spawn.h).
_SETSIGDEF = 0x04
_SETSIGMASK = 0x08
_SETSID = 0x80
# The opaque types are smaller than these in glibc (80, 336 and 128 bytes on x86-64 and
# aarch64); a buffer larger than the type is harmless.
_ACTIONS_SIZE = 256
_ATTR_SIZE = 1024
_SIGSET_SIZE = 256
# How long close() waits for a child it had to kill.
_KILL_WAIT_SECS = 1.0


@functools.cache
def _libc() -> Any:
    """glibc with the functions spawn() needs, or None."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        for name in (
            "posix_spawn",
            "posix_spawn_file_actions_init",
            "posix_spawn_file_actions_destroy",
            "posix_spawn_file_actions_addchdir_np",
            "posix_spawn_file_actions_addclosefrom_np",
            "posix_spawn_file_actions_addopen",
            "posix_spawn_file_actions_adddup2",
            "posix_spawnattr_init",
            "posix_spawnattr_destroy",
            "posix_spawnattr_setflags",
            "posix_spawnattr_setsigdefault",
            "posix_spawnattr_setsigmask",
            "sigemptyset",
            "sigaddset",
        ):
            getattr(libc, name)
    except (OSError, AttributeError):
        return None
    return libc


def available() -> bool:
    """Whether spawn() can be used here: glibc >= 2.34, and a new terminal can be opened by
    its name, as the child opens it."""
    return _libc() is not None and _terminal_by_name()


def _terminal_by_name() -> bool:
    """Whether a new PTY can be opened again through its name here. A sandbox may give
    openpty() but not the /dev/pts path; the runner then forks, which needs no name, rather
    than fail every run. Asked once a process; a look that could not be made (no descriptor
    or terminal left at that moment) is made again next time."""
    if _BY_NAME:
        return _BY_NAME[0]
    try:
        master, slave = os.openpty()
    except OSError:
        return True  # no terminal now: the runner says so, either way
    try:
        os.close(os.open(os.ttyname(slave), os.O_RDWR | os.O_NOCTTY))
    except OSError as exc:
        if exc.errno in (errno.EMFILE, errno.ENFILE):
            return True
        _BY_NAME.append(False)
    else:
        _BY_NAME.append(True)
    finally:
        os.close(master)
        os.close(slave)
    return _BY_NAME[0]


_BY_NAME: list[bool] = []  # _terminal_by_name's answer, once known


class Child:
    """The spawned process and our end of its terminal; what the runner asks of ptyprocess's
    PtyProcess: its pid and fd, isalive() (which reaps it), its exit status or signal, and
    close()."""

    def __init__(self, pid: int, fd: int) -> None:
        self.pid = pid
        self.fd = fd
        self.exitstatus: int | None = None
        self.signalstatus: int | None = None
        self._ended = False

    def isalive(self) -> bool:
        """False once the child has exited, which reaps it and keeps how it ended."""
        if self._ended:
            return False
        try:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            raise PtyProcessError(f"process {self.pid} was reaped by someone else") from None
        if pid == 0:
            return True
        self._ended = True
        if os.WIFSIGNALED(status):
            self.signalstatus = os.WTERMSIG(status)
        else:
            self.exitstatus = os.waitstatus_to_exitcode(status)
        return False

    def close(self) -> None:
        """Close our end of the terminal; a child still alive is killed and reaped, and one
        that survives that (stuck in the kernel) raises PtyProcessError."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        if not self.isalive():
            return
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + _KILL_WAIT_SECS
        while time.monotonic() < deadline:
            if not self.isalive():
                return
            time.sleep(0.01)
        raise PtyProcessError(f"process {self.pid} survived SIGKILL")


def spawn(
    executable: str,
    argv: Sequence[str],
    env: Mapping[str, str],
    cwd: Path,
    dimensions: tuple[int, int],
    default_signals: Sequence[int],
) -> Child:
    """Start `executable` with `argv` and `env` in `cwd` under a new PTY of `dimensions`
    (rows, columns), echo off, `default_signals` at their defaults. A failure to start it
    (not found, not executable, `cwd` gone) raises the OSError for it."""
    libc = _libc()
    if libc is None:
        raise RuntimeError("posix_spawn with a working directory is not available")
    master, slave = os.openpty()  # neither is inherited (O_CLOEXEC)
    try:
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", *dimensions, 0, 0))
        attrs = termios.tcgetattr(slave)
        attrs[3] &= ~termios.ECHO
        termios.tcsetattr(slave, termios.TCSANOW, attrs)
        pid = _posix_spawn(
            libc, executable, argv, env, cwd, os.fsencode(os.ttyname(slave)), default_signals
        )
    except BaseException:
        os.close(master)
        raise
    finally:
        # The child holds the terminal now; ours would keep its end from reading EOF.
        os.close(slave)
    return Child(pid, master)


def _posix_spawn(
    libc: Any,
    executable: str,
    argv: Sequence[str],
    env: Mapping[str, str],
    cwd: Path,
    tty: bytes,
    default_signals: Sequence[int],
) -> int:
    actions = ctypes.create_string_buffer(_ACTIONS_SIZE)
    attr = ctypes.create_string_buffer(_ATTR_SIZE)
    defaults = ctypes.create_string_buffer(_SIGSET_SIZE)
    mask = ctypes.create_string_buffer(_SIGSET_SIZE)
    _check(libc.posix_spawn_file_actions_init(actions), "file actions")
    try:
        _check(libc.posix_spawnattr_init(attr), "attributes")
        try:
            path = os.fsencode(cwd)
            _check(libc.posix_spawn_file_actions_addchdir_np(actions, path), "chdir")
            # Opened by the session leader that setsid made (before the file actions), and
            # without O_NOCTTY: the PTY becomes the child's controlling terminal.
            _check(libc.posix_spawn_file_actions_addopen(actions, 0, tty, os.O_RDWR, 0), "open")
            for fd in (1, 2):
                _check(libc.posix_spawn_file_actions_adddup2(actions, 0, fd), "dup2")
            _check(libc.posix_spawn_file_actions_addclosefrom_np(actions, 3), "closefrom")
            libc.sigemptyset(defaults)
            for number in default_signals:
                libc.sigaddset(defaults, int(number))
            libc.sigemptyset(mask)
            _check(libc.posix_spawnattr_setsigdefault(attr, defaults), "signal defaults")
            _check(libc.posix_spawnattr_setsigmask(attr, mask), "signal mask")
            flags = ctypes.c_short(_SETSID | _SETSIGDEF | _SETSIGMASK)
            _check(libc.posix_spawnattr_setflags(attr, flags), "flags")
            c_argv = _strings([os.fsencode(a) for a in argv])
            c_env = _strings([os.fsencode(k) + b"=" + os.fsencode(v) for k, v in env.items()])
            pid = ctypes.c_int(0)
            error = libc.posix_spawn(
                ctypes.byref(pid), os.fsencode(executable), actions, attr, c_argv, c_env
            )
            if error:
                raise OSError(error, os.strerror(error), executable)
            return pid.value
        finally:
            libc.posix_spawnattr_destroy(attr)
    finally:
        libc.posix_spawn_file_actions_destroy(actions)


def _strings(items: list[bytes]) -> Any:
    """A NULL-terminated array of C strings (kept alive by the array's own references). An
    item holding a NUL byte is refused, as subprocess refuses it: C would see it cut there."""
    if any(b"\0" in item for item in items):
        raise ValueError("embedded null byte")
    return (ctypes.c_char_p * (len(items) + 1))(*items, None)


def _check(error: int, what: str) -> None:
    if error:
        raise OSError(error, f"posix_spawn {what}: {os.strerror(error)}")
