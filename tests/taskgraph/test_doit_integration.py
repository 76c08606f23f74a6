"""Real `doit` runs in temporary projects: incrementality, outcomes, errors, parallelism."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest
from conftest import DOIT, GIT_TOML, Project


def two_scenarios(project: Project) -> None:
    project.write("llmtt.toml", GIT_TOML)
    project.write("scenarios/fixtures/one/readme.txt", "hello\n")
    project.write(
        "scenarios/alpha.yaml",
        """\
        task:
          prompt: Commit readme.txt.
        fixture: fixtures/one
        solution:
          - git init -q .
          - git add readme.txt
          - git commit -q -m first
        evaluation:
          gates:
            - type: command_output_contains
              command: git log --format=%s
              substring: first
        """,
    )
    project.write(
        "scenarios/beta.yaml",
        """\
        task:
          prompt: Make a repository.
        solution:
          - git init -q .
        evaluation:
          gates:
            - type: file_exists
              path: .git/HEAD
        """,
    )


def test_second_run_executes_nothing_and_edits_rerun_only_their_layer(project: Project) -> None:
    two_scenarios(project)
    first = project.doit("run")
    assert first.code == 0, first.out + first.err
    assert sorted(first.executed()) == sorted(
        [
            f"{s}/oracle/r1{layer}"
            for s in ("alpha", "beta")
            for layer in (":agent", ":evaluate", "")  # the run's own task is its report
        ]
        + ["aggregate"]
    ), first.out
    metrics = project.json("alpha/oracle/r1/metrics.json")
    assert metrics["outcome"] == "pass"

    second = project.doit("run")
    assert second.code == 0
    assert second.executed() == [], second.out

    # A prompt edit re-runs that scenario's agent (and what follows), nothing of the other.
    path = project.root / "scenarios/alpha.yaml"
    path.write_text(path.read_text().replace("Commit readme.txt.", "Commit the readme."))
    third = project.doit("run")
    assert sorted(third.executed()) == [
        "aggregate",
        "alpha/oracle/r1",
        "alpha/oracle/r1:agent",
        "alpha/oracle/r1:evaluate",
    ], third.out

    # A gate edit re-evaluates without re-running the agent.
    path.write_text(path.read_text().replace("substring: first", "substring: firs"))
    fourth = project.doit("run")
    assert "alpha/oracle/r1:agent" not in fourth.executed()
    assert "alpha/oracle/r1:evaluate" in fourth.executed(), fourth.out

    # A template edit re-renders only.
    project.write("templates/evaluation.md.j2", "custom {{ metrics.outcome }}\n")
    fifth = project.doit("run")
    assert sorted(fifth.executed()) == ["alpha/oracle/r1", "beta/oracle/r1"], fifth.out
    assert (project.results() / "alpha/oracle/r1/evaluation.md").read_text() == "custom pass\n"


def test_list_status_and_info_say_what_is_pending(project: Project) -> None:
    two_scenarios(project)
    listing = project.doit("list")
    assert listing.code == 0
    names = [line.split()[0] for line in listing.out.splitlines()]
    assert names == ["aggregate", "alpha/oracle/r1", "beta/oracle/r1"]
    assert project.doit("run").code == 0
    status = project.doit("list", "--status")
    assert [line.split()[0] for line in status.out.splitlines()] == ["U"] * 3, status.out
    path = project.root / "scenarios/beta.yaml"
    path.write_text(path.read_text().replace("Make a repository.", "Make a git repository."))
    status = project.doit("list", "--status")
    lines = dict(line.split()[:2][::-1] for line in status.out.splitlines())
    assert lines["beta/oracle/r1"] == "R" and lines["alpha/oracle/r1"] == "U"
    info = project.doit("info", "beta/oracle/r1")
    assert "agent key (changed: prompt)" in info.out, info.out


def test_fail_is_a_result_and_setup_error_is_a_task_error_that_stays_pending(
    project: Project,
) -> None:
    project.write("llmtt.toml", GIT_TOML)
    project.write(
        "scenarios/fails.yaml",
        """\
        task: {prompt: Tag it.}
        solution: [git init -q .]
        evaluation:
          gates:
            - {type: command_output_contains, command: git tag --list, substring: v1}
        """,
    )
    ok = project.doit("run")
    assert ok.code == 0, ok.out + ok.err
    assert project.json("fails/oracle/r1/metrics.json")["outcome"] == "fail"
    assert project.doit("run").executed() == []

    project.write(
        "scenarios/broken.yaml",
        """\
        task: {prompt: x}
        setup:
          commands: ["echo preparing; echo 'no such thing' >&2; exit 7"]
        solution: [git init -q .]
        """,
    )
    broken = project.doit("run")
    assert broken.code != 0
    assert "setup command" in broken.err + broken.out and "exit 7" in broken.err + broken.out
    run = project.json("broken/oracle/r1/run.json")
    assert run["status"] == "error" and "no such thing" in run["error"]
    report = (project.results() / "report.md").read_text()
    assert "could not be carried out" in report
    again = project.doit("run")
    assert "broken/oracle/r1:agent" in again.executed()
    assert "fails/oracle/r1:agent" not in again.executed()
    alone = project.doit("run", "broken/oracle/r1")  # selected by name, without the aggregate
    assert alone.code != 0 and "exit 7" in alone.out + alone.err
    assert "Traceback" not in alone.out + alone.err


def test_parallel_run_and_selection_variables(project: Project) -> None:
    two_scenarios(project)
    selected = project.doit("run", "scenario=beta")
    assert selected.code == 0
    assert {t.split("/")[0] for t in selected.executed() if t != "aggregate"} == {"beta"}
    parallel = project.doit("run", "-n", "4", "repeats=3")
    assert parallel.code == 0, parallel.out + parallel.err
    for scenario in ("alpha", "beta"):
        for k in (1, 2, 3):
            assert project.json(f"{scenario}/oracle/r{k}/metrics.json")["outcome"] == "pass"
    lines = (project.results() / "results.jsonl").read_text().splitlines()
    assert len(lines) == 1 + 6 - 1  # beta r1 ran first; -n 4 ran the other five
    assert all(json.loads(line)["outcome"] == "pass" for line in lines)


def test_clean_removes_run_artifacts_and_forget_forces_a_rerun(project: Project) -> None:
    two_scenarios(project)
    assert project.doit("run").code == 0
    assert project.doit("forget", "beta/oracle/r1:agent").code == 0
    assert "beta/oracle/r1:agent" in project.doit("run").executed()
    # Naming a run forgets or cleans all its layers, and nothing of the other runs.
    forgot = project.doit("forget", "alpha/oracle/r1")
    assert forgot.code == 0 and "forgetting alpha/oracle/r1:agent" in forgot.out, forgot.out
    assert sorted(project.doit("run").executed()) == [
        "aggregate",
        "alpha/oracle/r1",
        "alpha/oracle/r1:agent",
        "alpha/oracle/r1:evaluate",
    ]
    assert project.doit("clean", "beta/oracle/r1").code == 0
    assert not (project.results() / "beta/oracle/r1").exists()
    assert (project.results() / "alpha/oracle/r1/evaluation.md").exists()
    assert project.doit("clean").code == 0
    assert not (project.results() / "alpha/oracle/r1").exists()
    rerun = project.doit("run")
    assert "alpha/oracle/r1:agent" in rerun.executed()


@pytest.mark.parametrize("selector", ["tag=nope", "scenario=nope"])
def test_empty_selection_is_an_error_not_an_empty_report(project: Project, selector: str) -> None:
    two_scenarios(project)
    result = project.doit("run", selector)
    assert result.code == 2 and result.executed() == []
    assert result.err.startswith(f"llmtt: {selector}: ") and "Traceback" not in result.err


def test_agent_timeout_keeps_partial_transcript_and_leaves_no_process(project: Project) -> None:
    # Durations unique to this test run, so that only its own processes can match below.
    bg, sid = random.sample(range(40_000, 90_000), 2)
    project.write("llmtt.toml", GIT_TOML)
    project.write(
        "scenarios/slow.yaml",
        """\
        task: {prompt: Wait.}
        run: {timeout_secs: 2}
        solution:
          - git init -q .
          - "sleep {bg} & echo $! > bg.pid; setsid sleep {sid} & echo waiting; sleep 60"
          - git status
        evaluation:
          gates:
            - {type: file_exists, path: .git/HEAD}
        """,
    )
    result = project.doit("run")
    assert result.code == 0, result.out + result.err  # a timeout is a result, not a task error
    run = project.json("slow/oracle/r1/run.json")
    assert run["status"] == "timeout" and run["timed_out"] is True
    metrics = project.json("slow/oracle/r1/metrics.json")
    assert metrics["completed"] is False and metrics["natural_stop"] is False
    assert metrics["tool_calls"] == 2  # the third command never started
    transcript = (project.results() / "slow/oracle/r1/transcript.raw.txt").read_text()
    assert "waiting" in transcript and "timed out" in transcript
    # bg.pid holds the background process's id in its sandbox, not on this machine: it is
    # looked for by its command line.
    assert (project.results() / "slow/oracle/r1/workspace/bg.pid").exists()
    survivors = subprocess.run(
        ["pgrep", "-fx", f"sleep ({bg}|{sid})"], capture_output=True, text=True, timeout=10
    )
    assert survivors.stdout.strip() == "", survivors.stdout


@pytest.mark.parametrize("workers", [[], ["-n", "2"]])
def test_broken_template_override_is_a_clear_error_without_traceback(
    project: Project, workers: list[str]
) -> None:
    """Also with workers, which compile the template ahead, as their first agent runs (and
    leave the error to the task that meets it)."""
    two_scenarios(project)
    project.write("templates/evaluation.md.j2", "line one\n{% if %}\n")
    result = project.doit("run", "scenario=beta", *workers)
    text = result.out + result.err
    assert result.code != 0
    assert "templates/evaluation.md.j2:2: template syntax error" in text, text
    assert "Traceback" not in text
    assert project.json("beta/oracle/r1/metrics.json")["outcome"] == "pass"  # nothing else lost
    project.write("templates/evaluation.md.j2", "{{ no_such_variable }}\n")
    result = project.doit("run", "scenario=beta")
    assert "'no_such_variable' is undefined" in result.out + result.err
    assert "Traceback" not in result.out + result.err


@pytest.mark.parametrize(
    ("argv", "warmed"), [(["run", "-n", "2"], True), (["run"], False), (["list"], False)]
)
def test_a_worker_warms_the_later_layers_in_a_thread_that_keeps_any_error_to_itself(
    project: Project, argv: list[str], warmed: bool
) -> None:
    """In a worker of `doit run -n N` only: the evaluate and report layers' modules imported and
    the evaluation.md template compiled beside the first agent's run, once; a broken template
    raises nothing there (its task says what is wrong)."""
    two_scenarios(project)
    project.write("templates/evaluation.md.j2", "line one\n{% if %}\n")
    code = f"""
