"""The evaluate layer of a run: metrics, gates, outcome -> metrics.json, gates.json, result.json."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from llmtt.agents.pricing import pricing_of
from llmtt.evaluation.approximate import failure_signs
from llmtt.evaluation.evaluators.runner import (
    Memo,
    Purse,
    evaluation_input,
    evaluation_record,
    evaluator_failures,
    run_evaluators,
)
from llmtt.evaluation.gates import GateContext, run_gates
from llmtt.evaluation.guidance_use import use_fields
from llmtt.evaluation.interaction import interaction_metrics, paired_calls, target_commands_by_call
from llmtt.evaluation.outcome import composite_score, decide, doomed, result_record
from llmtt.evaluation.scripts import (
    Checks,
    run_post_scripts,
    run_script_evaluators,
    script_env,
    script_warnings,
)
from llmtt.evaluation.shell.target_commands import TargetCommand, matcher_for, target_commands
from llmtt.evaluation.transcript import DEFAULT_MARKER, transcript_events
from llmtt.evaluation.triage import rule_triage, target_name
from llmtt.evaluation.usage import usage_fields, wire_usage
from llmtt.events import UNREAD, Event, Output, ToolCall, read_events
from llmtt.execution import isolation
from llmtt.execution.workspace import Workspace
from llmtt.gateway.usage import read_wire
from llmtt.plan.runs import Run
from llmtt.spec.checks import Call
from llmtt.spec.config import default_judge_model
from llmtt.spec.loading import dotted, line_of
from llmtt.spec.project import Project
from llmtt.util.atomic import read_json, write_json
from llmtt.util.hashing import hash_file, hash_value


class Records(Protocol):
    """Where an evaluation's records go: the caller's results store (results.jsonl and
    evaluations.jsonl; `llmtt.results.store.ResultsStore`). Evaluation makes them; the store
    keeps them."""

    def evaluation(self, line: dict[str, Any]) -> None:
        """A run's evaluator results (appended before its result record)."""

    def result(self, record: dict[str, Any]) -> None:
        """A run's result record."""


METRICS_FORMAT = 1


