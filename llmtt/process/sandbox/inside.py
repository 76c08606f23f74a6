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
import os
import select
import sys

CHUNK = 65536


def pipe(a: _socket.socket, b: _socket.socket) -> None:
    """Pass bytes both ways until both sides have ended; then close both."""
    peer = {a: b, b: a}
    open_ = [a, b]
    try:
        while open_:
            for sock in select.select(open_, [], [])[0]:
                data = sock.recv(CHUNK)
                if data:
                    peer[sock].sendall(data)
                    continue
                open_.remove(sock)
                try:
                    peer[sock].shutdown(_socket.SHUT_WR)
                except OSError:
                    pass
    except OSError:
        pass
    finally:
        a.close()
        b.close()


def _serve(listener: _socket.socket, path: str) -> None:
    while True:
        fd, _ = listener._accept()  # type: ignore[attr-defined]  # the C socket's accept
        conn = _socket.socket(fileno=fd)
        up = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        try:
            up.connect(path)
        except OSError:
            conn.close()
            up.close()
            continue
        _thread.start_new_thread(pipe, (conn, up))


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


def main(argv: list[str]) -> None:
    """Listen, leave a detached relay behind, then become the command."""
    listeners = _listen(argv[1])
    command = argv[3:]  # after "--"
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
        os.execvp(command[0], command)
    except OSError as exc:
        sys.stderr.write(f"llmtt: cannot run {command[0]}: {exc.strerror}\n")
        os._exit(127)


if __name__ == "__main__":
    main(sys.argv)
