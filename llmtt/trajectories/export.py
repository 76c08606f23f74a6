"""A run as an ATIF trajectory (`llmtt export atif`), from the files in its folder.

Step 1 is the user's prompt. Each model turn of the agent is an agent step: its message, its
tool calls (the agent's own tool names; a shell line as `{"command": ...}`, another tool's input
as it was given) and, in the same step, what each call gave back. A turn's tokens are the
step's `metrics`: from the model gateway's record of the run (wire.jsonl) where it holds one
answered request per turn the agent reported, else as the agent reported them (events.jsonl).
The final metrics are the run's (metrics.json: what the wire saw, when the run went through
the gateway). What ATIF has no field for is kept under `extra.llmtt`: each call's exit code,
how the agent's process ended, a turn's cache writes, the run's identity and outcome.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

from llmtt.events import SHELL
from llmtt.gateway.usage import FIGURES, of_loop, read_wire
from llmtt.trajectories.atif import SCHEMA_VERSION, Trajectory
from llmtt.util.atomic import read_json, read_jsonl


def export_run(run_dir: Path, prompt: str, llmtt_version: str) -> dict[str, Any]:
    """The trajectory of the run in `run_dir` (its agent layer done), as ATIF JSON, validated."""
    record = read_json(run_dir / "run.json")
    events = [e for e in read_jsonl(run_dir / "events.jsonl") if isinstance(e, dict)]
    metrics_path = run_dir / "metrics.json"
    metrics = read_json(metrics_path) if metrics_path.exists() else {}
    result_path = run_dir / "result.json"
    result = read_json(result_path) if result_path.exists() else {}
    steps = _Steps(_iso(record.get("started_at")), record.get("model"))
    steps.user(prompt)
    per_request = _wire_turns(run_dir, events)
    ended: dict[str, Any] = {}
    for event in events:
        kind = event.get("event")
        when = _iso(event.get("ts"))
        if kind == "message":
            steps.message(str(event.get("role")), str(event.get("text", "")), when)
        elif kind == "tool_call":
            steps.call(event, when)
        elif kind == "tool_result":
            steps.result(event)
        elif kind == "usage" and not event.get("side") and not event.get("total"):
            steps.usage(per_request.pop(0) if per_request else _figures(event), when)
        elif kind == "complete":
            ended = {k: event.get(k) for k in ("exit_code", "duration_secs", "timed_out")}
            ended.update(natural_stop=event.get("natural_stop"), reason=event.get("reason"))
    out: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "session_id": str(record.get("run_id")),
        "agent": {
            "name": str(record.get("agent")),
            "version": str((record.get("versions") or {}).get("agent") or "unknown"),
            **({"model_name": record["model"]} if record.get("model") else {}),
        },
        "steps": steps.steps,
        "notes": f"exported by llmtt {llmtt_version} from run {record.get('run_id')}",
        "final_metrics": _final(metrics, len(steps.steps)),
        "extra": {"llmtt": _identity(record, result, ended)},
    }
    Trajectory.model_validate(out)  # what is written is what Harbor's models accept
    return out


class _Steps:
    """The steps being made, in order."""

    def __init__(self, started: str | None, model: str | None) -> None:
        self.steps: list[dict[str, Any]] = []
        self.started = started
        self.model = model
        self.current: dict[str, Any] | None = None  # the agent step taking calls and usage
        self.by_call: dict[str, dict[str, Any]] = {}
        self.early: list[dict[str, Any]] = []  # usage reported before its turn's step

    def _add(self, step: dict[str, Any]) -> dict[str, Any]:
        step["step_id"] = len(self.steps) + 1
        self.steps.append(step)
        return step

    def user(self, prompt: str) -> None:
        self._add({"source": "user", "message": prompt, **_at(self.started)})
        self.current = None

    def _agent(self, when: str | None) -> dict[str, Any]:
        step = self._add({"source": "agent", "message": "", **_at(when)})
        self.current = step
        for figures in self.early:
            self._count(step, figures)
        self.early = []
        return step

    def message(self, role: str, text: str, when: str | None) -> None:
        if role not in ("assistant", "agent"):
            self._add({"source": "user" if role == "user" else "system", "message": text})
            self.current = None
            return
        step = self.current
        if step is None or step["message"] or step.get("tool_calls"):
            step = self._agent(when)
        step["message"] = text

    def call(self, event: dict[str, Any], when: str | None) -> None:
        step = self.current
        if step is None or step.get("observation"):  # answered calls: a new turn
            step = self._agent(when)
        call_id = str(event.get("id") or f"call_{len(self.by_call) + 1}")
        name = event.get("agent_tool") or event.get("tool") or SHELL
        step.setdefault("tool_calls", []).append(
            {"tool_call_id": call_id, "function_name": name, "arguments": _arguments(event)}
        )
        self.by_call[call_id] = step

    def result(self, event: dict[str, Any]) -> None:
        call_id = event.get("id")
        step = self.by_call.get(str(call_id)) if call_id is not None else None
        if step is None:
            step = self.current or self._agent(None)
            call_id = None  # answers no call this step holds
        results = step.setdefault("observation", {"results": []})["results"]
        results.append({"source_call_id": call_id, "content": str(event.get("output", ""))})
        if call_id is not None:
            codes = step.setdefault("extra", {"llmtt": {"exit_codes": {}}})["llmtt"]["exit_codes"]
            codes[call_id] = event.get("exit_code")

    def usage(self, figures: dict[str, Any], when: str | None) -> None:
        if self.current is None:
            self.early.append(figures)  # the turn's step is still to come
        else:
            self._count(self.current, figures)

    def _count(self, step: dict[str, Any], figures: dict[str, Any]) -> None:
        """One model request's figures added to the step's."""
        step["llm_call_count"] = step.get("llm_call_count", 0) + 1
        if self.model:
            step["model_name"] = self.model
        metrics = step.setdefault(
            "metrics",
            {"prompt_tokens": 0, "completion_tokens": 0, "cached_tokens": 0},
        )
        uncached, output, read, write = (int(figures.get(n) or 0) for n in FIGURES)
        metrics["prompt_tokens"] += uncached + read + write
        metrics["completion_tokens"] += output
        metrics["cached_tokens"] += read
        if write:
            extra = metrics.setdefault("extra", {"llmtt": {"cache_write_tokens": 0}})
            extra["llmtt"]["cache_write_tokens"] += write
        cost = figures.get("cost_usd")
        if "cost_usd" not in metrics or metrics["cost_usd"] is not None:
            known = metrics.get("cost_usd", 0.0)
            metrics["cost_usd"] = None if cost is None else round(known + float(cost), 8)


def _arguments(event: dict[str, Any]) -> dict[str, Any]:
    """A call's ATIF arguments: a shell line as `command`, another tool's JSON input as it was."""
    command = str(event.get("command", ""))
    if event.get("tool", SHELL) != SHELL:
        try:
            given = json.loads(command)
        except ValueError:
            given = None
        if isinstance(given, dict):
            return given
    return {"command": command}


def _figures(event: dict[str, Any]) -> dict[str, Any]:
    return {n: event.get(n) for n in (*FIGURES, "cost_usd")}


def _wire_turns(run_dir: Path, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each turn's figures as the gateway saw them, when its record holds exactly one answered
    request of the agent loop per turn the agent reported; else none (the events' own)."""
    records = read_wire(run_dir)
    if not records:
        return []
    loop = [
        r for r in records if of_loop(r) and isinstance(r.get("status"), int) and r["status"] < 400
    ]
    reported = sum(
        1 for e in events if e.get("event") == "usage" and not e.get("side") and not e.get("total")
    )
    if len(loop) != reported:
        return []
    return [_figures(r) for r in loop]