def evaluate_run(
    project: Project, run: Run, records: Records, purse: Purse | None = None
) -> dict[str, Any] | None:
    """Layers 1 and 2 of a run (or why it could not be carried out).

    Without a judge this settles the outcome and returns the result record; with one, the
    judge task settles it (see `settle`) and this returns None.
    """
    info = read_json(run.dir / "run.json")
    matcher = matcher_for(project, run.scenario)
    metrics: dict[str, Any] = {"format": METRICS_FORMAT, "run_id": run.run_id}
    gates: list[dict[str, Any]] = []
    if info["status"] != "error":
        settings = project.config.agents.get(run.agent)
        marker = settings.command_marker if settings else DEFAULT_MARKER
        structured = info.get("structured_events", True)
        events, source = _events(run.dir, marker, structured=structured)
        free = bool(info.get("free"))
        metrics.update(interaction_metrics(events, matcher, free=free))
        metrics["source"] = source
        pricing = pricing_of(run.model, project.config.models, free=free)
        usage, usage_warnings = usage_fields(metrics, wire_usage(run.dir, pricing), pricing)
        metrics.update(usage)
        triggers = run.scenario.spec.skill_triggers
        calls = [
            (e.tool, e.command, bool(matcher and target_commands(e.command, None, matcher)))
            for e in events
            if isinstance(e, ToolCall)
        ]
        placed = info.get("placed") or []
        metrics.update(use_fields(placed, read_wire(run.dir), triggers, calls))
        ws = Workspace(
            run.dir, run.dir / "workspace", run.dir / "home", tuple(run.scenario.spec.path)
        )
        env = script_env(run, ws)
        checks = _checks(project, run)
        # What the post scripts leave (a copy of the workspace) is what the evaluation reads.
        seen, post = run_post_scripts(run, ws, env, checks)
        by_call = target_commands_by_call(events, matcher)
        found = [c for commands, _ in by_call for c in commands]
        evaluated = _evaluators(project, run, info, (events, seen, found), purse)
        if evaluated is not None:
            metrics["evaluators"] = evaluated
        ctx = GateContext(
            workspace=seen,
            env=env,
            timeout_secs=project.config.run.gate_timeout_secs,
            target_commands=found,
            evaluators=evaluated or {},
            scenario=run.scenario,
            health_check=run.target.health_check if run.target.health_check_gate else None,
            calls=[
                Call(result.output if result else "", result.exit_code if result else None)
                for _, result in paired_calls(events)
            ],
            checks=checks,
            failure_signs=failure_signs(by_call, run.target.binary),
            source=source,
            triggers=(
                None
                if "skills_invoked" in metrics and metrics["skills_invoked"] is None
                else metrics.get("skill_triggers", {})
            ),
        )
        gates = run_gates(run.scenario.spec.evaluation.gates, ctx)
        metrics.update(_scripts_fields(post, run_script_evaluators(run, seen, env, checks)))
        # The agent layer's own (a CLI other than the pinned one), then the usage's.
        run_warnings = [*info.get("warnings", []), *usage_warnings]
        if source == "transcript" and metrics["unknown_exit_count"]:
            run_warnings.append(
                f"no structured events: the {metrics['total_commands']} target command(s) were "
                "read from the transcript, where no exit code can be seen (all unknown): "
                "error_rate and first_try_success_rate are null, and no_transcript_errors "
                "reads failures approximately from the text shown after each command"
            )
        if run_warnings:
            metrics.setdefault("warnings", []).extend(run_warnings)
        unread = sum(
            isinstance(e, Output) and e.text.startswith("llmtt: ") and UNREAD in e.text
            for e in events
        )
        if unread:
            metrics.setdefault("warnings", []).append(
                f"llmtt could not read {unread} line(s) of the agent's output (events.jsonl "
                "says which): its turns, tokens, cost or commands may be short"
            )
    write_json(
        run.dir / "gates.json",
        {"format": METRICS_FORMAT, "run_id": run.run_id, "gates": gates},
        project.redactor(),
    )
    if run.judge is not None:
        outcome, reason = decide(gates, None, timed_out_after=_timed_out_after(run, info))
        metrics.update(
            _outcome_fields(
                run, metrics, gates, (outcome, reason + "; the judge has not run"), None
            )
        )
        write_json(run.dir / "metrics.json", metrics, project.redactor())
        return None
    return settle(project, run, records, info, metrics, gates, None)


SCRATCH = ".scratch"  # in the results folder: confined checks' scratch folders, while they run


def _checks(project: Project, run: Run) -> Checks:
    """How this run's gates and scripts are confined ([isolation]; LlmttError when they
    cannot be as configured)."""
    config = project.config
    program = isolation.target_program(run.target.binary)
    base = isolation.sandbox(project.root, project.results_dir, config, *program)
    hosts = isolation.destinations(config.isolation.network.checks, None)
    scripts = [run.scenario.script_path(path) for _, path in run.scenario.script_files()]
    return Checks(
        sandbox=base,
        hosts=tuple(hosts),
        readable=(run.dir, *scripts),
        mounts=tuple(run.scenario.spec.mounts.items()),
        scratch=project.results_dir / SCRATCH if base is not None else None,
    )


