"""Why a failed run failed: the free rule-based triage on oracle runs whose first failure is
known (a failing target command the agent recovers from, or stops at; no failing command but a
failed gate), rolled up in the reports; and the optional paid triage, a provider stood in for at
the wire: one request per failed run, none for passing runs, none without the switch,
LLMTT_ENABLED=1 or the budget for it, none on a second `doit run` or for the same inputs."""

from __future__ import annotations

import pytest
from conftest import GIT_TOML, FakeProvider, Project, chat_answer

SECRET = "sekret-value-4217-xyzzy"
TAG_GATE = "    - {type: command_succeeds, command: git rev-parse --verify -q refs/tags/v1}\n"


def scenarios(project: Project) -> None:
    # Fails `git tag` on an empty repository (exit 128), then goes on and commits.
    project.write(
        "scenarios/recovers.yaml",
        "task: {prompt: Tag a commit v1.}\n"
        "solution: [git init -q ., git tag v1, 'echo a > a', git add a, git commit -q -m a]\n"
        f"evaluation:\n  gates:\n{TAG_GATE}",
    )
    # Fails a checkout whose output holds a secret, then stops.
    project.write(
        "scenarios/stops.yaml",
        "task: {prompt: Tag a commit v1.}\n"
        f"solution: [git init -q ., git checkout {SECRET}]\n"
        f"evaluation:\n  gates:\n{TAG_GATE}",
    )
    # No target command fails; the second gate does.
    project.write(
        "scenarios/gate.yaml",
        "task: {prompt: Make a.txt.}\nsolution: [git init -q .]\n"
        "evaluation:\n  gates:\n    - {type: file_exists, path: .git/HEAD}\n"
        "    - {type: file_exists, path: a.txt}\n",
    )
    project.write(
        "scenarios/passes.yaml",
        "task: {prompt: Init.}\nsolution: [git init -q ., git status]\n"
        "evaluation:\n  gates:\n    - {type: file_exists, path: .git/HEAD}\n",
    )


def test_rule_based_triage_names_the_first_failure_and_rolls_up(project: Project) -> None:
    project.write("llmtt.toml", GIT_TOML)
    scenarios(project)
    result = project.doit("run", env={"MY_API_KEY": SECRET})
    assert result.code == 0, result.out + result.err

    recovers = project.json("recovers/oracle/r1/metrics.json")["triage"]
    first = recovers["first_failure"]
    assert (first["command"], first["subcommand"], first["exit_code"]) == ("git tag v1", "tag", 128)
    assert "fatal:" in first["output_head"] and first["next_command"] == "echo a > a"
    assert recovers["gate"]["index"] == 1 and recovers["target"] == "git"
    assert recovers["line"].startswith("`git tag v1` exited 128 (fatal: ")
    assert recovers["line"].startswith("`git tag v1` exited 128 (fatal: ")
    assert recovers["line"].endswith(
        "), then the agent ran `echo a > a`; first failed gate: gate 1 (command_succeeds): "
        + recovers["gate"]["message"]
    )

    stops = project.json("stops/oracle/r1/metrics.json")["triage"]
    assert stops["first_failure"]["next_command"] is None
    assert "then the agent stopped" in stops["line"]
    assert stops["first_failure"]["exit_code"] == 1
    assert "did not match" in stops["first_failure"]["output_head"]
    assert SECRET not in str(stops)

    gate = project.json("gate/oracle/r1/metrics.json")["triage"]
    assert gate["first_failure"] is None
    assert gate["line"].startswith(
        "no target command failed; first failed gate: gate 2 (file_exists): "
    )
    assert "triage" not in project.json("passes/oracle/r1/metrics.json")
    assert "triage" not in project.json("passes/oracle/r1/result.json")
    assert project.json("gate/oracle/r1/result.json")["triage"] == gate

    evaluation = (project.results() / "recovers/oracle/r1/evaluation.md").read_text()
    assert f"**Why it failed:** {recovers['line']}" in evaluation
    report = project.json("report.json")
    assert report["failures"]["subcommands"] == [
        {"target": "git", "subcommand": "checkout", "runs": 1},
        {"target": "git", "subcommand": "tag", "runs": 1},
    ]
    by_scenario = {s["scenario"]: s for s in report["failures"]["scenarios"]}
    assert by_scenario["recovers"]["reasons"] == [{"reason": "`git tag` exited 128", "runs": 1}]
    assert by_scenario["gate"]["reasons"] == [
        {"reason": "gate 2 (file_exists) failed, no target command did", "runs": 1}
    ]
    assert "passes" not in by_scenario
    md = (project.results() / "report.md").read_text()
    assert "## Why runs failed" in md and "| `git tag` | 1 |" in md
    assert f"- recovers/oracle/r1: {recovers['line']}" in md
    html = project.report_html()
    assert 'id="failures"' in html and "Why it failed:" in html
    assert SECRET not in md + html


