"""spawn.Child on its own: what the runner leaves to its close() (the rest of the spawned
child's behaviour is proven through the runner, in test_runner.py)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from llmtt.process import spawn

ENV = {"PATH": os.environ["PATH"], "LANG": "C.UTF-8"}


def test_a_spawned_child_still_alive_at_close_is_killed_and_reaped(tmp_path: Path) -> None:
    # It ignores the hangup that closing its terminal sends: only the KILL ends it.
    script = "trap '' HUP; echo ready; exec sleep 30"
    child = spawn.spawn("/bin/sh", ["sh", "-c", script], ENV, tmp_path, (50, 220), ())
    assert os.read(child.fd, 100).strip() == b"ready"
    child.close()
    assert not child.isalive() and child.signalstatus == signal.SIGKILL
    assert not Path(f"/proc/{child.pid}").exists()  # reaped, not a zombie


def test_where_a_terminal_cannot_be_opened_by_its_name_the_runner_forks_instead(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sandbox that gives openpty() but hides /dev/pts: every run would fail in the spawned
    child's open; the runner takes ptyprocess's fork, which needs no name, and the run works."""
    from llmtt.process.pty import run_in_pty

    assert spawn.available()
    monkeypatch.setattr(os, "ttyname", lambda fd: str(tmp_path / "no-such-pts"))
    monkeypatch.setattr(spawn, "_BY_NAME", [])
    try:
        assert not spawn.available()
        done = run_in_pty(
            ["/bin/sh", "-c", "tty >/dev/null && echo works"],
            cwd=tmp_path,
            env=ENV,
            timeout_secs=20,
        )
    finally:
        monkeypatch.undo()
    assert done.exit_code == 0, done.output
    assert "works" in done.output
    assert spawn.available()


def test_a_look_at_the_terminal_cut_short_by_the_descriptor_limit_is_made_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(spawn, "_BY_NAME", [])
    real_open = os.open

    def full(path: str, flags: int, mode: int = 0o777) -> int:
        raise OSError(24, "Too many open files")

    monkeypatch.setattr(os, "open", full)
    assert spawn.available()  # not known: the usual way
    assert spawn._BY_NAME == []  # and not remembered
    monkeypatch.setattr(os, "open", real_open)
    assert spawn.available() and spawn._BY_NAME == [True]


def test_an_argument_with_a_nul_byte_is_refused_not_run_cut_short(tmp_path: Path) -> None:
    """A C string ends at its first NUL: `echo a\\0; touch b` would have run as `echo a`."""
    with pytest.raises(ValueError, match="embedded null byte"):
        spawn.spawn("/bin/sh", ["sh", "-c", "echo a\0; touch b"], ENV, tmp_path, (50, 220), ())
    with pytest.raises(ValueError, match="embedded null byte"):
        spawn.spawn("/bin/sh", ["sh", "-c", "true"], {"X": "a\0b"}, tmp_path, (50, 220), ())