def _evaluators(
    project: Project,
    run: Run,
    info: dict[str, Any],
    seen: tuple[list[Event], Path, list[TargetCommand]],
    purse: Purse | None,
) -> dict[str, Any] | None:
    """The scenario's evaluators on this run (None: it has none), from what the run left
    (`seen`: its events, its workspace, its target commands)."""
    evaluation = run.scenario.spec.evaluation
    if not evaluation.evaluators:
        return None
    events, workspace, found = seen
    context = {
        "run_id": run.run_id,
        "scenario": run.scenario.name,
        "agent": run.agent,
        "model": run.model,
        "variant": run.variant,
        "natural_stop": info.get("natural_stop"),
    }
    input = evaluation_input(
        run.scenario.spec.task.prompt, evaluation.ground_truth, events, workspace, found, context
    )
    scenario = run.scenario
    try:
        shown = scenario.path.relative_to(project.root).as_posix()
    except ValueError:
        shown = str(scenario.path)
    places = []
    for index in range(len(evaluation.evaluators)):
        loc = ("evaluation", "evaluators", index)
        line = line_of(scenario.lines, loc)
        places.append(f"{shown}{f':{line}' if line else ''}, {dotted(loc)}")
    return run_evaluators(
        evaluation.evaluators,
        input,
        project.config.evaluators,
        project.root,
        models=project.config.models,
        default_model=default_judge_model(project.config),
        purse=purse,
        memo=Memo(run.dir / "evaluator-answers.json"),
        places=places,
    )


