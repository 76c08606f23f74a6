"""ATIF trajectories: a run exported (checked against the fields ATIF-v1.7 requires), imported
as a run of another agent, and graded by `doit run` to the same metrics and outcome, without
starting an agent; a file that is no trajectory is refused with what is wrong."""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

import pytest
from conftest import GIT_TOML, Project, cli_project

from llmtt.commands.main import main

SCENARIO = """\
task: {prompt: Make a repository and commit nothing.}
solution: [git init -q ., git comit, git status --short, 'echo token=$MY_TOKEN']
evaluation:
  gates:
    - {type: file_exists, path: .git/HEAD}
    - {type: command_succeeds, command: git rev-parse --git-dir}
"""
# What the interaction metrics of a replayed run must share with the run it came from.
SAME = (
    "total_commands",
    "unique_commands",
    "error_count",
    "unknown_exit_count",
    "retry_count",
    "retries_after_failure",
    "help_invocations",
    "first_try_success_rate",
    "error_rate",
    "completed",
    "by_subcommand",
    "turns",
    "tool_calls",
    "tool_calls_ok",
    "tool_calls_error",
    "input_tokens",
    "output_tokens",
    "cost_usd",
    "duration_secs",
    "natural_stop",
)


# A trajectory as another harness writes it (Harbor's terminus-2 agent): no llmtt extras.
HARBOR = {
    "schema_version": "ATIF-v1.6",
    "session_id": "trial-1",
    "agent": {"name": "terminus-2", "version": "2.0.0", "model_name": "some-model"},
    "steps": [
        {"step_id": 1, "source": "user", "message": "Make a repository."},
        {
            "step_id": 2,
            "source": "agent",
            "message": [{"type": "text", "text": "Let me start."}],
            "tool_calls": [
                {
                    "tool_call_id": "t1",
                    "function_name": "bash",
                    "arguments": {"command": "git init"},
                }
            ],
            "observation": {"results": [{"source_call_id": "t1", "content": "Initialized"}]},
            "metrics": {
                "prompt_tokens": 100,
                "completion_tokens": 10,
                "cached_tokens": 40,
                "cost_usd": 0.01,
            },
        },
        {
            "step_id": 3,
            "source": "agent",
            "message": "",
            "tool_calls": [
                {"tool_call_id": "t2", "function_name": "bash", "arguments": {"command": "git log"}}
            ],
            "observation": {"results": [{"source_call_id": "t2", "content": "fatal: no"}]},
            "metrics": {
                "prompt_tokens": 100,
                "completion_tokens": 10,
                "cached_tokens": 40,
                "cost_usd": 0.01,
            },
        },
    ],
}


def required_fields(trajectory: dict) -> None:
    """The fields ATIF-v1.7 requires (Harbor's src/harbor/models/trajectories/), checked here
    apart from llmtt's own models."""
    assert trajectory["schema_version"] == "ATIF-v1.7"
    assert isinstance(trajectory["agent"]["name"], str)
    assert isinstance(trajectory["agent"]["version"], str)
    assert trajectory["steps"]
    for number, step in enumerate(trajectory["steps"], start=1):
        assert step["step_id"] == number
        assert step["source"] in ("system", "user", "agent")
        assert isinstance(step["message"], str)
        calls = {c["tool_call_id"] for c in step.get("tool_calls", [])}
        for call in step.get("tool_calls", []):
            assert isinstance(call["function_name"], str)
            assert isinstance(call["arguments"], dict)
        for result in step.get("observation", {"results": []})["results"]:
            assert result.get("source_call_id") in calls
        if step["source"] != "agent":
            assert not {"tool_calls", "metrics", "model_name"} & set(step)