def _final(metrics: dict[str, Any], steps: int) -> dict[str, Any]:
    """The run's totals (metrics.json), in ATIF's terms: prompt tokens include cached ones."""
    if not metrics:
        return {"total_steps": steps}
    uncached, output, read, write = (int(metrics.get(n) or 0) for n in FIGURES)
    return {
        "total_prompt_tokens": uncached + read + write,
        "total_completion_tokens": output,
        "total_cached_tokens": read,
        "total_cost_usd": metrics.get("cost_usd"),
        "total_steps": steps,
        "extra": {
            "llmtt": {
                "turns": metrics.get("turns"),
                "cache_write_tokens": write,
                "side_requests": metrics.get("side_requests"),
                "cost_source": metrics.get("cost_source"),
            }
        },
    }


def _identity(
    record: dict[str, Any], result: dict[str, Any], ended: dict[str, Any]
) -> dict[str, Any]:
    """Where the run came from, how its agent ended, and what llmtt made of it."""
    keys = ("run_id", "scenario", "agent", "model", "variant", "repeat", "status", "error")
    out: dict[str, Any] = {k: record.get(k) for k in keys}
    out["ended"] = ended or None
    if result:
        out["outcome"] = result.get("outcome")
        out["outcome_reason"] = result.get("outcome_reason")
    return out


def _iso(value: Any) -> str | None:
    """A time as ISO 8601: an event's `ts` (seconds since the epoch) or a string already."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return dt.datetime.fromtimestamp(value, dt.UTC).isoformat(timespec="milliseconds")
    return value if isinstance(value, str) else None


def _at(when: str | None) -> dict[str, Any]:
    return {"timestamp": when} if when else {}
