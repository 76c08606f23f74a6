"""Shell commands with timeouts, and per-run isolation of the workspace and environment."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from llmtt.errors import LlmttError
from llmtt.events import EventWriter, read_events
from llmtt.execution.workspace import prepare, run_setup
from llmtt.process.shell import MAX_CAPTURE, REFUSED, run_shell

ENV = {"PATH": os.environ["PATH"]}


@pytest.fixture(params=["pidfd", "polling"])
def wait_by(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """A command's end is waited for through a pidfd, or by subprocess's own look where the
    system has none."""
    if request.param == "polling":

        def missing(pid: int, flags: int = 0) -> int:
            raise OSError(38, "Function not implemented")

        monkeypatch.setattr(os, "pidfd_open", missing)
    return str(request.param)


def test_run_shell_captures_and_times_out(tmp_path: Path, wait_by: str) -> None:
    ok = run_shell("echo out; echo err >&2; exit 2", cwd=tmp_path, env=ENV, timeout_secs=5)
    assert (ok.exit_code, ok.stdout, ok.stderr, ok.timed_out) == (2, "out\n", "err\n", False)
    started = time.monotonic()
    slow = run_shell("sleep 30", cwd=tmp_path, env=ENV, timeout_secs=0.5)
    assert slow.timed_out and slow.exit_code is None and time.monotonic() - started < 15
    quick = [run_shell("true", cwd=tmp_path, env=ENV, timeout_secs=5) for _ in range(20)]
    assert all(q.exit_code == 0 and not q.timed_out for q in quick)
    assert slow.describe() == "timed out after 0s" or slow.describe().startswith("timed out")


def test_run_shell_has_no_terminal_and_reports_a_signal_death(tmp_path: Path, wait_by: str) -> None:
    started = time.monotonic()
    closed = run_shell("cat; tty", cwd=tmp_path, env=ENV, timeout_secs=30)
    assert (closed.exit_code, closed.stdout) == (1, "not a tty\n")
    assert time.monotonic() - started < 15  # cat read EOF at once, not waited to its limit
    killed = run_shell("kill -KILL $$", cwd=tmp_path, env=ENV, timeout_secs=5)
    assert (killed.exit_code, killed.signal, killed.shell_exit_code) == (None, 9, 137)
    assert killed.describe() == "killed by signal 9" and not killed.ok
    slow = run_shell("sleep 30", cwd=tmp_path, env=ENV, timeout_secs=0.2)
    assert (slow.signal, slow.shell_exit_code) == (None, None)  # stopped by us: unknown


def test_a_command_with_a_nul_byte_is_refused_with_a_result_not_a_traceback(tmp_path: Path) -> None:
    """Python raises "embedded null byte" at such a command; a model's tool call, a gate or a
    setup command holding one gets an exit code and a line saying why instead."""
    (tmp_path / "b").write_text("kept")
    command = "echo a\0; rm b"
    apart = run_shell(command, cwd=tmp_path, env=ENV, timeout_secs=5)
    said = "llmtt: not run: the command contains a NUL byte (character 7), which no command line can hold\n"
    assert (apart.exit_code, apart.stdout, apart.stderr) == (REFUSED, "", said)
    assert apart.describe() == "exit 126" and not apart.ok and apart.command == command
    merged = run_shell(command, cwd=tmp_path, env=ENV, timeout_secs=5, combined=True)
    assert (merged.exit_code, merged.stdout, merged.stderr) == (REFUSED, said, "")
    assert (tmp_path / "b").exists()  # nothing of it ran


def test_run_shell_combines_output_in_order_and_decodes_any_bytes(tmp_path: Path) -> None:
    command = "echo 1; echo 2 >&2; echo 3; printf 'a\\377b' >&2"
    merged = run_shell(command, cwd=tmp_path, env=ENV, timeout_secs=5, combined=True)
    assert (merged.stdout, merged.stderr) == ("1\n2\n3\na\ufffdb", "")
    apart = run_shell(command, cwd=tmp_path, env=ENV, timeout_secs=5)
    assert (apart.stdout, apart.stderr) == ("1\n3\n", "2\na\ufffdb")


def test_run_shell_cuts_large_output_at_its_head_or_keeps_head_and_tail(tmp_path: Path) -> None:
    command = "echo FIRST; head -c 3000000 /dev/zero | tr '\\0' x; echo; echo LAST"
    head = run_shell(command, cwd=tmp_path, env=ENV, timeout_secs=10)
    assert head.stdout.startswith("FIRST\nxxx") and "LAST" not in head.stdout
    assert head.stdout.endswith(f"[... output truncated at {MAX_CAPTURE} bytes ...]\n")
    both = run_shell(command, cwd=tmp_path, env=ENV, timeout_secs=10, keep_tail=True)
    assert both.stdout.startswith("FIRST\nxxx") and both.stdout.endswith("xxx\nLAST\n")
    assert "[... 2000012 bytes of output cut ...]" in both.stdout
    assert len(both.stdout) < MAX_CAPTURE + 100


def test_background_process_does_not_hold_the_command(tmp_path: Path) -> None:
    started = time.monotonic()
    result = run_shell(
        "sleep 60 & echo $! > pid; echo done", cwd=tmp_path, env=ENV, timeout_secs=30
    )
    assert result.ok and time.monotonic() - started < 15  # not held to its limit by the sleep
    pid = int((tmp_path / "pid").read_text())
    # The kill is sent before run_shell returns; its delivery is the kernel's, so wait for it.
    deadline = time.monotonic() + 10
    while not _ended(pid):
        assert time.monotonic() < deadline, f"the background sleep (pid {pid}) is still running"
        time.sleep(0.02)


def _ended(pid: int) -> bool:
    """Whether `pid` is gone or a zombie (this container's init may never reap it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def test_prepare_makes_a_fresh_isolated_workspace(tmp_path: Path) -> None:
    fixture = tmp_path / "fixture"
    (fixture / "sub").mkdir(parents=True)
    (fixture / "sub" / "a.txt").write_text("a")
    guide = tmp_path / "guide.md"
    guide.write_text("guidance")
    run_dir = tmp_path / "run"
    ws = prepare(run_dir, fixture, {"AGENTS.md": guide})
    (ws.workspace / "stale.txt").write_text("left by an earlier attempt")
    ws = prepare(run_dir, fixture, {"AGENTS.md": guide})
    assert sorted(p.name for p in ws.workspace.iterdir()) == ["AGENTS.md", "sub"]
    env = ws.env({"EXTRA": "1"})
    assert env["HOME"] == str(run_dir / "home") and env["EXTRA"] == "1"
    assert env["XDG_CONFIG_HOME"].startswith(str(run_dir / "home"))
    assert "OPENAI_API_KEY" not in env and "USER" not in env


def test_a_scenarios_path_puts_workspace_folders_first_on_path(tmp_path: Path) -> None:
    """`path` (a scripting task's mock tools): first on PATH for every process of the run, the
    login shell's profile too (codex's `bash -lc` has /etc/profile reset PATH)."""
    from llmtt.process.shell import tool_path

    ws = prepare(tmp_path / "run", None, {}, path=[".bashkit/bin", "bin"])
    first = f"{ws.workspace / '.bashkit/bin'}{os.pathsep}{ws.workspace / 'bin'}{os.pathsep}"
    assert ws.env()["PATH"] == first + tool_path()
    assert (ws.home / ".profile").read_text() == f'export PATH="{first + tool_path()}"\n'
    assert prepare(tmp_path / "plain", None, {}).env()["PATH"] == tool_path()


def test_setup_stops_at_the_first_failing_command(tmp_path: Path) -> None:
    failed = run_setup(["touch one", "exit 5", "touch two"], cwd=tmp_path, env=ENV, timeout_secs=5)
    assert failed is not None and failed.command == "exit 5" and failed.exit_code == 5
    assert (tmp_path / "one").exists() and not (tmp_path / "two").exists()
    assert run_setup(["true"], cwd=tmp_path, env=ENV, timeout_secs=5) is None


def test_events_round_trip_and_malformed_lines_are_named(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    with open(path, "w") as handle:
        writer = EventWriter(handle)
        writer.emit("tool_call", id="1", tool="bash", command="git status")
        writer.emit("tool_result", id="1", output="", exit_code=None)
        writer.emit("complete", exit_code=0, duration_secs=1.0, timed_out=False, natural_stop=True)
    events = read_events(path)
    assert [e.event for e in events] == ["tool_call", "tool_result", "complete"]
    with open(path, "a") as handle:
        handle.write('{"ts": 1, "event": "tool_call"}\n')
    with pytest.raises(LlmttError, match=r"events.jsonl:4: malformed event"):
        read_events(path)


@pytest.mark.parametrize("timeout", [float("inf"), 3e6])
def test_a_timeout_longer_than_a_poll_can_wait_still_waits(
    tmp_path: Path, wait_by: str, timeout: float
) -> None:
    done = run_shell("sleep 0.1; echo done", cwd=tmp_path, env=ENV, timeout_secs=timeout)
    assert (done.exit_code, done.stdout, done.timed_out) == (0, "done\n", False)
