"""Running a scenario's evaluators on one run (AgentDock's runner, specs/agentdock-algorithms.md):
each evaluator is handed its own criteria (those listed under it in the scenario; AgentDock
hands every evaluator every criterion, which let one score another's) and its results for any
other criterion are refused; one that raises gives an error result for its own criteria and
the others still run. Either is an evaluator failure (`errors`), which makes the run's outcome
`error`, said with the scenario file and the evaluator's place in it. The overall score
normalises and weights the results (`base.overall_score`)."""

from __future__ import annotations

import inspect
import json
import os
import time
import traceback
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
            call.agent_tool,
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
                json.dumps(_as_before(input.events), sort_keys=True, default=str),
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


def _as_before(events: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The events as a memo key held them before tool names were normalised (a tool call's
    `tool` was the agent's own name, "bash" when unknown, and there was no `agent_tool`):
    evaluating a run again after that change asks no model the same question twice."""
    out: list[Mapping[str, Any]] = []
    for event in events:
        if event.get("event") == "tool_call" and "agent_tool" in event:
            before = {k: v for k, v in event.items() if k != "agent_tool"}
            before["tool"] = event["agent_tool"] if event["agent_tool"] is not None else "bash"
            event = before
        out.append(event)
    return out


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
    places: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Every evaluator's results, their overall score and the errors, as metrics.json holds
    them under `evaluators`. `refused` lists the evaluators that may not call their model now
    (money switch, key, budget): the run's evaluation is then incomplete. `errors` lists the
    evaluators' failures (one raised, or returned a result for a criterion not its own, or
    something that is no EvaluationResult): the run's outcome is then `error`. `places` says
    where each spec is written (`scenarios/x.yaml:12, evaluation.evaluators[2]`), for them."""
    started = time.monotonic()
    where = list(places) if places is not None else []
    where += [f"evaluation.evaluators[{i}]" for i in range(len(where), len(specs))]
    try:
        return _run(
            specs, input, own, project_root, models, default_model, purse, memo, started, where
        )
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
    places: Sequence[str],
) -> dict[str, Any]:
    criteria = criteria_of(specs)
    results: list[EvaluationResult] = []
    errors: list[str] = []
    refused: list[str] = []
    reused: list[str] = []
    cost: float | None = 0.0
    for index, spec in enumerate(specs):
        named = f"evaluator {spec.type} ({places[index]})"
        cls: type[Evaluator] | None = None
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
                why, held = _may_spend(evaluator, spec, index, input, models, default_model, purse)
                if why is not None:
                    refused.append(why)
                    results.extend(
                        EvaluationResult(c.name, None, spec.type, error=f"did not run: {why}")
                        for c in spec.criteria
                    )
                    continue
            try:
                # Its own criteria only: another evaluator's are not its to score.
                found = evaluator.evaluate(input, list(spec.criteria))
            finally:
                if cls.calls_model:
                    spent = evaluator.cost_usd
                    cost = None if cost is None or spent is None else cost + spent
                    if purse is not None and held is not None:
                        purse.settle(f"{spec.type}#{index}", spent, held)
        except Exception as exc:  # noqa: BLE001 - one evaluator's failure is its own result
            # Where in its own code (not for a class that could not even be loaded: llmtt's
            # message says what is wrong).
            at = _raised_at(exc, cls) if cls is not None else ""
            message = f"{named} raised {type(exc).__name__}: {exc}{at}"
            errors.append(message)
            results.extend(
                EvaluationResult(c.name, None, spec.type, error=message) for c in spec.criteria
            )
            continue
        accepted, refusals = _accepted(found, spec, named)
        errors.extend(refusals)
        results.extend(accepted)
        if asked is not None and memo is not None and not refusals:
            memo.put(asked, accepted)
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


def _accepted(
    found: Any, spec: EvaluatorSpec, named: str
) -> tuple[list[EvaluationResult], list[str]]:
    """Of what an evaluator returned, the results it may give (EvaluationResults for its own
    criteria, with a score of a known type) and why each other thing was refused."""
    own = [c.name for c in spec.criteria]
    if not isinstance(found, Sequence) or isinstance(found, str | bytes):
        return [], [
            f"{named} returned {_shown(found)}, not a list of EvaluationResult: its results "
            "are left out"
        ]
    accepted: list[EvaluationResult] = []
    refusals: list[str] = []
    for result in found:
        if not isinstance(result, EvaluationResult):
            refusals.append(f"{named} returned {_shown(result)}, not an EvaluationResult: left out")
        elif not isinstance(result.criterion, str) or result.criterion not in own:
            refusals.append(
                f"{named} scored {result.criterion!r}, which is not one of its criteria "
                f"({', '.join(own)}): left out"
            )
        elif result.score is not None and not isinstance(result.score, bool | int | float | str):
            refusals.append(
                f"{named} scored {result.criterion!r} with {_shown(result.score)}; a score is a "
                "bool, an int, a float, a str or None: left out"
            )
        else:
            accepted.append(result)
    return accepted, refusals


def _shown(value: Any) -> str:
    """A value an evaluator returned, as a message names it."""
    text = repr(value)
    return f"a {type(value).__name__} ({text[:80]}{'...' if len(text) > 80 else ''})"


def _raised_at(exc: BaseException, cls: type[Evaluator]) -> str:
    """Where an evaluator's exception was raised: the innermost line of the evaluator's own
    module, else the innermost line (" (at my_evaluators.py:12, in evaluate)")."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return ""
    try:
        module: str | None = os.path.realpath(inspect.getfile(cls))
    except (TypeError, OSError):
        module = None
    own = [f for f in frames if module and os.path.realpath(f.filename) == module]
    frame = own[-1] if own else frames[-1]
    path = frame.filename
    try:
        relative = os.path.relpath(path)
        path = relative if not relative.startswith("..") else path
    except ValueError:
        pass
    return f" (at {path}:{frame.lineno}, in {frame.name})"


def evaluator_failures(evaluated: Mapping[str, Any] | None) -> list[str]:
    """The evaluators' failures of a run's evaluation (metrics.json's `evaluators`): when there
    is one, the run's outcome is `error`."""
    return list((evaluated or {}).get("errors") or [])


def _may_spend(
    evaluator: Evaluator,
    spec: EvaluatorSpec,
    index: int,
    input: EvaluationInput,
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
    amount = evaluator.cost_hold(input, list(spec.criteria))
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