import sys, threading
from doit.doit_cmd import DoitMain
from llmtt.taskgraph import warm
from llmtt.taskgraph.loader import LlmttLoader
from llmtt.spec.project import load_project
warm.WARM_AFTER_SECS = 0
failed, made = [], []
threading.excepthook = failed.append


class Counted(threading.Timer):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        made.append(self)


class Probe(LlmttLoader):
    def load_tasks(self, cmd, pos_args):
        super().load_tasks(cmd, pos_args)  # the session now knows doit's command and options
        threading.Timer = Counted
        project = load_project(self.session.root)
        before = "llmtt.report.render" in sys.modules
        warm.warm_evaluation(self.session, project)
        warm.warm_evaluation(self.session, project)
        for thread in made:
            thread.join()
        print(before, len(made), "llmtt.report.render" in sys.modules, len(failed))
        raise SystemExit(0)


DoitMain(Probe()).run({argv!r})
"""
    done = subprocess.run(
        [str(Path(DOIT).parent / "python"), "-c", code],
        cwd=project.root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert done.stdout.split() == ["False", str(int(warmed)), str(warmed), "0"]


@pytest.mark.parametrize("variable", ["repeats=0", "repeats=many", "tier=one"])
def test_bad_doit_variables_are_clear_errors(project: Project, variable: str) -> None:
    two_scenarios(project)
    result = project.doit("list", variable)
    assert result.code == 2
    assert "repeats= a whole number >= 1" in result.err and "Traceback" not in result.err


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["in-process", "two-workers"])
def test_ctrl_c_keeps_what_finished_and_leaves_no_process(
    project: Project, workers: list[str]
) -> None:
    wait = random.randrange(40_000, 90_000)  # unique to this test run: pgrep finds only ours
    project.write("llmtt.toml", GIT_TOML)
    project.write(
        "scenarios/a-quick.yaml",
        "task: {prompt: Init.}\nsolution: [git init -q .]\n"
        "evaluation: {gates: [{type: file_exists, path: .git/HEAD}]}\n",
    )
    project.write(
        "scenarios/b-slow.yaml",
        f"task: {{prompt: Wait.}}\nsolution: ['sleep {wait} & sleep {wait}; echo done']\n"
        "evaluation: {gates: [{type: no_transcript_errors}]}\n",
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLMTT_")}
    # A terminal's ^C reaches the whole foreground process group, doit's workers included.
    doit = subprocess.Popen(
        [DOIT, "run", *workers],
        cwd=project.root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        process_group=0,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    quick_done = project.results() / "a-quick/oracle/r1/evaluation.md"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = subprocess.run(["pgrep", "-fx", f"sleep {wait}"], capture_output=True, timeout=10)
        if found.stdout.count(b"\n") == 2 and quick_done.exists():
            break
        time.sleep(0.1)
    else:
        os.killpg(doit.pid, signal.SIGINT)  # llmtt's own clean-up ends the agent's processes
        doit.communicate(timeout=30)
        pytest.fail("the quick run did not finish or the slow one never started")
    # The quick run's success is saved by doit's parent process (its dependency file commits
    # each success at once): ^C once `doit list --status` sees it up to date.
    deadline = time.monotonic() + 60
    while "U a-quick/oracle/r1" not in project.doit("list", "--status").out:
        if time.monotonic() > deadline:
            os.killpg(doit.pid, signal.SIGINT)
            doit.communicate(timeout=30)
            pytest.fail("the quick run's success was never saved")
        time.sleep(0.1)
    os.killpg(doit.pid, signal.SIGINT)
    out, err = doit.communicate(timeout=30)
    assert doit.returncode in (-signal.SIGINT, 130), (doit.returncode, out, err)
    assert "Traceback" not in err, err
    assert "llmtt: interrupted" in err and "the rest stays pending" in err, err
    if not workers:  # in-process, the run under way is named
        assert "interrupted during b-slow/oracle/r1;" in err, err
    survivors = subprocess.run(
        ["pgrep", "-fx", f"sleep {wait}"], capture_output=True, text=True, timeout=10
    )
    assert survivors.stdout == "", survivors.stdout
    slow = project.results() / "b-slow/oracle/r1"
    assert not (slow / "run.json").exists() and not (slow / "events.jsonl").exists()
    status = project.doit("list", "--status").out
    assert "R b-slow/oracle/r1" in status and "U a-quick/oracle/r1" in status, status
