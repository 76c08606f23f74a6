"""The evaluate layer of a run: metrics, gates, outcome -> metrics.json, gates.json, result.json."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from llmtt.atomic import read_json, write_json
from llmtt.evaluation.gates import GateContext, run_gates
from llmtt.evaluation.interaction import find_target_commands, interaction_metrics
from llmtt.evaluation.outcome import composite_score, decide
from llmtt.evaluation.transcript import transcript_events
from llmtt.events import Event, ToolCall, read_events
from llmtt.plan import Run
from llmtt.project import Project
from llmtt.results import append_result, result_record
from llmtt.workspace import Workspace

METRICS_FORMAT = 1


def evaluate_run(project: Project, run: Run) -> dict[str, Any]:
    """Evaluate a carried-out run (or record why it could not be); return its result record."""
    info = read_json(run.dir / "run.json")
    pattern = run.target.effective_pattern()
    if info["status"] == "error":
        gates: list[dict[str, Any]] = []
        metrics: dict[str, Any] = {
            "outcome": "error",
            "outcome_reason": f"run could not be carried out: {info['error']}",
        }
    else:
        events, source = _events(run.dir, pattern, structured=info.get("structured_events", True))
        free = bool(info.get("free"))
        metrics = interaction_metrics(events, pattern, free=free)
        metrics["source"] = source
        ws = Workspace(run.dir, run.dir / "workspace", run.dir / "home")
        ctx = GateContext(
            workspace=ws.workspace,
            env=ws.env(run.target.env),
            timeout_secs=project.config.run.gate_timeout_secs,
            target_commands=find_target_commands(events, pattern),
        )
        gates = run_gates(run.scenario.spec.evaluation.gates, ctx)
        outcome, reason = decide(gates, None)
        metrics["outcome"] = outcome
        metrics["outcome_reason"] = reason
        metrics["composite_score"] = composite_score(
            run.scenario.spec.evaluation.composite, gates, None, metrics["first_try_success_rate"]
        )
    metrics = {"format": METRICS_FORMAT, "run_id": run.run_id, **metrics}
    metrics["gates_passed"] = sum(1 for g in gates if g["passed"])
    metrics["gates_total"] = len(gates)
    write_json(
        run.dir / "gates.json", {"format": METRICS_FORMAT, "run_id": run.run_id, "gates": gates}
    )
    write_json(run.dir / "metrics.json", metrics)
    record = result_record(run, info, metrics)
    write_json(run.dir / "result.json", record)
    if info["status"] != "error":
        append_result(project.results_dir / "results.jsonl", record)
    return record


def _events(run_dir: Path, pattern: str | None, *, structured: bool) -> tuple[list[Event], str]:
    """The run's events, and where its tool calls came from (`events` or `transcript`)."""
    path = run_dir / "events.jsonl"
    events = read_events(path) if path.exists() else []
    if structured or any(isinstance(e, ToolCall) for e in events):
        return events, "events"
    transcript = run_dir / "transcript.raw.txt"
    text = transcript.read_text(encoding="utf-8", errors="replace") if transcript.exists() else ""
    return events + transcript_events(text, pattern), "transcript"