def test_paid_triage_asks_once_per_failed_run_and_only_when_switched_on(
    project: Project, provider: tuple[str, type[FakeProvider]], capsys: pytest.CaptureFixture[str]
) -> None:
    url, handler = provider
    handler.queue = [(200, chat_answer("The agent tagged before any commit existed."))]
    models = (
        f'\n[models.triage-m]\nlitellm = "openai/triage-m"\napi_base = "{url}"\n'
        'api_key_env = "TRIAGE_KEY"\ninput_usd_per_mtok = 1.0\noutput_usd_per_mtok = 1.0\n'
        "\n[matrix]\nrepeats = 2\n"
    )
    project.write("llmtt.toml", GIT_TOML + models)
    project.write(
        "scenarios/recovers.yaml",
        "task: {prompt: Tag a commit v1.}\nsolution: [git init -q ., git tag v1]\n"
        f"evaluation:\n  gates:\n{TAG_GATE}",
    )
    project.write(
        "scenarios/passes.yaml",
        "task: {prompt: Init.}\nsolution: [git init -q .]\n"
        "evaluation:\n  gates:\n    - {type: file_exists, path: .git/HEAD}\n",
    )
    paid = {"LLMTT_ENABLED": "1", "TRIAGE_KEY": "k"}
    off = project.doit("run", env=paid)  # the switch is off: the rules alone
    assert off.code == 0, off.out + off.err
    assert (
        handler.hits == [] and not (project.results() / "recovers/oracle/r1/triage.json").exists()
    )

    triage = '\n[triage]\nenabled = true\nmodel = "triage-m"\n'
    project.write("llmtt.toml", GIT_TOML + models + triage)
    # `llmtt estimate`: the triage alone is pending, paid only about the runs that failed.
    lines = {line.split()[1]: line.split()[0] for line in _estimate(project, capsys)[:-1]}
    assert lines["passes/oracle/r1"] == lines["passes/oracle/r2"] == "$0.0000", lines
    assert float(lines["recovers/oracle/r1"].lstrip("$")) > 0, lines
    refused = project.doit("run", env={"TRIAGE_KEY": "k"})  # no LLMTT_ENABLED=1
    assert refused.code == 0, refused.out + refused.err
    assert handler.hits == []
    assert "the triage (triage-m) can spend money; set LLMTT_ENABLED=1" in refused.out
    assert not any(t.endswith(":agent") for t in refused.executed())

    # A question is asked while the budget is not spent: the first costs $0.000015, which
    # spends $0.00001, and the second failed run stays pending.
    poor = project.doit("run", "budget=0.00001", env=paid)
    assert poor.code == 0, poor.out + poor.err
    assert len(handler.hits) == 1
    assert "the triage did not answer: budget exhausted: spent $0.0000 of $0.0000" in poor.out

    first = project.doit("run", env=paid)
    assert first.code == 0, first.out + first.err
    # The one left is asked; the one answered is not asked again, nor the passing runs.
    assert len(handler.hits) == 2
    prompt = handler.bodies[0]["messages"][1]["content"]
    assert "`git tag v1` exited 128" in prompt and "$ git tag v1" in prompt
    answer = project.json("recovers/oracle/r1/triage.json")
    assert answer["line"] == "The agent tagged before any commit existed."
    # What `llmtt estimate` says a run not yet evaluated may cost is no less than what this
    # failed run's question, as it was asked, held of the budget.
    from llmtt.evaluation.paid_triage import triage_bound, triage_holds
    from llmtt.plan.runs import build_plan
    from llmtt.spec.project import load_project
    from llmtt.spec.selection import Selection

    loaded = load_project(project.root)
    (failed,) = [
        r for r in build_plan(loaded, Selection()).runs if r.run_id == "recovers/oracle/r1"
    ]
    (failed.dir / "triage.json").rename(failed.dir / "triage.kept")  # as if never asked
    held = triage_holds(loaded, failed)
    (failed.dir / "triage.kept").rename(failed.dir / "triage.json")
    assert held is not None and 0 < held <= (triage_bound(loaded, failed) or 0)
    assert answer["cost_usd"] == 15 / 1e6
    assert project.json("passes/oracle/r1/triage.json")["skipped"] == "the run did not fail"
    evaluation = (project.results() / "recovers/oracle/r2/evaluation.md").read_text()
    assert (
        "**Why it failed:** The agent tagged before any commit existed. (triage-m; by rule: `git tag v1`"
        in evaluation
    )
    md = (project.results() / "report.md").read_text()
    assert "- recovers/oracle/r1: The agent tagged before any commit existed. (triage-m)" in md
    assert "| `git tag` | 2 |" in md  # the roll-up stays the rules'
    report = project.json("report.json")
    row = next(r for r in report["runs"] if r["run_id"] == "recovers/oracle/r1")
    assert row["triage"]["model_line"] == answer["line"]
    assert row["triage"]["first_failure"]["exit_code"] == 128  # the rule-based fields kept

    again = project.doit("run", env=paid)
    assert again.code == 0, again.out + again.err
    assert len(handler.hits) == 2 and again.executed() == []
    assert _estimate(project, capsys)[-1].startswith("0 pending of 4 runs")
    # Evaluated again (a new result.json) with the same events and failure: the triage layer
    # runs, and finds it asked already about these inputs.
    timeout = "\n[run]\ngate_timeout_secs = 31\n"
    project.write("llmtt.toml", GIT_TOML + models + triage + timeout)
    evaluated = project.doit("run", env=paid)
    assert evaluated.code == 0, evaluated.out + evaluated.err
    assert "recovers/oracle/r1:triage" in evaluated.executed()
    assert len(handler.hits) == 2


