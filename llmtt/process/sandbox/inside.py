"""What runs inside a sandbox before its command when the command may reach hosts: listeners on
the loopback addresses /etc/hosts gives those hosts, each connection passed to the harness over
a Unix socket; then the command itself (exec'd, so it keeps the relay's process id).

This file alone is shown inside (as /run/llmtt/relay.py) and run as `python -I -S relay.py
<routes> -- <command>`, with nothing but the standard library (llmtt itself is not visible
inside). `pipe` is shared with the harness's end (`relay.Relay`).
"""

from __future__ import annotations

import os
import select
import socket
import sys
import threading

CHUNK = 65536


def pipe(a: socket.socket, b: socket.socket) -> None:
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
                    peer[sock].shutdown(socket.SHUT_WR)
                except OSError:
                    pass
    except OSError:
        pass
    finally:
        a.close()
        b.close()


def _serve(listener: socket.socket, path: str) -> None:
    while True:
        conn, _ = listener.accept()
        up = socket.socket(socket.AF_UNIX)
        try:
            up.connect(path)
        except OSError:
            conn.close()
            up.close()
            continue
        threading.Thread(target=pipe, args=(conn, up), daemon=True).start()


def _listen(table: str) -> list[tuple[socket.socket, str]]:
    """`address,port,socket;...`: a listener per route."""
    listeners = []
    for entry in table.split(";"):
        address, port, path = entry.split(",")
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
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
            threads = [threading.Thread(target=_serve, args=pair) for pair in listeners]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
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
