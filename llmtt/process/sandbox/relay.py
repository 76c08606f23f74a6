"""The harness's end of a confined process's network: the hosts it may reach, each behind a
Unix socket that only the sandbox's relay (`inside.py`) is given.

Names are given loopback addresses inside (127.0.0.2, 127.0.0.3, ...; loopback addresses and
`localhost` keep theirs), so a process connects to the same URL as outside and TLS still sees
the real host name; the harness connects to the real host. A host written as another IP address
cannot be relayed (the sandbox has no route to it) and is refused when the policy is made.
"""

from __future__ import annotations

import ipaddress
import shutil
import socket
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from llmtt.process.sandbox import inside

INSIDE_DIR = "/run/llmtt"  # where a sandbox finds its sockets
HOSTS = "hosts"  # the relay folder's /etc/hosts for the sandbox
LAUNCHER = inside.__file__  # run inside as INSIDE_DIR/relay.py
CONNECT_SECS = 30.0


class UnroutableHost(ValueError):
    """A host a sandbox cannot be given: an address that is neither loopback nor a name."""


@dataclass(frozen=True)
class Route:
    """One host a confined process may reach: `host:port` outside, `address:port` inside,
    through `socket`."""

    host: str
    port: int
    address: str
    socket: Path


def inside_address(host: str, names: dict[str, str]) -> str:
    """The loopback address `host` has inside; `names` holds those given so far."""
    if host == "localhost":
        return "127.0.0.1"
    try:
        ip = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        if host not in names:
            names[host] = f"127.0.0.{len(names) + 2}"
        return names[host]
    if ip.version == 4 and ip.is_loopback:
        return str(ip)
    raise UnroutableHost(
        f"{host} is an IP address a sandbox cannot reach; give the host by name (or a loopback "
        "address)"
    )


class Relay:
    """Listens on one Unix socket per destination while open; every connection made to one is
    passed to its host. Use as a context manager around the confined process."""

    def __init__(self, destinations: Sequence[tuple[str, int]]) -> None:
        self.destinations = list(dict.fromkeys(destinations))
        self.routes: tuple[Route, ...] = ()
        self._folder: Path | None = None
        self._listeners: list[socket.socket] = []

    def __enter__(self) -> Relay:
        self._folder = Path(tempfile.mkdtemp(prefix="llmtt-net-"))
        try:
            self._open(self._folder)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _open(self, folder: Path) -> None:
        names: dict[str, str] = {}
        routes = []
        seen: set[tuple[str, int]] = set()
        for index, (host, port) in enumerate(self.destinations):
            address = inside_address(host, names)
            if (address, port) in seen:
                continue
            seen.add((address, port))
            path = folder / f"{index}.sock"
            listener = socket.socket(socket.AF_UNIX)
            self._listeners.append(listener)
            listener.bind(str(path))
            listener.listen(64)
            routes.append(Route(host, port, address, path))
            threading.Thread(target=self._serve, args=(listener, host, port), daemon=True).start()
        self.routes = tuple(routes)
        lines = ["127.0.0.1\tlocalhost"]
        lines += [f"{r.address}\t{r.host}" for r in self.routes if r.address != r.host]
        (folder / HOSTS).write_text("\n".join(dict.fromkeys(lines)) + "\n")

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        for listener in self._listeners:
            try:
                listener.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            listener.close()
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)

    def _serve(self, listener: socket.socket, host: str, port: int) -> None:
        gate = inside.Gate()
        while (conn := inside.accept(listener)) is not None:
            if not gate.enter():
                conn.close()
                continue
            try:
                threading.Thread(
                    target=self._connect, args=(conn, host, port, gate), daemon=True
                ).start()
            except Exception:  # no thread to be had: this connection only is refused
                conn.close()
                gate.leave()

    @staticmethod
    def _connect(conn: socket.socket, host: str, port: int, gate: inside.Gate) -> None:
        try:
            up = socket.create_connection((host, port), timeout=CONNECT_SECS)
        except Exception:
            conn.close()
            gate.leave()
            return
        up.settimeout(None)
        inside.pipe(conn, up, gate)
