"""Missing agents, missing keys and the money switch fail fast with what to do; the `command`
agent runs any CLI; a timed-out agent leaves nothing behind, not even a setsid grandchild."""

from __future__ import annotations

import json
import random
import subprocess
import time
from pathlib import Path

import pytest
from conftest import GIT_TOML, Project

SCENARIO = """\
task: {prompt: Make a repository.}
run: {timeout_secs: 30}
solution: [git init -q .]
evaluation:
  gates:
    - {type: file_exists, path: .git/HEAD}
"""


def setup_project(project: Project, agents: str = "") -> None:
    project.write("llmtt.toml", GIT_TOML + agents)
    project.write("scenarios/s.yaml", SCENARIO)


def test_missing_agent_binary_fails_fast_with_install_hint(project: Project) -> None:
    setup_project(project, '\n[agents.claude-code]\nexecutable = "nowhere/claude"\n')
    started = time.monotonic()
    result = project.doit("run", "agent=claude-code", "model=scripted")
    assert time.monotonic() - started < 20
    assert result.code != 0
    text = result.out + result.err
    assert "[agents.claude-code] executable 'nowhere/claude' is not an executable file" in text
    assert "Traceback" not in text
    assert (
        json.loads((project.results() / "s/claude-code-scripted/r1/run.json").read_text())["status"]
        == "error"
    )


