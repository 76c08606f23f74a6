"""Running a scenario's evaluators on one run (AgentDock's runner, specs/agentdock-algorithms.md):
every evaluator is given every criterion and scores the ones it owns; one that raises gives an
error result for its own criteria and the others still run; the overall score normalises and
weights the results (`base.overall_score`)."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from llmtt.errors import LlmttError
from llmtt.evaluation.evaluators.base import (
    EvaluationInput,
    EvaluationResult,
    Evaluator,
    ToolUse,
    normalise,
    overall_score,
)
from llmtt.evaluation.evaluators.registry import evaluator_class
from llmtt.evaluation.interaction import paired_calls
from llmtt.evaluation.shell.target_commands import TargetCommand
from llmtt.events import Event, Message
from llmtt.providers import resolve_model, spending_refusal
from llmtt.spec.config import ModelSpec
from llmtt.spec.evaluation import Criterion, EvaluatorSpec
from llmtt.util.atomic import write_json
from llmtt.util.hashing import hash_value

EVALUATIONS_FORMAT = 1


def evaluation_input(
    prompt: str,
    ground_truth: Any,
    events: Sequence[Event],
    workspace: Path,
    target_commands: Sequence[TargetCommand],
    context: Mapping[str, Any],
) -> EvaluationInput:
    """What the evaluators see of a run: the final response is the last assistant message."""
    messages = [
        {"role": e.role, "text": e.text} for e in events if isinstance(e, Message) and e.text
    ]
    response = next((m["text"] for m in reversed(messages) if m["role"] == "assistant"), None)
    calls = [
        ToolUse(
            call.tool,
            call.command,
            result.exit_code if result else None,
            result.output if result else "",
        )
        for call, result in paired_calls(events)
    ]
    found = [
        {
            "command": c.command,
            "line": c.line or None,
            "subcommand": c.subcommand,
            "exit_code": c.exit_code,
            "help": c.help,
        }
        for c in target_commands
    ]
    return EvaluationInput(
        prompt=prompt,
        response=response,
        ground_truth=ground_truth,
        messages=messages,
        tool_calls=calls,
        events=[e.model_dump(mode="json") for e in events],
        workspace=workspace,
        context={**context, "target_commands": found},
    )


class Memo:
    """The answers of the evaluators that call a model, kept in the run folder: evaluating the
    run again (a gate or another evaluator edited) reuses the answer to the same question (the
    evaluator's spec and model, the prompt, response, ground truth, context and events) rather
    than paying for it twice. Answers with an error are not kept; a file that cannot be read
    is an empty memo."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._old: dict[str, list[dict[str, Any]]] = {}
        self._new: dict[str, list[dict[str, Any]]] = {}
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if isinstance(data, dict) and isinstance(data.get("answers"), dict):
                self._old = data["answers"]
        except (OSError, ValueError):
            pass

    def key(self, spec: EvaluatorSpec, input: EvaluationInput, default_model: str | None) -> str:
        """What identifies the question an evaluator asks of this run."""
        return hash_value(
            [
                spec.model_dump(mode="json"),
                default_model,
                input.prompt,
                input.response,
                json.dumps(input.ground_truth, sort_keys=True, default=str),
                json.dumps(dict(input.context), sort_keys=True, default=str),
                json.dumps(list(input.events), sort_keys=True, default=str),
            ]
        )

    def get(self, key: str) -> list[EvaluationResult] | None:
        """The answer kept for `key` (kept again), or None."""
        found = self._new.get(key) or self._old.get(key)
        if found is None:
            return None
        self._new[key] = found
        return [
            EvaluationResult(
                r["criterion"],
                r["score"],
                r["evaluator"],
                r.get("reasoning", ""),
                r.get("error"),
                r.get("metadata") or {},
            )
            for r in found
        ]

    def put(self, key: str, results: list[EvaluationResult]) -> None:
        """Keep an answer, unless part of it is an error."""
        if results and not any(r.error for r in results):
            self._new[key] = [r.record() for r in results]

    def save(self) -> None:
        """Write the answers this evaluation used or made (older ones are dropped)."""
        if self._new or self._old:
            write_json(self.path, {"format": 1, "answers": self._new})


class Purse(Protocol):
    """The session budget, as the evaluators that call a model draw on it."""

    def hold(self, name: str, amount: float) -> None:
        """Hold `amount` for `name` (LlmttError when the budget cannot cover it)."""

    def settle(self, name: str, cost: float | None, held: float) -> None:
        """What `name` spent (None: unknown, the hold counts), releasing its hold."""


def run_evaluators(
    specs: Sequence[EvaluatorSpec],
    input: EvaluationInput,
    own: Mapping[str, str],
    project_root: Path,
    *,
    models: Mapping[str, ModelSpec] | None = None,
    default_model: str | None = None,
    purse: Purse | None = None,
    memo: Memo | None = None,
) -> dict[str, Any]:
    """Every evaluator's results, their overall score and the errors, as metrics.json holds
    them under `evaluators`. `refused` lists the evaluators that may not call their model now
    (money switch, key, budget): the run's evaluation is then incomplete."""
    started = time.monotonic()
    try:
        return _run(specs, input, own, project_root, models, default_model, purse, memo, started)
    finally:
        if memo is not None:
            memo.save()


def _run(
    specs: Sequence[EvaluatorSpec],
    input: EvaluationInput,
    own: Mapping[str, str],
    project_root: Path,
    models: Mapping[str, ModelSpec] | None,
    default_model: str | None,
    purse: Purse | None,
    memo: Memo | None,
    started: float,
) -> dict[str, Any]:
    criteria = criteria_of(specs)
    known = {c.name for c in criteria}
    results: list[EvaluationResult] = []
    errors: list[str] = []
    refused: list[str] = []
    reused: list[str] = []
    cost: float | None = 0.0
    for index, spec in enumerate(specs):
        try:
            cls = evaluator_class(spec.type, own, project_root)
            evaluator = cls(cls.Config.model_validate(spec.config))
            held = None
            asked = memo.key(spec, input, default_model) if memo and cls.calls_model else None
            if asked is not None and memo is not None and (kept := memo.get(asked)) is not None:
                results.extend(kept)  # the same question, answered before: not paid twice
                reused.append(spec.type)
                continue
            if cls.calls_model:
                why, held = _may_spend(
                    evaluator, spec, index, input, criteria, models, default_model, purse
                )
                if why is not None:
                    refused.append(why)
                    results.extend(
                        EvaluationResult(c.name, None, spec.type, error=f"did not run: {why}")
                        for c in spec.criteria
                    )
                    continue
            try:
                found = evaluator.evaluate(input, criteria)
            finally:
                if cls.calls_model:
                    spent = evaluator.cost_usd
                    cost = None if cost is None or spent is None else cost + spent
                    if purse is not None and held is not None:
                        purse.settle(f"{spec.type}#{index}", spent, held)
            if asked is not None and memo is not None:
                memo.put(asked, [r for r in found if r.criterion in known])
        except Exception as exc:  # noqa: BLE001 - one evaluator's failure is its own result
            message = f"evaluator {spec.type} failed: {type(exc).__name__}: {exc}"
            errors.append(message)
            results.extend(
                EvaluationResult(c.name, None, spec.type, error=message) for c in spec.criteria
            )
            continue
        for result in found:
            if result.criterion in known:
                results.append(result)
            else:
                errors.append(
                    f"evaluator {spec.type} scored {result.criterion!r}, which is no criterion "
                    "of the scenario: left out"
                )
    return {
        "overall_score": overall_score(results, criteria),
        "results": [r.record() for r in results],
        "criteria": [c.model_dump() for c in criteria],
        "errors": errors,
        "refused": refused,
        "reused": reused,
        "cost_usd": None if cost is None else round(cost, 8),
        "duration_ms": round((time.monotonic() - started) * 1000),
        "response": input.response,
        "ground_truth": input.ground_truth,
    }


def _may_spend(
    evaluator: Evaluator,
    spec: EvaluatorSpec,
    index: int,
    input: EvaluationInput,
    criteria: Sequence[Criterion],
    models: Mapping[str, ModelSpec] | None,
    default_model: str | None,
    purse: Purse | None,
) -> tuple[str | None, float | None]:
    """Give an evaluator that calls a model its model, and hold its money: (why it may not
    run, None) or (None, the amount held)."""
    name = getattr(evaluator.config, "model", None) or default_model
    if not name:
        return (
            f"evaluator {spec.type} has no model: set its config.model, or [judge] model in "
            "llmtt.toml",
            None,
        )
    model = resolve_model(name, models or {})
    why = spending_refusal(model, f"evaluator {spec.type}")
    if why is not None:
        return why, None
    evaluator.model = model
    amount = evaluator.cost_hold(input, criteria)
    if purse is not None and not model.free:
        try:
            purse.hold(f"{spec.type}#{index}", amount)
        except LlmttError as exc:
            return f"evaluator {spec.type}: {exc}", None
        return None, amount
    return None, None


def criterion_score(evaluated: Mapping[str, Any], name: str) -> tuple[float | None, str]:
    """A criterion's normalised score (the mean over the evaluators that scored it without an
    error) and what happened, for an `evaluator` gate."""
    scale = next((c["scale"] for c in evaluated.get("criteria", []) if c["name"] == name), "")
    scores: list[float] = []
    problems: list[str] = []
    for result in evaluated.get("results", []):
        if result["criterion"] != name:
            continue
        if result.get("error"):
            problems.append(result["error"])
            continue
        value = normalise(result["score"], scale)
        if value is None:
            problems.append(f"score {result['score']!r} does not normalise on scale {scale}")
        else:
            scores.append(value)
    if not scores:
        return None, "; ".join(problems) or f"no evaluator scored {name!r}"
    return sum(scores) / len(scores), ""


def evaluation_record(
    run_id: str,
    evaluation_id: str,
    prompt: str,
    evaluated: Mapping[str, Any],
    specs: Sequence[EvaluatorSpec],
) -> dict[str, Any]:
    """One line of evaluations.jsonl: AgentDock's aggregated result for a run."""
    return {
        "format": EVALUATIONS_FORMAT,
        "run_id": run_id,
        "evaluation_id": evaluation_id,
        "timestamp": round(time.time(), 3),
        "overall_score": evaluated["overall_score"],
        "results": evaluated["results"],
        "input_snapshot": {
            "prompt": prompt,
            "response": evaluated["response"],
            "ground_truth": evaluated["ground_truth"],
        },
        "config_snapshot": {
            "evaluator_types": [s.type for s in specs],
            "criteria": [c.name for c in criteria_of(specs)],
        },
        "metadata": {"errors": evaluated["errors"], "duration_ms": evaluated["duration_ms"]},
    }


def criteria_of(specs: Sequence[EvaluatorSpec]) -> list[Criterion]:
    """Every criterion of a scenario's evaluators, in order."""
    return [c for spec in specs for c in spec.criteria]
