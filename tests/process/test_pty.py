"""The PTY runner with real processes: output, exit codes, timeouts, and no survivors."""

from __future__ import annotations

import contextlib
import io
import math
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from llmtt.events import MAX_TEXT
from llmtt.process import pty, spawn
from llmtt.process.pty import ProcessResult, run_in_pty

ENV = {"PATH": os.environ["PATH"], "LANG": "C.UTF-8"}

# A descendant to leave behind. It ignores SIGHUP, which the kernel sends the terminal's
# process group when the session leader exits, so only the runner can end it. It writes its
# pid atomically, then prints a line and holds the PTY open.
HELPER = textwrap.dedent(
    """
    import os, signal, sys, time
    mode, pidfile = sys.argv[1], sys.argv[2]
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    if mode == "daemon" and os.fork():
        os._exit(0)
    if mode in ("setsid", "daemon", "stopped"):
        os.setsid()
    if mode == "stubborn":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    with open(pidfile + ".tmp", "w") as handle:
        handle.write(str(os.getpid()))
    os.rename(pidfile + ".tmp", pidfile)
    print(mode, "started", flush=True)
    if mode == "stopped":
        os.kill(os.getpid(), signal.SIGSTOP)
    time.sleep(300)
    """
)


@pytest.fixture(autouse=True, params=["spawn", "fork"])
def how(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every test with the child spawned (glibc's posix_spawn), and again forked by
    ptyprocess, the runner's way where posix_spawn cannot set the working directory."""
    if request.param == "spawn":
        assert spawn.available(), "glibc >= 2.34 is expected on the machines llmtt is tested on"
    else:
        monkeypatch.setattr(spawn, "available", lambda: False)
    return str(request.param)


def run(script: str, tmp_path: Path, timeout: float = 10, **kw: object) -> ProcessResult:
    return run_in_pty(["sh", "-c", script], cwd=tmp_path, env=ENV, timeout_secs=timeout, **kw)  # type: ignore[arg-type]


def leave_behind(tmp_path: Path, mode: str, name: str = "left.pid") -> str:
    """Shell that starts HELPER in the background and waits until its pid file exists."""
    (tmp_path / "helper.py").write_text(HELPER)
    return (
        f"'{sys.executable}' helper.py {mode} {name} & "
        f"while [ ! -e {name} ]; do sleep 0.01; done; echo ready; "
    )


def alive(pid: int) -> bool:
    """Whether `pid` exists at all; a zombie counts, since the runner must reap what it kills."""
    return Path(f"/proc/{pid}").exists()


def reap(pid: int) -> None:
    """Wait up to 1 s for `pid`, if it is (or becomes) a child of this process, and reap it."""
    deadline = time.monotonic() + 1
    while time.monotonic() < deadline:
        try:
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return
        except ChildProcessError:
            if not alive(pid):
                return
        time.sleep(0.01)


@contextlib.contextmanager
def cleanup(*pidfiles: Path) -> Iterator[None]:
    """Kill and reap whatever a failing test leaves, so one failure does not leak sleepers."""
    try:
        yield
    finally:
        for path in pidfiles:
            if path.exists():
                pid = int(path.read_text())
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                    reap(pid)


def test_output_exit_codes_and_newlines(tmp_path: Path) -> None:
    ok = run("printf 'one\\ntwo\\n'", tmp_path)
    assert (ok.exit_code, ok.signal, ok.timed_out) == (0, None, False)
    assert ok.output == "one\ntwo\n"
    bad = run("echo hi; exit 3", tmp_path)
    assert (bad.exit_code, bad.output) == (3, "hi\n")


def test_death_by_signal_has_no_exit_code(tmp_path: Path) -> None:
    result = run("echo going; kill -KILL $$", tmp_path)
    assert (result.exit_code, result.signal, result.timed_out) == (None, 9, False)
    assert result.output == "going\n"


def test_env_and_cwd_are_honoured(tmp_path: Path) -> None:
    result = run_in_pty(
        ["sh", "-c", "echo $DEMO; pwd; echo ${HOME:-unset}"],
        cwd=tmp_path,
        env={**ENV, "DEMO": "xyz"},
        timeout_secs=math.inf,
    )
    assert result.output.splitlines() == ["xyz", str(tmp_path), "unset"]


def test_command_is_found_in_the_env_path_and_cwd(tmp_path: Path) -> None:
    tools = tmp_path / "tools"
    tools.mkdir()
    for path in (tools / "only-here", tmp_path / "local.sh"):
        path.write_text("#!/bin/sh\necho from $0\n")
        path.chmod(0o755)
    env = {**ENV, "PATH": f"{tools}:{ENV['PATH']}"}
    found = run_in_pty(["only-here"], cwd=tmp_path, env=env, timeout_secs=5)
    assert found.output == f"from {tools / 'only-here'}\n"
    # a relative PATH entry counts from the child's working directory, as in a shell
    relative = run_in_pty(["only-here"], cwd=tmp_path, env={**env, "PATH": "tools"}, timeout_secs=5)
    assert relative.output == found.output
    local = run_in_pty(["./local.sh"], cwd=tmp_path, env=ENV, timeout_secs=5)
    assert local.exit_code == 0 and local.output.startswith("from ")


def test_missing_command_or_directory_raises(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no-such-tool"):
        run_in_pty(["no-such-tool"], cwd=tmp_path, env=ENV, timeout_secs=5)
    with pytest.raises(FileNotFoundError, match="nowhere"):
        run_in_pty(["true"], cwd=tmp_path / "nowhere", env=ENV, timeout_secs=5)


def test_stdin_gets_eof_at_once(tmp_path: Path) -> None:
    started = time.monotonic()
    result = run("cat; echo after", tmp_path, timeout=30)
    assert time.monotonic() - started < 15  # not waited for to its limit
    assert (result.exit_code, result.timed_out, result.output) == (0, False, "after\n")


@pytest.mark.parametrize("data", [b"abc\ndef\n", b"abc\ndef"])
def test_stdin_data_is_typed_then_eof(tmp_path: Path, data: bytes) -> None:
    result = run("cat; echo; echo after", tmp_path, timeout=10, stdin_data=data)
    assert not result.timed_out
    assert result.output.split() == ["abc", "def", "after"]


def test_transcript_and_callback_receive_raw_bytes(tmp_path: Path) -> None:
    transcript = io.BytesIO()
    seen: list[bytes] = []
    result = run("echo hello; echo ünï", tmp_path, transcript=transcript, on_output=seen.append)
    assert transcript.getvalue() == "hello\r\nünï\r\n".encode()
    assert b"".join(seen) == transcript.getvalue()
    assert result.output == "hello\nünï\n"


def test_timeout_kills_and_keeps_partial_output(tmp_path: Path) -> None:
    started = time.monotonic()
    result = run("echo started; sleep 30", tmp_path, timeout=1)
    assert time.monotonic() - started < 15  # killed at its limit, not run to its end (30 s)
    assert result.timed_out and result.exit_code is None
    assert result.output == "started\n"


def test_term_ignoring_child_is_killed_after_the_grace(tmp_path: Path) -> None:
    started = time.monotonic()
    result = run("trap '' TERM; echo stubborn; sleep 30", tmp_path, timeout=1)
    assert time.monotonic() - started < 15  # KILLed 1 s after TERM, not run to its end (30 s)
    assert result.timed_out and (result.exit_code, result.signal) == (None, signal.SIGKILL)
    assert result.output == "stubborn\n"


def test_a_process_left_is_waited_for_only_until_it_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What outlives the command by a moment (as bubblewrap's own process does, while its
    namespaces go) is waited for until it ends, not for a fixed pause: made 5 s here, the
    pause would hold the run that long."""
    try:
        os.close(os.pidfd_open(os.getpid()))
    except (AttributeError, OSError):  # a kernel feature, not an install step
        pytest.skip("no pidfd here (Linux < 5.3): the runner keeps its fixed pause")
    monkeypatch.setattr(pty, "POLL_SECS", 5.0)
    # Deaf to TERM and to the terminal's HUP, off the terminal, it ends on its own 0.3 s after
    # the command, which waits until it is ready.
    left = (
        "import signal, time; signal.signal(signal.SIGHUP, signal.SIG_IGN); "
        "signal.signal(signal.SIGTERM, signal.SIG_IGN); open('ready', 'w').close(); "
        "time.sleep(0.3)"
    )
    script = (
        f"'{sys.executable}' -c \"{left}\" </dev/null >/dev/null 2>&1 & "
        "while [ ! -e ready ]; do sleep 0.01; done; exit 0"
    )
    started = time.monotonic()
    result = run(script, tmp_path)
    assert time.monotonic() - started < 3
    assert result.exit_code == 0 and not result.timed_out


def test_plain_background_job_is_killed_and_reaped(tmp_path: Path) -> None:
    with cleanup(tmp_path / "bg.pid"):
        started = time.monotonic()
        result = run("sleep 300 & echo $! > bg.pid; echo bg; exit 0", tmp_path, timeout=30)
        assert time.monotonic() - started < 15  # not held to its limit by the job
        assert (result.exit_code, result.output) == (0, "bg\n")
        assert not alive(int((tmp_path / "bg.pid").read_text()))


@pytest.mark.parametrize("mode", ["group", "setsid", "daemon", "stubborn", "stopped"])
@pytest.mark.parametrize("ends", ["exits", "times out"])
def test_left_behind_descendants_do_not_survive(tmp_path: Path, mode: str, ends: str) -> None:
    """group: same process group; setsid: own session; daemon: double fork; stubborn: ignores
    TERM (KILLed after the grace); stopped: SIGSTOPped (TERM acts at once only if CONTinued)."""
    script = leave_behind(tmp_path, mode) + ("exit 0" if ends == "exits" else "sleep 30")
    grace = 3.0 if mode == "stopped" else 1.0
    with cleanup(tmp_path / "left.pid"):
        started = time.monotonic()
        limit = 1.5 if ends == "times out" else 30
        result = run(script, tmp_path, timeout=limit, grace_secs=grace)
        elapsed = time.monotonic() - started
        assert f"{mode} started" in result.output and "ready" in result.output
        if ends == "exits":
            # the descendant holds the PTY open: draining must not wait for it (to the limit)
            assert (result.exit_code, result.timed_out) == (0, False)
            assert elapsed < 15
        else:
            assert result.timed_out and result.exit_code is None
            assert elapsed < 1.5 + grace + 12  # ended, not left to its 300 s
        assert not alive(int((tmp_path / "left.pid").read_text()))


@pytest.mark.parametrize("mode", ["setsid", "daemon"])
def test_without_children_lists_a_scan_of_proc_finds_them(
    tmp_path: Path, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the kernel keeps no /proc/PID/task/TID/children (no CONFIG_PROC_CHILDREN), the
    run's processes are found by a scan of every process, and still ended."""
    import llmtt.process.tree as tree

    monkeypatch.setattr(tree, "children", lambda pid: None)
    with cleanup(tmp_path / "left.pid"):
        result = run(leave_behind(tmp_path, mode) + "exit 0", tmp_path, timeout=1.5)
        assert (result.exit_code, result.timed_out) == (0, False)
        assert not alive(int((tmp_path / "left.pid").read_text()))


def test_callback_failure_still_ends_the_run(tmp_path: Path) -> None:
    def explode(data: bytes) -> None:
        if b"ready" in data:
            raise RuntimeError("callback failed")

    with cleanup(tmp_path / "left.pid"):
        with pytest.raises(RuntimeError, match="callback failed"):
            run(leave_behind(tmp_path, "setsid") + "sleep 30", tmp_path, on_output=explode)
        assert not alive(int((tmp_path / "left.pid").read_text()))


def test_unrelated_children_of_the_caller_are_spared(tmp_path: Path) -> None:
    """Children from before the run, their children, and one started during it all live on."""
    own_session = subprocess.Popen(["sleep", "30"])
    new_session = subprocess.Popen(
        ["sh", "-c", "sleep 30 & echo $! > by.pid; wait"], cwd=tmp_path, start_new_session=True
    )
    during: list[subprocess.Popen[bytes]] = []

    def start_one(data: bytes) -> None:
        if not during:
            during.append(subprocess.Popen(["sleep", "30"]))

    try:
        with cleanup(tmp_path / "left.pid"):
            while not (tmp_path / "by.pid").exists():
                time.sleep(0.01)
            run(leave_behind(tmp_path, "setsid") + "exit 0", tmp_path, on_output=start_one)
            assert not alive(int((tmp_path / "left.pid").read_text()))
        assert own_session.poll() is None and new_session.poll() is None
        assert during and during[0].poll() is None
        assert alive(int((tmp_path / "by.pid").read_text()))
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(new_session.pid, signal.SIGKILL)
        for proc in [own_session, new_session, *during]:
            proc.kill()
            proc.wait(timeout=5)
        # new_session's sleep is re-parented to this process (a subreaper now) when it dies
        reap(int((tmp_path / "by.pid").read_text()))


def test_a_forked_worker_catches_setsid_descendants_too(tmp_path: Path) -> None:
    """doit -n forks workers; the subreaper attribute is not inherited, each must set it."""
    run("true", tmp_path)  # this process becomes a subreaper before forking
    with cleanup(tmp_path / "left.pid"):
        worker = os.fork()
        if worker == 0:  # pragma: no cover - the worker reports through its exit status
            code = 3
            try:
                run(leave_behind(tmp_path, "setsid") + "exit 0", tmp_path)
                code = 1 if alive(int((tmp_path / "left.pid").read_text())) else 0
            finally:
                os._exit(code)
        deadline = time.monotonic() + 20
        while (status := os.waitpid(worker, os.WNOHANG))[0] == 0:
            if time.monotonic() > deadline:
                os.kill(worker, signal.SIGKILL)
            time.sleep(0.02)
        assert os.waitstatus_to_exitcode(status[1]) == 0, "the worker's descendant survived"


def test_large_output_reaches_the_transcript_whole_and_the_result_cut(tmp_path: Path) -> None:
    """All of it is in the transcript; the result keeps the head and the tail (where a failing
    command says why) around a marker, in bounded memory."""
    transcript = io.BytesIO()
    started = time.monotonic()
    result = run(
        "head -c 5000000 /dev/zero | tr '\\0' a; echo; echo the end",
        tmp_path,
        timeout=60,
        transcript=transcript,
    )
    assert time.monotonic() - started < 30  # a fraction of a second here, not its limit
    assert result.exit_code == 0
    assert transcript.getvalue() == b"a" * 5_000_000 + b"\r\nthe end\r\n"
    half = MAX_TEXT // 2
    assert result.output.startswith("a" * half + "\n[... ")
    cut = 5_000_000 + len("\r\nthe end\r\n") - 2 * half
    assert f"\n[... {cut} bytes of output cut by llmtt ...]\n" in result.output
    assert result.output.endswith("a\nthe end\n")
    assert len(result.output) < MAX_TEXT + 100


def test_stop_callback_ends_the_run_early(tmp_path: Path) -> None:
    seen: list[bytes] = []
    started = time.monotonic()
    result = run_in_pty(
        ["sh", "-c", "for i in $(seq 40); do echo tick; sleep 0.5; done"],
        cwd=tmp_path,
        env=ENV,
        timeout_secs=60,
        on_output=seen.append,
        stop=lambda: b"".join(seen).count(b"tick") >= 2,
    )
    assert result.stopped and not result.timed_out and result.exit_code is None
    assert time.monotonic() - started < 10  # about 0.5 s; run to its end it takes 20 s
    assert result.output.count("tick") in (2, 3)


def test_the_child_starts_with_no_signal_ignored_that_python_ignores(tmp_path: Path) -> None:
    """As from a terminal: a pipe's writer dies quietly when its reader is gone, not with
    "Broken pipe" (Python ignores SIGPIPE and SIGXFSZ, and exec keeps what is ignored)."""
    result = run("grep SigIgn /proc/self/status; yes | head -1", tmp_path)
    ignored = int(result.output.splitlines()[0].split()[1], 16)
    assert not ignored & (1 << (signal.SIGPIPE - 1) | 1 << (signal.SIGXFSZ - 1)), result.output
    assert result.output.splitlines()[1:] == ["y"], result.output


def test_the_child_has_a_terminal_as_from_a_login(tmp_path: Path) -> None:
    """A session of its own whose controlling terminal is the PTY, of DIMENSIONS, echo off;
    none of our descriptors but 0, 1 and 2, even one made inheritable."""
    read_end, write_end = os.pipe()
    os.set_inheritable(write_end, True)
    try:
        result = run(
            # ls's own descriptors: ours, if any came through, and the folder it reads (3)
            "tty; stty size; stty -a | grep -o -- ' -echo '; ls /proc/self/fd;"
            " ps -o sid=,tty= -p $$",
            tmp_path,
        )
    finally:
        os.close(read_end)
        os.close(write_end)
    lines = result.output.splitlines()
    assert lines[0].startswith("/dev/pts/"), result.output
    assert lines[1:3] == ["50 220", " -echo "], result.output
    assert lines[3].split() == ["0", "1", "2", "3"], result.output
    sid, tty = lines[4].split()
    assert tty == lines[0].removeprefix("/dev/") and int(sid) > 0, result.output


def test_a_command_that_cannot_start_raises_what_the_system_said(tmp_path: Path) -> None:
    binary = tmp_path / "garbage"
    binary.write_bytes(b"\x00\x01 not a program")
    binary.chmod(0o755)
    with pytest.raises(OSError, match="[Ee]xec format error"):
        run_in_pty([str(binary)], cwd=tmp_path, env=ENV, timeout_secs=5)