def test_runs_exported_and_imported_grade_the_same(tmp_path: Path) -> None:
    """The oracle and claude-code on the scripted model (its requests recorded by the gateway)
    in one invocation; exported, imported as other agents (and a trajectory of another
    harness), and graded in a second: the same metrics, turns and tokens, and outcomes."""
    project = cli_project(tmp_path / "proj")
    toml = (project.root / "llmtt.toml").read_text()
    secret = 'env.MY_TOKEN = "tok-0123456789abcdef"\n'  # a secret the oracle prints
    project.write("llmtt.toml", toml.replace("[target]\n", "[target]\n" + secret, 1))
    project.write("scenarios/s.yaml", SCENARIO)
    done = project.doit("run", "-n", "2", "agent=oracle,claude-code", "model=scripted")
    assert done.code == 0, done.out + done.err
    out = tmp_path / "atif"
    root = str(project.root)
    assert main(["export", "atif", "all", "--project", root, "--out", str(out)]) == 0
    exported = out / "s" / "oracle" / "r1.json"
    text = exported.read_text()
    assert "0123456789abcdef" not in text and "[REDACTED]" in text  # redacted
    trajectory = json.loads(text)
    required_fields(trajectory)
    steps = trajectory["steps"]
    assert steps[0] == {
        "source": "user",
        "message": "Make a repository and commit nothing.",
        "timestamp": steps[0]["timestamp"],
        "step_id": 1,
    }
    calls = [c for s in steps for c in s.get("tool_calls", [])]
    assert [c["arguments"]["command"] for c in calls][:3] == [
        "git init -q .",
        "git comit",
        "git status --short",
    ]
    assert calls[0]["function_name"] == "bash"
    assert trajectory["final_metrics"]["total_steps"] == len(steps)
    assert trajectory["extra"]["llmtt"]["outcome"] == "pass"
    cli = json.loads((out / "s" / "claude-code-scripted" / "r1.json").read_text())
    required_fields(cli)
    turns = [s for s in cli["steps"] if "metrics" in s]
    assert len(turns) == sum(s["llm_call_count"] for s in turns) == 5  # 4 calls, then the answer
    assert all(s["metrics"]["prompt_tokens"] > 0 for s in turns)
    assert cli["agent"]["model_name"] == "scripted"

    originals = {
        "replayed": project.results() / "s" / "oracle" / "r1",
        "replayed-cli": project.results() / "s" / "claude-code-scripted" / "r1",
    }
    for agent, original in originals.items():
        file = out / original.relative_to(project.results()).parent / "r1.json"
        args = ["import", "atif", str(file), "--scenario", "s", "--agent", agent]
        assert main([*args, "--workspace", str(original / "workspace"), "--project", root]) == 0
    # and a trajectory of another harness, with no workspace and no exit codes
    harbor = tmp_path / "harbor.json"
    harbor.write_text(json.dumps(HARBOR))
    assert main(["import", "atif", str(harbor), "--scenario", "s", "--project", root]) == 0
    tables = "".join(
        f'\n[agents.{a}]\ntrajectories = "trajectories/{a}"\n'
        for a in ("replayed", "replayed-cli", "atif-terminus-2")
    )
    project.write("llmtt.toml", (project.root / "llmtt.toml").read_text() + tables)
    settled(project.root)  # so the plan is cached, as in a project not edited this second
    replay = ("run", "agent=replayed,replayed-cli,atif-terminus-2", "scenario=s", "repeats=2")
    done = project.doit(*replay)
    assert done.code == 0, done.out + done.err
    # One trajectory is one run, graded once, whatever the repeats asked.
    assert "agent replayed replays one trajectory per scenario: 1 repeat, not 2" in done.err
    assert not (project.results() / "s" / "replayed" / "r2").exists()
    for agent, original in originals.items():
        replayed = project.results() / "s" / agent / "r1"
        spawn = json.loads((replayed / "events.jsonl").read_text().splitlines()[0])
        assert spawn["command"] == "replay"  # no agent was started
        before, after = (json.loads((d / "metrics.json").read_text()) for d in (original, replayed))
        assert {k: after[k] for k in SAME} == {k: before[k] for k in SAME}, agent
        a, b = (json.loads((d / "result.json").read_text()) for d in (original, replayed))
        assert (b["outcome"], b["gates_passed"], b["gates_total"]) == ("pass", 2, 2)
        assert (a["outcome"], a["gates_passed"], a["gates_total"]) == ("pass", 2, 2)
        # The recording of the replay holds the commands it replayed.
        assert "$ git comit" in (replayed / "session.cast").read_text()
    oracle = json.loads((originals["replayed"] / "metrics.json").read_text())
    assert oracle["total_commands"] == 3 and oracle["error_count"] == 1
    claude = json.loads((originals["replayed-cli"] / "metrics.json").read_text())
    assert claude["turns"] == 5 and claude["input_tokens"] > 0
    # Harbor's: graded on the workspace the setup left (no .git), its exit codes unknown
    other = project.results() / "s" / "atif-terminus-2" / "r1"
    metrics = json.loads((other / "metrics.json").read_text())
    assert (metrics["total_commands"], metrics["unknown_exit_count"]) == (2, 2)
    assert (metrics["turns"], metrics["input_tokens"], metrics["cache_read_tokens"]) == (2, 120, 80)
    assert metrics["cost_usd"] == 0.02 and metrics["completed"] is False
    result = json.loads((other / "result.json").read_text())
    assert result["outcome"] == "fail" and result["gates_passed"] == 0

    # Imported again with the workspace the oracle left (and step times with and without a
    # time zone), llmtt.toml untouched: replayed again, to a new outcome.
    steps = [{**HARBOR["steps"][1], "timestamp": "2026-11-27T00:00:00"}]
    steps.append({**HARBOR["steps"][2], "timestamp": "2026-11-27T00:00:05+00:00"})
    harbor.write_text(json.dumps({**HARBOR, "steps": [HARBOR["steps"][0], *steps]}))
    workspace = originals["replayed"] / "workspace"
    args = ["import", "atif", str(harbor), "--scenario", "s", "--workspace", str(workspace)]
    assert main([*args, "--project", root]) == 0
    done = project.doit(*replay)
    assert done.code == 0, done.out + done.err
    assert "s/atif-terminus-2/r1:agent" in done.executed()
    result = json.loads((other / "result.json").read_text())
    assert (result["outcome"], result["gates_passed"]) == ("pass", 2)
    assert "Traceback" not in done.out + done.err
    assert main([*args, "--project", root]) == 0  # the same again: nothing to replay
    assert project.doit(*replay).executed() == []


