"""The sandbox's mechanism in-process: what a confined command sees and reaches, and what llmtt
says where no sandbox can be made."""

from __future__ import annotations

import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from llmtt.process.sandbox import bwrap
from llmtt.process.sandbox.bwrap import Confinement, Sandbox, View, find_bwrap, unavailable
from llmtt.process.sandbox.relay import Relay, UnroutableHost, inside_address
from llmtt.process.shell import run_shell


@pytest.fixture
def sandbox() -> Sandbox:
    found = find_bwrap()
    assert found is not None, (
        "bubblewrap is missing: run ./scripts/setup (apt-get install bubblewrap)"
    )
    python = Path(sys.base_prefix).resolve()
    return Sandbox(found, read_only=(python,) if not python.is_relative_to("/usr") else ())


@pytest.fixture
def echo_service() -> Iterator[int]:
    """A TCP service on the host's loopback that answers `pong`."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            conn.sendall(b"pong")
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    yield server.getsockname()[1]
    server.close()


def _run(confine: Confinement, command: str, cwd: Path) -> tuple[int | None, str]:
    result = run_shell(
        command, cwd=cwd, env={"PATH": "/usr/bin:/bin"}, timeout_secs=30, confine=confine
    )
    return result.exit_code, result.stdout + result.stderr


def test_a_confined_command_sees_its_folders_and_nothing_else(
    sandbox: Sandbox, tmp_path: Path
) -> None:
    work, tmp, secret = tmp_path / "work", tmp_path / "tmp", tmp_path / "secret.txt"
    work.mkdir()
    tmp.mkdir()
    secret.write_text("secret")
    confine = Confinement(sandbox, View(cwd=work, writable=(work,), tmp=tmp))
    code, out = _run(confine, f"echo made > made.txt && echo t > /tmp/t && cat {secret}", work)
    assert code != 0 and "No such file" in out
    assert (work / "made.txt").read_text() == "made\n" and (tmp / "t").exists()
    code, out = _run(confine, "ls /proc | grep -c '^[0-9]'; id -u; echo $PWD", work)
    count, _, pwd = out.split()
    assert int(count) <= 4 and pwd == str(work)  # its own processes only
    code, _ = _run(confine, f"touch {tmp_path}/outside", work)
    assert not (tmp_path / "outside").exists()  # inside, only a folder of its own /tmp


def test_no_route_reaches_nothing_and_a_relayed_one_reaches_its_host(
    sandbox: Sandbox, tmp_path: Path, echo_service: int
) -> None:
    probe = (
        "python3 -c \"import socket; s=socket.create_connection(('127.0.0.1', "
        f'{echo_service}), timeout=3); print(s.recv(9).decode())"'
    )
    closed = Confinement(sandbox, View(cwd=tmp_path, writable=(tmp_path,)))
    code, out = _run(closed, probe, tmp_path)
    assert code != 0 and "pong" not in out
    with Relay([("127.0.0.1", echo_service), ("localhost", echo_service)]) as relay:
        assert len(relay.routes) == 1  # localhost is 127.0.0.1 inside too
        opened = Confinement(sandbox, View(cwd=tmp_path, writable=(tmp_path,), routes=relay.routes))
        code, out = _run(opened, probe + " && getent hosts localhost", tmp_path)
    assert code == 0 and out.startswith("pong"), out
    code, out = _run(opened, probe, tmp_path)  # the relay is closed: nothing gets through
    assert code != 0 and "pong" not in out


def test_hosts_by_name_get_their_own_loopback_address_and_others_are_refused() -> None:
    names: dict[str, str] = {}
    assert inside_address("pypi.org", names) == "127.0.0.2"
    assert inside_address("files.pythonhosted.org", names) == "127.0.0.3"
    assert inside_address("pypi.org", names) == "127.0.0.2"
    assert inside_address("127.0.0.9", names) == "127.0.0.9"
    with pytest.raises(UnroutableHost, match="by name"):
        inside_address("10.1.2.3", names)
    with pytest.raises(UnroutableHost):
        inside_address("::1", names)


def test_what_llmtt_says_where_bubblewrap_is_missing_or_cannot_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bwrap.unavailable.cache_clear()
    said = unavailable(None)
    assert said is not None and "apt-get install bubblewrap" in said and 'mode = "none"' in said
    broken = tmp_path / "bwrap"
    broken.write_text(
        "#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n"
    )
    broken.chmod(0o755)
    said = unavailable(str(broken))
    assert said is not None
    assert "setting up uid map: Permission denied" in said and "unprivileged_userns_clone" in said
    monkeypatch.setenv("LLMTT_BWRAP", str(tmp_path / "none-here"))
    assert find_bwrap() is None
    bwrap.unavailable.cache_clear()
    said = unavailable(None)
    assert said is not None and "LLMTT_BWRAP=" in said
    bwrap.unavailable.cache_clear()


def test_the_relay_caps_its_connections_and_goes_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """A process that opens connections without end gets the cap's worth; the rest are closed
    at once, and the relay keeps serving once some end."""
    from llmtt.process.sandbox import inside

    monkeypatch.setattr(inside, "MAX_CONNECTIONS", 2)
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    held: list[socket.socket] = []
    threading.Thread(
        target=lambda: [held.append(server.accept()[0]) for _ in range(9)], daemon=True
    ).start()

    def client(path: Path) -> socket.socket:
        sock = socket.socket(socket.AF_UNIX)
        sock.connect(str(path))
        sock.settimeout(3)
        return sock

    def wait_for(count: int, secs: float = 3) -> None:
        deadline = time.monotonic() + secs
        while len(held) < count and time.monotonic() < deadline:
            time.sleep(0.01)

    with Relay([("127.0.0.1", server.getsockname()[1])]) as relay:
        path = relay.routes[0].socket
        first = client(path)
        wait_for(1)  # held[0] is the far end of `first` only when `second` comes after it
        second = client(path)
        wait_for(2)
        third = client(path)
        assert third.recv(1) == b""  # over the cap: closed by the relay
        first.close()
        held[0].close()  # both ends of the first connection are done: it is counted out
        # the relay counts the first out once its pipe has seen both ends: on a loaded machine
        # that takes a moment, so a fourth is tried until it is let through (or 5 s pass)
        deadline = time.monotonic() + 5
        while True:
            fourth = client(path)
            wait_for(3, 0.5)
            if len(held) == 3 or time.monotonic() > deadline:
                break
            fourth.close()
        assert len(held) == 3  # the first two, then the fourth once the first had ended
        second.close()
        fourth.close()
    server.close()
