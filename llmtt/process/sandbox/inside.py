"""What runs inside a sandbox before its command when the command may reach hosts: listeners on
the loopback addresses /etc/hosts gives those hosts, each connection passed to the harness over
a Unix socket; then the command itself (exec'd, so it keeps the relay's process id).

This file alone is shown inside (as /run/llmtt/relay.py) and run as `python -I -S relay.py
<routes> -- <command>`, with nothing but the standard library (llmtt itself is not visible
inside). `pipe` is shared with the harness's end (`relay.Relay`).
"""

from __future__ import annotations

# The C modules, not `socket` and `threading`: their Python layers double the relay's start.
import _socket
import _thread
import errno
import os
import select
import sys

CHUNK = 65536


MAX_CONNECTIONS = 128  # open at once through one relay end; more are closed at once
_BUSY = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)


class Gate:
    """How many connections are open through one relay end (thread-safe), up to a cap."""

    def __init__(self) -> None:
        self.open = 0
        self._lock = _thread.allocate_lock()

    def enter(self) -> bool:
        """Count a new connection in; False when the cap is reached."""
        with self._lock:
            if self.open >= MAX_CONNECTIONS:
                return False
            self.open += 1
            return True

    def leave(self) -> None:
        """Count a connection out."""
        with self._lock:
            self.open -= 1


def pipe(a: _socket.socket, b: _socket.socket, gate: Gate | None = None) -> None:
    """Pass bytes both ways until both sides have ended; then close both (and leave `gate`).
    Any failure ends the connection, never the relay."""
    ends = {a.fileno(): (a, b), b.fileno(): (b, a)}
    poller = select.poll()  # not select(): a descriptor past 1023 must not end the relay
    for fd in ends:
        poller.register(fd, select.POLLIN)
    try:
        while ends:
            for fd, _ in poller.poll():
                source, dest = ends[fd]
                data = source.recv(CHUNK)
                if data:
                    dest.sendall(data)
                    continue
                poller.unregister(fd)
                del ends[fd]
                try:
                    dest.shutdown(_socket.SHUT_WR)
                except OSError:
                    pass
    except Exception:
        pass
    finally:
        a.close()
        b.close()
        if gate is not None:
            gate.leave()


def accept(listener: _socket.socket) -> _socket.socket | None:
    """The next connection to `listener`; None once it is closed. Out of descriptors or
    memory, it waits a moment and goes on rather than stopping."""
    while True:
        try:
            fd, _ = listener._accept()  # type: ignore[attr-defined]  # the C socket's accept
        except OSError as exc:
            if exc.errno in _BUSY:
                select.poll().poll(100)  # a pause of 100 ms with no module to import
                continue
            if exc.errno in (errno.EBADF, errno.EINVAL):
                return None
            continue  # the client gave up (ECONNABORTED), or a signal
        return _socket.socket(fileno=fd)


def _serve(listener: _socket.socket, path: str) -> None:
    gate = Gate()
    while (conn := accept(listener)) is not None:
        if not gate.enter():
            conn.close()
            continue
        up = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        try:
            up.connect(path)
            _thread.start_new_thread(pipe, (conn, up, gate))
        except Exception:
            conn.close()
            up.close()
            gate.leave()


def _listen(table: str) -> list[tuple[_socket.socket, str]]:
    """`address,port,socket;...`: a listener per route."""
    listeners = []
    for entry in table.split(";"):
        address, port, path = entry.split(",")
        sock = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
        sock.setsockopt(_socket.SOL_SOCKET, _socket.SO_REUSEADDR, 1)
        sock.bind((address, int(port)))
        sock.listen(64)
        listeners.append((sock, path))
    return listeners


def _become(ids: str) -> None:
    """Run on as `uid:gid` in a user namespace of its own: the relay needed uid 0 to listen
    on a port below 1024; the command gets the user's own ids back, and no capability."""
    import ctypes  # only here: a few milliseconds the usual start does not pay

    uid, gid = ids.split(":")
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(0x10000000) != 0:  # CLONE_NEWUSER
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWUSER)")
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} 0 1"), ("gid_map", f"{gid} 0 1")):
        with open(f"/proc/self/{name}", "w") as handle:
            handle.write(text)


def main(argv: list[str]) -> None:
    """Listen, leave a detached relay behind, then become the command:
    `relay.py ROUTES [UID:GID] -- COMMAND...`."""
    listeners = _listen(argv[1])
    ids = argv[2] if argv[2] != "--" else None
    command = argv[argv.index("--", 2) + 1 :]
    if os.fork() == 0:
        if os.fork() == 0:
            # The relay holds none of the command's terminal: its end is not waited for.
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            for pair in listeners[1:]:
                _thread.start_new_thread(_serve, pair)
            _serve(*listeners[0])  # until the sandbox ends
        os._exit(0)
    os.wait()
    for sock, _ in listeners:
        sock.close()
    try:
        if ids is not None:
            _become(ids)
        os.execvp(command[0], command)
    except OSError as exc:
        sys.stderr.write(f"llmtt: cannot run {command[0]}: {exc.strerror or exc}\n")
        os._exit(127)


if __name__ == "__main__":
    main(sys.argv)