def _scripts_fields(
    post: list[dict[str, Any]], evaluators: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    """metrics.json's fields for the scripts a scenario has (none for a scenario without)."""
    fields: dict[str, Any] = {}
    if post:
        fields["post_scripts"] = post
    if evaluators:
        fields["script_evaluators"] = evaluators
    warnings = script_warnings(post, evaluators)
    if warnings:
        fields["warnings"] = warnings
    return fields


def settle(
    project: Project,
    run: Run,
    records: Records,
    info: dict[str, Any],
    metrics: dict[str, Any],
    gates: list[dict[str, Any]],
    judge: dict[str, Any] | None,
    *,
    refused: str | None = None,
    note: str | None = None,
) -> dict[str, Any]:
    """The outcome from gates and judge: metrics.json, result.json, a results.jsonl line;
    returns the result record (redacted, like the files it goes into).

    A run not carried out (its agent or, `refused`, its judge) gets outcome `error` and no
    results.jsonl line: it stays pending, and the reports list it. `note` is added to the
    outcome's reason (a judge not asked, and why).
    """
    redact = project.redactor()
    # The agent's fail stands whatever the judge could or could not say: its error is noted.
    # (Not while an evaluator waits to be fixed: the run has no verdict until then.)
    evaluated = metrics.get("evaluators")
    waiting = bool((evaluated or {}).get("refused") or evaluator_failures(evaluated))
    lost = info["status"] != "error" and not waiting and doomed(gates, info)
    unjudged = f"the judge did not run: {refused}" if refused is not None else None
    if judge is not None and judge.get("error") and unjudged is None:
        unjudged = str(judge["error"])
    if info["status"] == "error":
        outcome, reason = "error", f"run could not be carried out: {info['error']}"
    elif lost and unjudged is not None:
        outcome, reason = decide(gates, None, timed_out_after=_timed_out_after(run, info))
        reason += f"; {unjudged}"
    elif refused is not None:
        outcome, reason = "error", f"the judge did not run: {refused}"
    elif (metrics.get("evaluators") or {}).get("refused"):
        why = "; ".join(metrics["evaluators"]["refused"])
        outcome, reason = "error", f"an evaluator did not run: {why}"
    elif evaluator_failures(metrics.get("evaluators")):
        # The evaluator's fault, not the agent's: no verdict on the run until it is fixed.
        why = "; ".join(evaluator_failures(metrics.get("evaluators")))
        outcome, reason = "error", f"an evaluator failed: {why}"
    elif judge is not None and judge.get("error"):
        # The judge's failure, not the agent's: no verdict until the judge answers.
        outcome, reason = "error", str(judge["error"])
    else:
        outcome, reason = decide(gates, judge, timed_out_after=_timed_out_after(run, info))
    if note is not None:
        reason += f"; {note}"
    # A script that failed without deciding anything is said where every report shows it.
    reason += "".join(f"; warning: {w}" for w in metrics.get("warnings", []))
    score = judge.get("weighted_score") if judge is not None and refused is None else None
    metrics.update(_outcome_fields(run, metrics, gates, (outcome, reason), score))
    metrics.pop("triage", None)
    if outcome == "fail":
        metrics["triage"] = _triage(project, run, info, gates, reason)
    if judge is not None:
        metrics["judge_score"] = score
    write_json(run.dir / "metrics.json", metrics, redact)
    record: dict[str, Any] = redact.value(result_record(run, info, metrics, judge, gates))
    # Names this evaluation of this agent attempt: evaluating it again (after a kill between
    # the append and doit saving the layer) must not add a second line for it.
    keys = [run.eval_key, run.judge.key if run.judge else None]
    # The agent attempt it evaluates (run.json is new at each one), for results.db's views.
    record["attempt_id"] = hash_file(run.dir / "run.json")
    record["evaluation_id"] = hash_value([record["attempt_id"], keys])
    write_json(run.dir / "result.json", record, redact)
    if outcome != "error":
        evaluated = metrics.get("evaluators")
        if evaluated is not None:
            line = evaluation_record(
                run.run_id,
                record["evaluation_id"],
                run.scenario.spec.task.prompt,
                evaluated,
                run.scenario.spec.evaluation.evaluators,
            )
            records.evaluation(line)
        records.result(record)
    return record


def _triage(
    project: Project, run: Run, info: dict[str, Any], gates: list[dict[str, Any]], reason: str
) -> dict[str, Any]:
    """The rule-based triage of a failed run (llmtt.evaluation.triage), from its events."""
    settings = project.config.agents.get(run.agent)
    marker = settings.command_marker if settings else DEFAULT_MARKER
    events, _ = _events(run.dir, marker, structured=info.get("structured_events", True))
    return rule_triage(
        events,
        matcher_for(project, run.scenario),
        gates,
        project.redactor(),
        target=target_name(run.target.binary),
        reason=reason,
    )


def _timed_out_after(run: Run, info: dict[str, Any]) -> float | None:
    """The time limit the agent was stopped at, or None when it ended by itself."""
    return run.timeout_secs if info.get("timed_out") else None


def _outcome_fields(
    run: Run,
    metrics: dict[str, Any],
    gates: list[dict[str, Any]],
    verdict: tuple[str, str],
    judge_score: float | None,
) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "outcome": verdict[0],
        "outcome_reason": verdict[1],
        # A gate that cannot tell (passed null) counts in none of these: not a pass, not a fail.
        "gates_passed": sum(1 for g in gates if g["passed"] is True),
        "gates_total": sum(1 for g in gates if g["passed"] is not None),
        "gates_unknown": sum(1 for g in gates if g["passed"] is None),
        # bashkit-eval's task score: the weight of the gates passed, of all gates' weight.
        "gates_score": sum(g.get("weight", 1.0) for g in gates if g["passed"] is True),
        "gates_max": sum(g.get("weight", 1.0) for g in gates if g["passed"] is not None),
    }
    if verdict[0] != "error":
        fields["composite_score"] = composite_score(
            run.scenario.spec.evaluation.composite,
            gates,
            judge_score,
            metrics.get("first_try_success_rate"),
        )
    return fields


def _events(run_dir: Path, marker: str, *, structured: bool) -> tuple[list[Event], str]:
    """The run's events, and where its tool calls came from (`events` or `transcript`: the
    lines that start with the agent's command `marker`)."""
    path = run_dir / "events.jsonl"
    events = read_events(path) if path.exists() else []
    if structured or any(isinstance(e, ToolCall) for e in events):
        return events, "events"
    transcript = run_dir / "transcript.raw.txt"
    text = transcript.read_text(encoding="utf-8", errors="replace") if transcript.exists() else ""
    return events + transcript_events(text, marker), "transcript"
