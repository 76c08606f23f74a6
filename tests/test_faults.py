"""Faults injected into real `doit` invocations: kills at random moments, a second writer,
SIGTERM, an invocation killed with its processes still running. Each counts what was lost."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from conftest import DoitResult, Project

from llmtt.scripted.server import ScriptedServer

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import faults  # noqa: E402

from llmtt.process.tree import read_stat  # noqa: E402

SLOW = """\
task: {prompt: Wait.}
solution: ['sleep 30']
evaluation: {gates: [{type: file_exists, path: x}]}
"""


def _background(project: Project, *args: str) -> faults.Doit:
    return faults.Doit(project.root, *args)


def _until(predicate: object, secs: float = 30) -> None:
    deadline = time.monotonic() + secs
    while not callable(predicate) or not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"not reached within {secs} s")
        time.sleep(0.05)


def test_killed_doit_runs_redo_no_finished_run_corrupt_nothing_and_leave_no_process(
    tmp_path: Path,
) -> None:
    figures = faults.kill_loop(tmp_path / "proj", cycles=4, seed=7)
    rows = faults.kill_rows(figures)
    assert all(ok for *_, ok in rows), faults._table(rows) + "\n" + repr(figures)
    assert figures.finished_before_kills > 0  # some kills did land after finished runs


def test_the_fault_script_meets_every_target_for_concurrency_budget_and_secrets(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = faults.main(["--only", "concurrency,budget,secrets", "--out", str(tmp_path)])
    table = capsys.readouterr().out
    assert code == 0, table
    assert sum(line.endswith("| yes |") for line in table.splitlines()) == 6, table


def test_a_second_writer_is_refused_at_once_naming_the_first(project: Project) -> None:
    project.write("llmtt.toml", '[target]\nbinary = "echo"\n')
    project.write("scenarios/slow.yaml", SLOW)
    first = _background(project, "run")
    try:
        _until(lambda: (project.results() / "slow/oracle/r1/workspace").exists())
        for command in (["run"], ["forget", "slow/oracle/r1"], ["clean"]):
            started = time.monotonic()
            second = project.doit(*command, timeout=60)
            assert time.monotonic() - started < 20  # refused, not queued behind its sleep 30
            assert second.code == 2, second
            assert "Traceback" not in second.err
            assert f"is in use by `doit run` (pid {first.proc.pid}, since " in second.err
            assert second.err.count("\n") == 1, second.err  # one line
        # Reading is not writing: `doit list` answers while the run goes on.
        listed = project.doit("list", "--status", timeout=60)
        assert listed.code == 0 and "slow/oracle/r1" in listed.out
    finally:
        first.proc.send_signal(signal.SIGTERM)
        first.wait(60)
    assert not (project.results() / "slow/oracle/r1/run.json").exists()


def test_sigterm_ends_the_agent_keeps_what_finished_and_exits_as_terminated(
    project: Project,
) -> None:
    project.write("llmtt.toml", '[target]\nbinary = "echo"\n')
    project.write(
        "scenarios/a-quick.yaml",
        "task: {prompt: Go.}\nsolution: [echo hi > x]\n"
        "evaluation: {gates: [{type: file_exists, path: x}]}\n",
    )
    project.write("scenarios/b-slow.yaml", SLOW)
    doit = _background(project, "run")
    _until(lambda: (project.results() / "b-slow/oracle/r1/workspace").exists())
    _until(lambda: bool(_sleepers(project)))
    doit.proc.send_signal(signal.SIGTERM)  # to doit alone, as `kill` or a CI cancel does
    code, out = doit.wait(60)
    assert code == -signal.SIGTERM, (code, out)
    assert "llmtt: terminated (SIGTERM) during b-slow/oracle/r1;" in out, out
    assert "Traceback" not in out, out
    assert _sleepers(project) == []  # ended by llmtt itself, before doit exited
    status = project.doit("list", "--status").out
    assert "U a-quick/oracle/r1" in status and "R b-slow/oracle/r1" in status, status


def _sleepers(project: Project) -> list[str]:
    return [p for p in faults.project_processes(project.root) if p.endswith("sleep 30")]


def test_a_killed_worker_leaves_its_run_not_carried_out_and_the_others_finish(
    project: Project,
) -> None:
    """A worker of `doit run -n 2` killed by a signal (the OOM killer, an agent's `kill -9
    $PPID`): the invocation ends, non-zero; the run that worker carried out is recorded as not
    carried out, saying why, and stays pending; the run under way in the other worker finishes,
    and what the dead worker's run started (`nohup`: a terminal's hang-up leaves it) is ended.
    Unconfined: a sandbox ends with the worker that started it (bwrap --die-with-parent)."""
    project.write("llmtt.toml", '[target]\nbinary = "echo"\n\n[isolation]\nmode = "none"\n')
    project.write(
        "scenarios/a-killed.yaml",
        "task: {prompt: Wait.}\nsolution: ['nohup sleep 31.5']\n"
        "evaluation: {gates: [{type: file_exists, path: x}]}\n",
    )
    project.write(
        "scenarios/b-kept.yaml",
        "task: {prompt: Go.}\nsolution: ['sleep 2 && echo hi > x']\n"
        "evaluation: {gates: [{type: file_exists, path: x}]}\n",
    )
    doit = _background(project, "run", "-n", "2")
    _until(lambda: bool(_commands(project, "sleep 31.5") and _commands(project, "sleep 2")))
    # Killed from outside, as the OOM killer does (an agent in the sandbox cannot reach it).
    os.kill(_worker(_commands(project, "sleep 31.5")[0], doit.proc.pid), signal.SIGKILL)
    try:
        _until(lambda: (project.results() / "a-killed/oracle/r1/run.json").exists(), 10)
        # What the dead worker's run started is ended at once, not when doit ends.
        assert not _commands(project, "sleep 31.5") and doit.proc.poll() is None
        code, out = doit.wait(20)
    finally:
        doit.proc.kill()  # when it hangs
    assert code == 1, out
    cause = "the worker process carrying it out was killed by signal 9 (SIGKILL)"
    assert f"llmtt: a-killed/oracle/r1: could not be carried out: {cause}" in out, out
    assert "llmtt: b-kept/oracle/r1: PASS" in out, out
    assert "Traceback" not in out, out
    report = (project.results() / "report.md").read_text()
    assert "| a-killed/oracle/r1 | error |" in report and cause in report, report
    status = project.doit("list", "--status").out
    assert "R a-killed/oracle/r1" in status and "U b-kept/oracle/r1" in status, status


def test_a_killed_workers_paid_attempt_is_counted_in_the_reports(project: Project) -> None:
    """A paid run whose worker is killed after the model's first answer: that answer was paid
    for and is in no result. attempts.jsonl keeps the attempt as lost, with what the gateway
    recorded of it, and the reports count it in the run's row and in the total, as a lower
    bound (a request under way when a worker dies is not known)."""
    with ScriptedServer(["sleep 31.5", "echo done"]) as provider:
        project.write(
            "llmtt.toml",
            '[target]\nbinary = "echo"\n\n[isolation]\nmode = "none"\n'
            f'\n[models.priced]\nlitellm = "openai/priced"\napi_base = "{provider.url}/v1"\n'
            'api_key_env = "PRICED_KEY"\ninput_usd_per_mtok = 10.0\noutput_usd_per_mtok = 100.0\n',
        )
        project.write("scenarios/s.yaml", "task: {prompt: Wait.}\n")
        env = {**faults._env(), "LLMTT_ENABLED": "1", "PRICED_KEY": "k"}
        doit = faults.Doit(project.root, "run", "-n", "2", "agent=litellm", "model=priced", env=env)
        try:
            _until(lambda: bool(_commands(project, "sleep 31.5")), 60)
            # Once the gateway has recorded the answer (it does so once the answer is sent).
            wire = project.results() / "s/litellm-priced/r1/wire.jsonl"
            _until(lambda: wire.exists() and wire.read_text().endswith("\n"), 10)
            os.kill(_worker(_commands(project, "sleep 31.5")[0], doit.proc.pid), signal.SIGKILL)
            code, out = doit.wait(30)
        finally:
            doit.proc.kill()  # when it hangs
    assert code == 1, out
    run = project.results() / "s/litellm-priced/r1"
    lines = [json.loads(line) for line in (run / "attempts.jsonl").read_text().splitlines()]
    assert len(lines) == 1 and lines[0]["lost"] and lines[0]["status"] == "error", lines
    assert lines[0]["requests"] == 1 and lines[0]["cost_usd"] > 0, lines
    report = json.loads((project.results() / "report.json").read_text())
    (row,) = report["runs"]
    assert row["outcome"] == "error" and "killed by signal 9" in row["outcome_reason"], row
    assert row["attempts_cost_usd"] == pytest.approx(lines[0]["cost_usd"])
    assert row["attempts_cost_lower_bound"] is True
    assert report["summary"]["cost_usd"] == pytest.approx(lines[0]["cost_usd"])
    assert report["summary"]["cost_lower_bound"] is True
    # The run's panel (report.html's, loaded on demand) says so.
    panels = "".join(p.read_text() for p in (project.results() / "report-runs").glob("*.js"))
    assert "at least" in panels and "spent by attempts that could not be carried out" in panels
    # The next `doit run` carries it out again.
    assert (
        "R s/litellm-priced/r1"
        in project.doit("list", "--status", "agent=litellm", "model=priced").out
    )


def test_a_killed_forker_is_one_line_saying_to_run_doit_again(project: Project) -> None:
    """The process that forks the workers killed (the OOM killer): its workers end with it,
    and doit says so, not the exit status they ended with."""
    project.write("llmtt.toml", '[target]\nbinary = "echo"\n\n[isolation]\nmode = "none"\n')
    project.write("scenarios/slow.yaml", SLOW)
    doit = _background(project, "run", "-n", "2")
    try:
        _until(lambda: bool(_commands(project, "sleep 30")))
        forker = _worker(_commands(project, "sleep 30")[0], doit.proc.pid)
        os.kill(read_stat(forker).ppid, signal.SIGKILL)  # type: ignore[union-attr]
        code, out = doit.wait(20)
    finally:
        doit.proc.kill()  # when it hangs
    assert code != 0, out
    said = "llmtt: the process that forks the workers of `doit run` has ended;"
    assert said in out and "\n143\n" not in out, out
    assert "Traceback" not in out, out
    # No worker is left holding the project's lock (the watchdog ends on its own, soon after).
    _until(lambda: faults.project_processes(project.root) == [], 10)


def _commands(project: Project, command: str) -> list[int]:
    """The processes in the project running `command`."""
    found = (line.split(" ", 1) for line in faults.project_processes(project.root))
    return [int(pid) for pid, line in found if line == command]


def _worker(pid: int, top: int) -> int:
    """The worker of `doit run -n N` (its process `top`) that process `pid` descends from: a
    child of doit's forker (llmtt/taskgraph/forker.py), itself a child of `top`."""
    parents = [pid]
    while True:
        stat = read_stat(parents[-1])
        assert stat is not None, f"process {parents[-1]} ended before its worker was found"
        if stat.ppid == top:
            assert len(parents) >= 2, f"process {pid} is doit's forker"
            return parents[-2]
        parents.append(stat.ppid)


def test_the_processes_of_an_invocation_killed_by_sigkill_are_ended_by_its_watchdog(
    tmp_path: Path,
) -> None:
    """An invocation that cannot clean up (SIGKILL) leaves its runs' processes to the
    watchdog: they carry its mark, and end within seconds of it."""
    script = textwrap.dedent(
        """
        import os, sys, time
        from pathlib import Path
        from llmtt.process import watchdog
        from llmtt.process.shell import run_shell
        watchdog.start()
        # A command that leaves a grandchild behind, in a session of its own.
        run_shell("setsid sleep 41.5 & sleep 41.6 & echo started",
                  cwd=Path("."), env={"PATH": os.environ["PATH"]}, timeout_secs=0.5)
        print("ready", flush=True)
        time.sleep(60)
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script], cwd=tmp_path, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    # run_shell's own clean-up ended its group; start the orphans now, as a killed run would.
    # And one that cleared its environment and left the process group, in the same session.
    orphan = subprocess.Popen(
        [
            "bash",
            "-c",
            "setsid sleep 41.7 & sleep 41.8 & env -i sh -c 'set -m; sleep 41.9 & wait' & wait",
        ],
        env={"PATH": os.environ["PATH"], "LLMTT_INVOCATION": _token(proc.pid)},
        start_new_session=True,
    )
    deadline = time.monotonic() + 30
    while _count("sleep 41.[789]") < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _count("sleep 41.[789]") == 3
    proc.kill()
    proc.wait(10)
    deadline = time.monotonic() + 25  # well before the sleeps would end by themselves
    while _count("sleep 41.[5-9]") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _count("sleep 41.[5-9]") == 0
    orphan.wait(10)


def _token(pid: int) -> str:
    """The mark a process gave its runs (read from the environment of its watchdog's argv)."""
    found = subprocess.run(
        ["pgrep", "-af", f"llmtt.process.watchdog {pid} "], capture_output=True, text=True
    )
    return found.stdout.split()[-1]


def _count(pattern: str) -> int:
    found = subprocess.run(["pgrep", "-fx", pattern], capture_output=True, text=True)
    return len(found.stdout.split())


def test_a_dead_holder_whose_workers_still_end_is_waited_for_not_refused(
    project: Project,
) -> None:
    project.write("llmtt.toml", '[target]\nbinary = "echo"\n')
    project.write(
        "scenarios/a.yaml",
        "task: {prompt: Go.}\nevaluation: {gates: [{type: file_exists, path: x}]}\n",
    )
    assert project.doit("list").code == 0
    # A lock held by a process that is not the one the lock file names (a dead holder's
    # worker) is waited for while it lasts.
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, json, os, sys, time\n"
            f"fd = os.open({str(project.results() / '.llmtt-lock')!r}, os.O_RDWR | os.O_CREAT)\n"
            "fcntl.flock(fd, fcntl.LOCK_EX)\n"
            "os.write(fd, json.dumps({'pid': 999999999, 'start': 1}).encode())\n"
            "print('held', flush=True); time.sleep(2)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    started = time.monotonic()
    result = project.doit("run", timeout=60)
    assert result.code == 0, result
    assert time.monotonic() - started >= 1.0  # it waited for the lock
    holder.wait(10)


QUICK = """\
task: {prompt: Go.}
solution: [echo hi > x]
evaluation: {gates: [{type: file_exists, path: x}]}
"""

# A damaged file, what doit run then says (None: it carries on unharmed), and the fix it names.
DAMAGE = [
    (".doit.sqlite3", "is damaged (file is not a database)", "mv"),
    ("a/oracle/r1/run.json", "run.json: damaged, not JSON", "rm"),
    ("a/oracle/r1/metrics.json", "metrics.json: damaged, not JSON", "rm"),
    ("a/oracle/r1/events.jsonl", "events.jsonl:1: malformed event", "rm"),
    (".llmtt-lock", None, None),
    (".llmtt-cache/budget.json", None, None),
]


@pytest.mark.parametrize(("name", "says", "fix"), DAMAGE, ids=[d[0] for d in DAMAGE])
def test_a_damaged_file_gets_one_line_saying_what_to_do_and_does_not_wedge_the_project(
    project: Project, name: str, says: str | None, fix: str | None
) -> None:
    project.write("llmtt.toml", '[target]\nbinary = "echo"\n\n[budget]\nmax_usd = 1.0\n')
    project.write("scenarios/a.yaml", QUICK)
    assert project.doit("run").code == 0
    damaged = project.results() / name
    for extra in ("-wal", "-shm"):
        Path(f"{damaged}{extra}").unlink(missing_ok=True)
    damaged.write_text('{"format": 1, "sta\n')
    if name.endswith("events.jsonl"):  # the layer that reads it runs again
        assert project.doit("forget", "a/oracle/r1:evaluate").code == 0
    hit = project.doit("run")
    assert "Traceback" not in hit.out + hit.err, hit
    if says is None:
        assert hit.code == 0, hit
        return
    assert hit.code != 0 and says in hit.out + hit.err, hit
    if fix == "mv":
        damaged.rename(f"{damaged}.damaged")
    else:
        damaged.unlink()
    healed = project.doit("run")
    assert healed.code == 0, healed
    assert project.doit("run").executed() == []


# Run in a mount namespace of its own: a tmpfs filled to its last byte under the project, then
# what doit says. Prints a marker line before each invocation and its exit status after.
FULL_DISK = """\
set -u
mount -t tmpfs -o size=4m tmpfs "$1" || exit 90
cp -r "$2"/. "$1"/ && cd "$1"
fill() { head -c 8M /dev/zero > filler 2>/dev/null; }
"$3" run > /dev/null || exit 91
sed -i 's/Go/Go again/' scenarios/a.yaml
fill
echo "== full, a run under way"; "$3" run -n 2; echo "== exit $?"
rm filler
echo "== space freed"; "$3" run; echo "== exit $?"
rm llm-tool-test-results/.llmtt-lock
fill
echo "== full, no lock file yet"; "$3" run; echo "== exit $?"
rm -rf filler llm-tool-test-results
fill
echo "== full, a new project"; "$3" run; echo "== exit $?"
"""


def test_a_full_disk_is_one_line_naming_the_file_and_loses_nothing(project: Project) -> None:
    """At 0 bytes free: one line naming the file that could not be written (doit's dependency
    file, the lock), never a traceback, never the advice to move the dependency file aside
    (which would carry out and pay for every finished run again); with space again, only what
    was pending runs."""
    project.write("llmtt.toml", '[target]\nbinary = "echo"\n')
    project.write("scenarios/a.yaml", QUICK)
    project.write("scenarios/b.yaml", QUICK)
    disk = project.root.parent / "disk"
    disk.mkdir()
    # Root may make a mount namespace; anyone else, one inside a user namespace of their own.
    unshare = ["unshare", "--mount"] if os.geteuid() == 0 else ["unshare", "-r", "--mount"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLMTT_")}
    done = subprocess.run(
        [*unshare, "bash", "-c", FULL_DISK, "-", str(disk), str(project.root), faults.DOIT],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=120,
        env=env,
    )
    out = done.stdout
    parts = [part.split("\n", 1) for part in out.split("== ")[1:]]
    steps = dict(parts[0::2])
    codes = [int(title.removeprefix("exit ")) for title, _ in parts[1::2]]
    assert done.returncode == 0 and len(parts) == 8, out  # the mount, and every step, went
    assert codes == [2, 0, 2, 2], out
    results = disk / "llm-tool-test-results"
    # Which file meets the full disk first, the lock or doit's file (whose opening maps a
    # shared-memory file), depends on the bytes left: either is named, in one line.
    for step, files in [
        ("full, a run under way", [".doit.sqlite3"]),
        ("full, no lock file yet", [".llmtt-lock", ".doit.sqlite3"]),
        ("full, a new project", [".doit.sqlite3"]),
    ]:
        lines = [
            f"llmtt: no space left on device writing {results / file}: free some space and "
            "run again"
            for file in files
        ]
        assert any(line in steps[step] for line in lines), out
        assert "Traceback" not in steps[step] and "damaged" not in steps[step], out
        assert " mv " not in steps[step], out
    freed = DoitResult(0, steps["space freed"], "").executed()
    assert freed == ["a/oracle/r1:agent", "a/oracle/r1:evaluate", "a/oracle/r1", "aggregate"], out
