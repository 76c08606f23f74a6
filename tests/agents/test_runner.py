"""The PTY runner with real processes: output, exit codes, timeouts, and no survivors."""

from __future__ import annotations

import io
import os
import time
from pathlib import Path

import pytest

from llmtt.agents.runner import run_in_pty

ENV = {"PATH": os.environ["PATH"], "LANG": "C.UTF-8"}


def run(script: str, tmp_path: Path, timeout: float = 10, **kw: object):  # type: ignore[no-untyped-def]
    return run_in_pty(["sh", "-c", script], cwd=tmp_path, env=ENV, timeout_secs=timeout, **kw)  # type: ignore[arg-type]


def gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state == "Z"


def test_output_exit_code_and_newlines(tmp_path: Path) -> None:
    ok = run("printf 'one\\ntwo\\n'", tmp_path)
    assert (ok.exit_code, ok.timed_out, ok.signal) == (0, False, None)
    assert ok.output == "one\ntwo\n"
    bad = run("echo oops; exit 3", tmp_path)
    assert bad.exit_code == 3 and bad.output == "oops\n"


def test_env_cwd_and_stdin_eof(tmp_path: Path) -> None:
    result = run_in_pty(
        ["sh", "-c", "echo $DEMO; pwd; cat"],
        cwd=tmp_path,
        env={**ENV, "DEMO": "xyz"},
        timeout_secs=5,
    )
    assert result.exit_code == 0 and not result.timed_out
    assert result.output.splitlines()[:2] == ["xyz", str(tmp_path)]


def test_transcript_and_callback_receive_raw_bytes(tmp_path: Path) -> None:
    transcript = io.BytesIO()
    seen: list[bytes] = []
    result = run("echo hello", tmp_path, transcript=transcript, on_output=seen.append)
    assert transcript.getvalue() == b"hello\r\n"
    assert b"".join(seen) == b"hello\r\n"
    assert result.output == "hello\n"


def test_timeout_kills_and_keeps_partial_output(tmp_path: Path) -> None:
    started = time.monotonic()
    result = run("echo started; sleep 30", tmp_path, timeout=1)
    assert time.monotonic() - started < 5
    assert result.timed_out and result.exit_code is None
    assert result.output == "started\n"


def test_term_ignoring_child_is_killed_within_five_seconds(tmp_path: Path) -> None:
    started = time.monotonic()
    result = run("trap '' TERM; echo stubborn; sleep 30", tmp_path, timeout=1)
    assert result.timed_out and time.monotonic() - started < 5


@pytest.mark.parametrize("ends", ["exits", "times out"])
def test_background_and_setsid_grandchildren_do_not_survive(tmp_path: Path, ends: str) -> None:
    tail = "exit 0" if ends == "exits" else "sleep 30"
    script = (
        "sleep 300 & echo $! > bg.pid; "
        "python3 -c 'import os,time; os.setsid(); "
        'open("sid.pid","w").write(str(os.getpid())); time.sleep(300)\' & '
        "while [ ! -s sid.pid ]; do sleep 0.05; done; echo ready; " + tail
    )
    started = time.monotonic()
    result = run(script, tmp_path, timeout=3)
    assert time.monotonic() - started < 8
    assert "ready" in result.output
    assert result.timed_out is (ends == "times out")
    for name in ("bg.pid", "sid.pid"):
        pid = int((tmp_path / name).read_text())
        deadline = time.monotonic() + 2
        while not gone(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert gone(pid), f"{name}: process {pid} survived the run"


def test_large_output_is_captured_completely(tmp_path: Path) -> None:
    result = run("head -c 5000000 /dev/zero | tr '\\0' a", tmp_path, timeout=30)
    assert result.exit_code == 0
    assert len(result.output) == 5_000_000


def test_unrelated_children_of_the_caller_are_spared(tmp_path: Path) -> None:
    import subprocess

    bystander = subprocess.Popen(["sleep", "30"])
    try:
        run("sleep 300 & exit 0", tmp_path)
        assert bystander.poll() is None
    finally:
        bystander.kill()
        bystander.wait(timeout=5)