def test_paid_triage_gives_up_and_keeps_answers_across_outcome_flips(
    project: Project, provider: tuple[str, type[FakeProvider]]
) -> None:
    """Two empty answers on the same inputs, paid: given up ([run] provider_attempts = 2),
    not pending, said in the reports, both counted in the cost. A new failure is asked; the
    run passing, then failing as before, asks nothing again (the answers stay by inputs)."""
    url, handler = provider
    handler.queue = [(200, chat_answer("")), (200, chat_answer("")), (200, chat_answer("Why."))]
    toml = (
        GIT_TOML + f'\n[models.triage-m]\nlitellm = "openai/triage-m"\napi_base = "{url}"\n'
        'api_key_env = "TRIAGE_KEY"\ninput_usd_per_mtok = 1.0\noutput_usd_per_mtok = 1.0\n'
        '\n[run]\nprovider_attempts = 2\n\n[triage]\nenabled = true\nmodel = "triage-m"\n'
    )
    project.write("llmtt.toml", toml)
    paid = {"LLMTT_ENABLED": "1", "TRIAGE_KEY": "k"}
    other_gate = "    - {type: file_exists, path: nothing.txt}\n"
    passing_gate = "    - {type: file_exists, path: .git/HEAD}\n"

    def run_with(gate: str) -> list[str]:
        project.write(
            "scenarios/s.yaml",
            "task: {prompt: Tag a commit v1.}\nsolution: [git init -q ., git tag v1]\n"
            f"evaluation:\n  gates:\n{gate}",
        )
        result = project.doit("run", env=paid)
        assert result.code == 0, result.out + result.err
        return [result.out, *result.executed()]

    assert "the triage did not answer: the model gave an empty answer" in run_with(TAG_GATE)[0]
    said = run_with(TAG_GATE)[0]
    assert len(handler.hits) == 2 and "the triage gave up: no answer in 2 attempts" in said
    assert "s/oracle/r1:triage" not in run_with(TAG_GATE)  # given up: not pending
    triaged = project.json("s/oracle/r1/triage.json")
    assert triaged["gave_up"] and triaged["earlier_attempts"][0]["cost_usd"] == 15 / 1e6
    evaluation = (project.results() / "s/oracle/r1/evaluation.md").read_text()
    assert "(the triage model triage-m gave up: no answer in 2 attempts" in evaluation
    report = project.json("report.json")
    assert report["runs"][0]["triage_cost_usd"] == 30 / 1e6
    assert report["summary"]["cost_usd"] == 30 / 1e6  # the oracle costs nothing
    assert "gave up: no answer in 2 attempts" in project.report_html()

    run_with(other_gate)  # another failure: asked, answered
    assert len(handler.hits) == 3
    assert project.json("s/oracle/r1/triage.json")["line"] == "Why."
    run_with(passing_gate)
    assert project.json("s/oracle/r1/triage.json")["skipped"] == "the run did not fail"
    run_with(other_gate)
    assert project.json("s/oracle/r1/triage.json")["line"] == "Why."
    run_with(TAG_GATE)
    assert project.json("s/oracle/r1/triage.json")["gave_up"]
    assert len(handler.hits) == 3  # nothing asked twice
    assert project.json("report.json")["summary"]["cost_usd"] == 45 / 1e6