def settled(root: Path) -> None:
    """Every file of the project (not its results) written ten seconds ago: the plan cache
    keeps plans read only from files older than SETTLE_SECS."""
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != "llm-tool-test-results"]
        for name in [*files, *dirs]:
            os.utime(os.path.join(folder, name), (time.time() - 10, time.time() - 10))


def test_a_file_that_is_no_trajectory_is_refused(
    project: Project,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    project.write("llmtt.toml", GIT_TOML)
    project.write("scenarios/s.yaml", SCENARIO)
    bad = tmp_path / "t.json"
    bad.write_text(json.dumps({"schema_version": "ATIF-v1.7", "agent": {"name": "x"}, "steps": []}))
    args = ["import", "atif", str(bad), "--scenario", "s", "--project", str(project.root)]
    assert main(args) == 2
    said = capsys.readouterr().err
    assert f"{bad}: not an ATIF trajectory" in said and "agent.version: Field required" in said
    assert "Traceback" not in said
    assert main([*args[:3], "--scenario", "t", "--project", str(project.root)]) == 2
    assert "--scenario 't' is not a scenario" in capsys.readouterr().err
    # llmtt's own fields in `extra` are typed: one it cannot replay is refused on import.
    for extra, where in (
        ({"llmtt": "x"}, "extra.llmtt"),
        ({"llmtt": {"ended": {"exit_code": "0"}}}, "extra.llmtt.ended.exit_code"),
    ):
        bad.write_text(json.dumps({**HARBOR, "extra": extra}))
        assert main(args) == 2
        said = capsys.readouterr().err
        assert f"{bad}: not an ATIF trajectory (ATIF-v1.0 to v1.7): {where}:" in said, said
    steps = [*HARBOR["steps"][:2], {**HARBOR["steps"][2], "extra": {"llmtt": {"exit_codes": []}}}]
    bad.write_text(json.dumps({**HARBOR, "steps": steps}))
    assert main(args) == 2
    assert "steps.2.extra.llmtt.exit_codes:" in capsys.readouterr().err
    # A workspace that cannot be copied (it holds a socket) leaves no half of it, nor a
    # trajectory to replay as finished.
    good = tmp_path / "good.json"
    good.write_text(json.dumps(HARBOR))
    assert main([*args[:2], str(good), "--scenario", "s", "--project", str(project.root)]) == 0
    (tmp_path / "ws").mkdir()
    monkeypatch.chdir(tmp_path / "ws")  # a socket's path is short
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind("sock")
        cut = [*args[:2], str(good), "--scenario", "s", "--workspace", str(tmp_path / "ws")]
        assert main([*cut, "--project", str(project.root)]) == 2
    said = capsys.readouterr().err
    assert "import atif: cannot keep the trajectory as " in said and "Traceback" not in said
    assert list((project.root / "trajectories" / "atif-terminus-2").iterdir()) == []
    # An --out that cannot be written is said, naming it.
    (project.results() / "s" / "oracle").mkdir(parents=True)
    run_folder(project.results() / "s" / "oracle" / "r1", None)
    project.write("out-file", "")
    out = ["export", "atif", "all", "--out", str(project.root / "out-file")]
    assert main([*out, "--project", str(project.root)]) == 2
    said = capsys.readouterr().err
    assert f"export atif: --out {project.root / 'out-file'}: cannot write" in said, said
    assert main(["export", "atif", "s/oracle/r9", "--project", str(project.root)]) == 2
    assert "no run 's/oracle/r9' carried out in" in capsys.readouterr().err


def run_folder(folder: Path, wire: list[dict] | None) -> Path:
    """A run folder as the agent layer leaves it: two model turns, the first with a tool call,
    each turn's usage reported after it (as claude-code's stream does)."""
    folder.mkdir()
    record = {"run_id": "s/a-m/r1", "scenario": "s", "agent": "a", "model": "m", "repeat": 1}
    record.update(started_at="2026-11-27T00:00:00+00:00", versions={"agent": "1.2.3"})
    (folder / "run.json").write_text(json.dumps({**record, "status": "completed"}))
    events = [
        {"event": "message", "role": "assistant", "text": "I will look."},
        {"event": "tool_call", "id": "c1", "tool": "shell", "agent_tool": "Bash", "command": "ls"},
        {"event": "usage", "input_tokens": 10, "output_tokens": 5, "cache_read_tokens": 2},
        {"event": "tool_result", "id": "c1", "output": "a.txt\n", "exit_code": 0},
        {"event": "message", "role": "assistant", "text": "Done."},
        {"event": "usage", "input_tokens": 20, "output_tokens": 7, "cost_usd": 0.5},
        {"event": "usage", "input_tokens": 3, "side": True},
        {"event": "complete", "exit_code": 0, "duration_secs": 4.5, "natural_stop": True},
    ]
    lines = [json.dumps({"ts": 1_790_000_000 + n, **e}) for n, e in enumerate(events)]
    (folder / "events.jsonl").write_text("\n".join(lines) + "\n")
    if wire is not None:
        (folder / "wire.jsonl").write_text("".join(json.dumps(r) + "\n" for r in wire))
    return folder


def test_each_turn_carries_its_tokens_from_the_wire_record(tmp_path: Path) -> None:
    from llmtt.trajectories.atif import Trajectory
    from llmtt.trajectories.export import export_run

    turn = {"wire": "anthropic", "tools": 3, "status": 200}
    wire = [
        {**turn, "input_tokens": 11, "output_tokens": 6, "cache_write_tokens": 4},
        {"wire": "anthropic", "tools": 0, "status": 200, "input_tokens": 3},  # a side request
        {**turn, "input_tokens": 21, "output_tokens": 8, "cache_read_tokens": 9, "cost_usd": 0.25},
    ]
    trajectory = export_run(run_folder(tmp_path / "w", wire), "Do it.", "test")
    Trajectory.model_validate(trajectory)
    required_fields(trajectory)
    first, second = trajectory["steps"][1:]
    assert first["message"] == "I will look." and first["llm_call_count"] == 1
    assert first["tool_calls"] == [
        {"tool_call_id": "c1", "function_name": "Bash", "arguments": {"command": "ls"}}
    ]
    assert first["observation"] == {"results": [{"source_call_id": "c1", "content": "a.txt\n"}]}
    assert first["extra"] == {"llmtt": {"exit_codes": {"c1": 0}}}
    # the wire's figures (prompt tokens count cached reads and writes), not the events'
    assert first["metrics"] == {
        "prompt_tokens": 15,
        "completion_tokens": 6,
        "cached_tokens": 0,
        "cost_usd": None,
        "extra": {"llmtt": {"cache_write_tokens": 4}},
    }
    assert second["metrics"] == {
        "prompt_tokens": 30,
        "completion_tokens": 8,
        "cached_tokens": 9,
        "cost_usd": 0.25,
    }
    assert second["model_name"] == "m" and trajectory["agent"]["version"] == "1.2.3"
    assert trajectory["extra"]["llmtt"]["ended"]["duration_secs"] == 4.5
    # a wire record that does not match the turns reported: the events' own figures
    trajectory = export_run(run_folder(tmp_path / "e", wire[:1]), "Do it.", "test")
    assert trajectory["steps"][1]["metrics"]["prompt_tokens"] == 12
    assert trajectory["steps"][2]["metrics"]["cost_usd"] == 0.5