def test_real_model_without_key_says_which_variable(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = Path(__file__).resolve().parents[2]
    setup_project(project, f'\n[agents.codex]\nexecutable = "{root}/node_modules/.bin/codex"\n')
    result = project.doit("run", "agent=codex", "model=gpt-5")  # conftest strips LLMTT_* vars
    text = result.out + result.err
    assert result.code != 0
    assert "codex needs OPENAI_API_KEY or CODEX_API_KEY for model 'gpt-5'" in text


def test_paid_runs_need_the_switch(project: Project) -> None:
    setup_project(project, '\n[agents.paid]\ncommand = ["echo", "{model}", "{prompt}"]\n')
    result = project.doit("run", "agent=paid", "model=some-model")
    assert result.code != 0
    assert "can spend money; set LLMTT_ENABLED=1" in result.out + result.err


def test_command_agent_without_parser_uses_the_transcript(project: Project, tmp_path: Path) -> None:
    """Its exits cannot be seen: the run warns, and no_transcript_errors reads failures from
    the text after each command (approximately) and says when it cannot tell."""
    agents = ""
    for name, frobnicate in (("fake", True), ("tidy", False)):
        script = tmp_path / f"{name}-agent.sh"
        script.write_text(
            "#!/bin/sh\n"
            'echo "thinking about: $1"\n'
            """echo '{"type": "not read: no parser was chosen"}'\n"""
            "echo '$ git init -q .'; git init -q .\n"
            "echo '$ git statuz'; git statuz 2>/dev/null\n"
            "echo '$ git --help'; git --help > /dev/null\n"
            + ("echo '$ git frobnicate'; git frobnicate\n" if frobnicate else "")
        )
        script.chmod(0o755)
        agents += f'\n[agents.{name}]\ncommand = ["{script}", "{{prompt}}"]\nfree = true\n'
    setup_project(project, agents)
    project.write("scenarios/s.yaml", SCENARIO + "    - {type: no_transcript_errors}\n")
    result = project.doit("run", "agent=fake,tidy")
    assert result.code == 0, result.out + result.err
    metrics = project.json("s/fake/r1/metrics.json")
    assert metrics["source"] == "transcript"
    assert metrics["total_commands"] == 4
    assert metrics["unknown_exit_count"] == 4 and metrics["error_count"] == 0
    assert metrics["error_rate"] is None and metrics["first_try_success_rate"] is None
    assert metrics["help_invocations"] == 1
    assert metrics["cost_usd"] == 0.0  # declared free in llmtt.toml
    [warning] = metrics["warnings"]
    assert warning.startswith("no structured events: the 4 target command(s) were read from the")
    assert "; warning: no structured events" in metrics["outcome_reason"]
    # git frobnicate failed where no exit code shows: its complaint in the transcript says so.
    gate = project.json("s/fake/r1/gates.json")["gates"][1]
    assert gate["passed"] is False and "approximate" in gate["message"]
    assert "git: 'frobnicate' is not a git command" in gate["message"]
    assert metrics["outcome"] == "fail"
    # (git statuz failed too, its complaint sent to /dev/null: nothing can tell that.)
    tidy = project.json("s/tidy/r1/metrics.json")
    assert tidy["outcome"] == "pass"  # the free-text agent did make the repository
    gate = project.json("s/tidy/r1/gates.json")["gates"][1]
    assert gate["passed"] is True and "cannot tell for 3" in gate["message"]
    assert "the transcript shows no exit code" in gate["message"]
    log = (project.results() / "s/fake/r1/events.jsonl").read_text()
    assert [json.loads(line)["event"] for line in log.splitlines()] == ["spawn", "complete"]


def test_timed_out_agent_leaves_no_process_not_even_a_setsid_grandchild(
    project: Project, tmp_path: Path
) -> None:
    script = tmp_path / "hang.sh"
    # Durations unique to this test run, so that only its own processes can match below.
    a, b, c = random.sample(range(40_000, 90_000), 3)
    script.write_text(f"#!/bin/sh\nsetsid sleep {a} &\nsleep {b} &\necho started\nsleep {c}\n")
    script.chmod(0o755)
    project.write(
        "llmtt.toml", GIT_TOML + f'\n[agents.hang]\ncommand = ["{script}"]\nfree = true\n'
    )
    project.write("scenarios/s.yaml", SCENARIO.replace("timeout_secs: 30", "timeout_secs: 2"))
    started = time.monotonic()
    result = project.doit("run", "agent=hang")
    elapsed = time.monotonic() - started
    assert result.code == 0, result.out + result.err  # a timeout is a result
    assert elapsed < 2 + 40  # killed at the timeout, not left to run (its sleeps last hours)
    record = project.json("s/hang/r1/run.json")
    assert record["status"] == "timeout"
    metrics = project.json("s/hang/r1/metrics.json")
    assert metrics["completed"] is False and metrics["natural_stop"] is False
    assert "started" in (project.results() / "s/hang/r1/transcript.raw.txt").read_text()
    survivors = subprocess.run(
        ["pgrep", "-fx", f"sleep ({a}|{b}|{c})"], capture_output=True, text=True, timeout=10
    )
    assert survivors.stdout.strip() == "", "processes outlived the run"


def test_cost_limit_stops_an_agent_as_its_requests_cost_it(
    project: Project, tmp_path: Path
) -> None:
    # Each step: 100 tokens in, 10 out at 100 and 1000 $/Mtok = $0.02 from the model's price.
    # The agent's own figure ($0.03) is the client's, kept apart and never counted.
    step = '{"type":"step_finish","part":{"reason":"tool-calls","cost":0.03,"tokens":{"input":100,"output":10}}}'
    script = tmp_path / "spender.sh"
    script.write_text("#!/bin/sh\n" + "".join(f"echo '{step}'; sleep 0.3\n" for _ in range(10)))
    script.chmod(0o755)
    project.write(
        "llmtt.toml",
        GIT_TOML
        + f'\n[agents.spender]\ncommand = ["{script}", "{{model}}"]\nparser = "opencode"\n'
        + "\n[models.priced]\ninput_usd_per_mtok = 100\noutput_usd_per_mtok = 1000\n",
    )
    project.write(
        "scenarios/s.yaml",
        SCENARIO.replace(
            "run: {timeout_secs: 30}", "run: {timeout_secs: 30}\ncost: {max_usd: 0.05}"
        ),
    )
    started = time.monotonic()
    result = project.doit("run", "agent=spender", "model=priced", env={"LLMTT_ENABLED": "1"})
    assert result.code == 0, result.out + result.err
    assert time.monotonic() - started < 25  # stopped, not left to its 30 s limit
    metrics = project.json("s/spender-priced/r1/metrics.json")
    assert metrics["turns"] == 3 and metrics["cost_usd"] == pytest.approx(0.06)
    assert metrics["natural_stop"] is False and metrics["completed"] is False
    events = (project.results() / "s/spender-priced/r1/events.jsonl").read_text()
    assert "cost limit reached: spent $0.0600 of $0.05" in events
    assert project.json("s/spender-priced/r1/run.json")["stop_reason"] == (
        "cost limit reached: spent $0.0600 of $0.05"
    )
    # Outside the gateway, the attempt's requests and cost are its usage events', as the
    # ledger books them (what a report counts if the attempt is lost).
    lines = (project.results() / "s/spender-priced/r1/attempts.jsonl").read_text().splitlines()
    (attempt,) = [json.loads(line) for line in lines]
    assert attempt["requests"] == 3 and attempt["cost_usd"] == pytest.approx(0.06), attempt


def test_a_log_that_says_a_line_was_not_read_makes_the_run_warn(
    project: Project, tmp_path: Path
) -> None:
    """What the reader of an agent's stream could not read (its turns, tokens or commands may
    be short) is said where every report shows the outcome. The note is printed here by the
    agent itself, as llmtt's reader writes it, for no real line is known to need it."""
    script = tmp_path / "fake-agent.sh"
    note = "llmtt: a line of the agent's stream has a shape llmtt does not read (TypeError: x)"
    script.write_text(f'#!/bin/sh\necho "{note}"\ngit init -q .\n')
    script.chmod(0o755)
    toml = f'\n[agents.fake]\ncommand = ["{script}"]\nparser = "opencode"\nfree = true\n'
    setup_project(project, toml)
    result = project.doit("run", "agent=fake")
    assert result.code == 0, result.out + result.err
    metrics = project.json("s/fake/r1/metrics.json")
    assert metrics["warnings"] == [
        "llmtt could not read 1 line(s) of the agent's output (events.jsonl says which): its "
        "turns, tokens, cost or commands may be short"
    ]
    assert metrics["outcome"] == "pass"
    assert "warning: llmtt could not read 1 line(s)" in metrics["outcome_reason"]