def test_triage_switched_on_without_a_model_names_the_field(project: Project) -> None:
    project.write("llmtt.toml", GIT_TOML + "\n[triage]\nenabled = true\n")
    project.write("scenarios/s.yaml", "task: {prompt: Init.}\nsolution: [git init -q .]\n")
    result = project.doit("run")
    said = result.out + result.err
    assert result.code != 0 and "Traceback" not in said
    lines = (GIT_TOML + "\n[triage]\nenabled = true\n").splitlines()
    assert f"llmtt.toml:{lines.index('enabled = true') + 1}" in said, said
    assert "triage.model" in said and "[triage] enabled = true needs a model" in said


def test_rule_triage_reads_the_line_as_metrics_do() -> None:
    """In process, on events written by hand: a target command behind a pipe (exit unknown)
    is not taken for the failure; in a `;` list, the last segment (whose exit the line's is)
    is; the output head is masked before it is cut and kept to a few lines."""
    from llmtt.evaluation.shell.target_commands import TargetMatcher
    from llmtt.evaluation.triage import HEAD_LINES, rule_triage
    from llmtt.events import ToolCall, ToolResult
    from llmtt.spec.config import TargetSpec

    output = "\n".join(f"line {k} {SECRET}" for k in range(10))
    events = [
        ToolCall(event="tool_call", ts=0, id="1", command="git log | head -1"),
        ToolResult(event="tool_result", ts=0, id="1", output="", exit_code=1),
        ToolCall(event="tool_call", ts=0, id="2", command="git init -q .; git push origin"),
        ToolResult(event="tool_result", ts=0, id="2", output=output, exit_code=128),
        ToolCall(event="tool_call", ts=0, id="3", command="git remote -v"),
        ToolResult(event="tool_result", ts=0, id="3", output="", exit_code=0),
    ]
    found = rule_triage(
        events,
        TargetMatcher.of(TargetSpec(binary="git")),
        [{"index": 1, "type": "file_exists", "passed": True, "message": "ok"}],
        lambda text: text.replace(SECRET, "[REDACTED]"),
        target="git",
        reason="r",
    )
    first = found["first_failure"]
    assert (first["command"], first["subcommand"], first["exit_code"]) == (
        "git push origin",
        "push",
        128,
    )
    assert first["output_head"].splitlines() == [f"line {k} [REDACTED]" for k in range(HEAD_LINES)]
    assert first["next_command"] == "git remote -v" and found["gate"] is None
    assert found["line"] == (
        "`git push origin` exited 128 (line 0 [REDACTED]), then the agent ran `git remote -v`"
    )


def test_paid_layers_print_with_capture_off_under_ray(project: Project) -> None:
    """Under executor=ray the layers run in threads of one process: the judge and triage tasks,
    which print, leave doit's output capture off as the agent and evaluate tasks do."""
    from llmtt.taskgraph.session import Session
    from llmtt.taskgraph.tasks import make_tasks

    models = "".join(
        f'\n[models.{m}]\nlitellm = "openai/{m}"\napi_base = "http://127.0.0.1:9"\n'
        for m in ("judge-m", "triage-m")
    )
    paid = '\n[judge]\nmodel = "judge-m"\n\n[triage]\nenabled = true\nmodel = "triage-m"\n'
    project.write("llmtt.toml", GIT_TOML + models + paid)
    project.write("rubrics/r.yaml", "criteria:\n  - {id: c, description: Done., weight: 1}\n")
    project.write(
        "scenarios/s.yaml",
        "task: {prompt: Init.}\nsolution: [git init -q .]\nevaluation:\n"
        "  gates:\n    - {type: file_exists, path: .git/HEAD}\n"
        "  judge: {enabled: true, rubric: rubrics/r.yaml}\n",
    )
    for executor, capture in (("ray", False), ("local", True)):
        session = Session.load(project.root, {"executor": executor})
        tasks = {t.name: t for t in make_tasks(session) if not isinstance(t, dict)}
        for layer in ("agent", "judge", "triage"):
            assert tasks[f"s/oracle/r1:{layer}"].io.capture is capture, (executor, layer)


def _estimate(project: Project, capsys: pytest.CaptureFixture[str]) -> list[str]:
    """`llmtt estimate`'s lines."""
    from llmtt.commands.main import main

    capsys.readouterr()
    assert main(["estimate", str(project.root)]) == 0
    return capsys.readouterr().out.splitlines()
