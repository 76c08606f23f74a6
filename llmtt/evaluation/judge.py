"""Layer 3: an LLM grades a run against a weighted rubric; its answer is validated, never trusted.

The prompt carries the task, the guidance the agent was given, the rubric's criteria, the gate
results and the run's (redacted) events, each cut to a configured size with a marker. A
malformed answer gets one repair request; after that the sample records a judge error, which is
the judge's and not the agent's (the run's outcome is `error`) — the evaluation never crashes.
With several samples the run's score is their mean, and their spread is kept.
"""

from __future__ import annotations

import json
import statistics
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from llmtt.errors import LlmttError
from llmtt.providers import ProviderStop, ResolvedModel, answer_text, complete, missing_key
from llmtt.redaction import Redactor
from llmtt.spec.rubric import Rubric
from llmtt.util.text import most_tokens

JUDGE_FORMAT = 2
# The longest answer asked for; the budget holds two (the answer and one repair).
MAX_ANSWER_TOKENS = 2000

SYSTEM = """You grade how well an AI coding agent carried out a task with a command-line tool.
Score each rubric criterion from 0.0 (not at all) to 1.0 (fully), from the evidence given.
Answer with one JSON object and nothing else:
{"scores": {"<criterion id>": <0..1>, ...}, "weighted_score": <0..1>,
 "confidence": <0..1>, "issues": ["..."], "highlights": ["..."]}
weighted_score is the sum of each score times its criterion's weight."""


class JudgeAnswer(BaseModel):
    """What the judge must answer."""

    model_config = ConfigDict(extra="ignore")

    scores: dict[str, float]
    weighted_score: float = Field(ge=0, le=1)
    confidence: float = Field(ge=0, le=1)
    issues: list[str]
    highlights: list[str]


def _mark(passed: bool | None) -> str:
    return "cannot tell" if passed is None else "pass" if passed else "FAIL"


def build_prompt(
    task: str,
    rubric: Rubric,
    gates: list[dict[str, Any]],
    events: list[dict[str, Any]],
    max_chars: int,
    redact: Redactor,
    guidance: str = "",
) -> str:
    """The user message: task, guidance (already redacted and cut: `guidance_section`),
    criteria, gate results and the events, cut to `max_chars`."""
    criteria = "\n".join(
        f"- {c.id} (weight {c.weight:g}): {c.description}" for c in rubric.criteria
    )
    gate_lines = (
        "\n".join(
            f"- gate {g['index']} {g['type']}: {_mark(g['passed'])} — {g['message']}" for g in gates
        )
        or "(no gates)"
    )
    log = _cut(redact("\n".join(event_line(e) for e in events)), max_chars)
    given = f"## Guidance the agent was given\n{guidance}\n\n" if guidance else ""
    return (
        f"## Task given to the agent\n{task.strip()}\n\n{given}## Rubric criteria\n{criteria}\n\n"
        f"## Deterministic checks after the run\n{gate_lines}\n\n## What the agent did\n{log}\n"
    )


def guidance_section(files: list[tuple[str, str]], max_chars: int, redact: Redactor) -> str:
    """The guidance files the agent was given (`(where it was, text)`), redacted and cut past
    `max_chars` in all, saying so: a rubric criterion like "followed the guidance" can only be
    graded by a judge who has read it."""
    text = "\n\n".join(f"### {where}\n{body.rstrip()}" for where, body in files)
    return _cut(redact(text), max_chars)


def _cut(text: str, max_chars: int) -> str:
    if len(text) <= max_chars:
        return text
    return text[:max_chars] + f"\n[... {len(text) - max_chars} characters cut by llmtt ...]"


def event_line(event: dict[str, Any], output_chars: int = 2000) -> str:
    """One event as a line of the log a model is shown (the judge, the paid triage): a tool
    result's output cut past `output_chars`; "" for an event that shows nothing."""
    kind = event.get("event")
    if kind == "tool_call":
        return f"$ {event.get('command')}"
    if kind == "tool_result":
        output = str(event.get("output", ""))
        if len(output) > output_chars:
            output = output[:output_chars] + " [...]"
        return f"[exit {event.get('exit_code')}] {output}".rstrip()
    if kind == "message":
        return f"agent: {event.get('text')}"
    if kind == "complete":
        return f"(agent ended: exit {event.get('exit_code')}, timed out {event.get('timed_out')})"
    return ""


def parse_answer(text: str, rubric: Rubric) -> tuple[JudgeAnswer | None, str | None]:
    """The validated answer, or why it is not one."""
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        return None, "no JSON object in the answer"
    try:
        data = json.loads(text[start : end + 1])
    except (ValueError, RecursionError) as exc:  # RecursionError: nested too deep to read
        return None, f"invalid JSON: {exc}"
    try:
        answer = JudgeAnswer.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        return None, f"{where}: {first['msg']}"
    ids = {c.id for c in rubric.criteria}
    missing = ids - set(answer.scores)
    if missing:
        return None, f"scores lack criteria: {', '.join(sorted(missing))}"
    bad = [k for k in ids if not 0 <= answer.scores[k] <= 1]
    if bad:
        return None, f"scores outside 0..1: {', '.join(sorted(bad))}"
    return answer, None


def ask(
    model: ResolvedModel,
    rubric: Rubric,
    prompt: str,
    threshold: float,
    *,
    max_retries: int = 3,
    backoff_secs: float = 2.0,
    timeout_secs: float = 120.0,
) -> dict[str, Any]:
    """One sample: ask, validate, repair once; its record (never raises for a bad answer;
    a judge that cannot be asked at all, for want of a key, is the user's to fix). A sample
    that has no score carries `error`, and what it cost all the same."""
    missing = missing_key(model, "the judge")
    if missing:
        raise LlmttError(f"the judge ({model.name}) cannot run: {missing}")
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": prompt},
    ]
    record: dict[str, Any] = {
        "model": model.name,
        "attempts": 0,
        "input_tokens": 0,
        "output_tokens": 0,
        "cost_usd": 0.0,
    }
    problem = "no answer"
    for attempt in range(2):
        try:
            response = complete(
                model,
                messages=messages,
                max_retries=max_retries,
                backoff_secs=backoff_secs,
                timeout_secs=timeout_secs,
                max_tokens=MAX_ANSWER_TOKENS,
            )
        except ProviderStop as exc:
            return _failed(record, f"judge error: provider error: {exc}")
        record["attempts"] = attempt + 1
        _add_usage(record, model, response)
        text = answer_text(response)
        answer, problem_or_none = parse_answer(text, rubric)
        if answer is not None:
            return _scored(record, answer, rubric, threshold)
        problem = problem_or_none or "invalid answer"
        messages += [
            {"role": "assistant", "content": text},
            {
                "role": "user",
                "content": f"That answer is not valid ({problem}). Reply with only "
                "the JSON object, with a score for every criterion id.",
            },
        ]
    return _failed(record, f"judge error: malformed answer twice ({problem})")


def hold_for(model: ResolvedModel, prompt: str) -> float:
    """What one sample holds of the budget before it is asked: its prompt asked twice (a
    malformed answer is asked to be repaired) with the longest answers it may give."""
    return _hold(model, most_tokens(prompt))


def hold_for_tokens(model: ResolvedModel, tokens: int) -> float:
    """`hold_for` a prompt of `tokens` tokens, as `llmtt estimate` bounds a question not yet
    written (`judge_layer.judge_bound`)."""
    return _hold(model, tokens)


def _hold(model: ResolvedModel, prompt_tokens: int) -> float:
    tokens = 2 * (prompt_tokens + 500) + MAX_ANSWER_TOKENS
    return model.cost(tokens, 2 * MAX_ANSWER_TOKENS) or 0.0


def _add_usage(record: dict[str, Any], model: ResolvedModel, response: Any) -> None:
    usage = getattr(response, "usage", None)
    tokens_in = int(getattr(usage, "prompt_tokens", 0) or 0)
    tokens_out = int(getattr(usage, "completion_tokens", 0) or 0)
    record["input_tokens"] += tokens_in
    record["output_tokens"] += tokens_out
    cost = model.cost(tokens_in, tokens_out)
    record["cost_usd"] = (
        None if cost is None or record["cost_usd"] is None else round(record["cost_usd"] + cost, 8)
    )


def _scored(
    record: dict[str, Any], answer: JudgeAnswer, rubric: Rubric, threshold: float
) -> dict[str, Any]:
    weighted = round(sum(answer.scores[c.id] * c.weight for c in rubric.criteria), 6)
    note = None
    if abs(weighted - answer.weighted_score) > 0.01:
        note = f"the judge said {answer.weighted_score:g}; recomputed from its scores: {weighted:g}"
    record.update(
        {
            "scores": {c.id: answer.scores[c.id] for c in rubric.criteria},
            "weighted_score": weighted,
            "passed": weighted >= threshold,
            "reported_weighted_score": answer.weighted_score,
            "mismatch": note,
            "confidence": answer.confidence,
            "issues": answer.issues,
            "highlights": answer.highlights,
            "error": None,
        }
    )
    return record


def _failed(record: dict[str, Any], reason: str) -> dict[str, Any]:
    record.update({"scores": {}, "weighted_score": None, "passed": None, "error": reason})
    return record


def verdict(
    samples: list[dict[str, Any]],
    earlier: list[dict[str, Any]],
    wanted: int,
    threshold: float,
    spare: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """judge.json's record from its samples (`wanted` of them asked for), the earlier
    attempts that gave no score and the `spare` samples paid for past `wanted` (kept for when
    it is raised again): the mean of the samples decides (pass at the threshold), `spread`
    says how far they were apart; a sample that erred makes it a judge error. Tokens and cost
    count every paid attempt."""
    spare = spare or []
    for sample in [*samples, *spare]:
        if sample.get("error") is None:
            sample["passed"] = sample["weighted_score"] >= threshold
    paid = [*samples, *earlier, *spare]
    costs = [s.get("cost_usd") for s in paid]
    record: dict[str, Any] = {
        "format": JUDGE_FORMAT,
        "model": samples[0]["model"] if samples else None,
        "threshold": threshold,
        "samples_wanted": wanted,
        "samples": samples,
        "earlier_attempts": earlier,
        **({"spare_samples": spare} if spare else {}),
        "attempts": sum(s.get("attempts", 0) for s in paid),
        "input_tokens": sum(s.get("input_tokens", 0) for s in paid),
        "output_tokens": sum(s.get("output_tokens", 0) for s in paid),
        "cost_usd": None if None in costs else round(sum(c or 0.0 for c in costs), 8),
    }
    errors = [s["error"] for s in samples if s.get("error")]
    scored = [s for s in samples if s.get("error") is None]
    if errors or len(scored) < wanted:
        why = errors[0] if errors else f"{len(scored)} of {wanted} samples scored"
        record.update(
            {"scores": {}, "weighted_score": None, "spread": None, "passed": None}
            | {"reason": why, "error": why}
        )
        return record
    values = [s["weighted_score"] for s in scored]
    mean = round(statistics.fmean(values), 6)
    passed = mean >= threshold
    first = scored[0]
    said = "judge score" if len(scored) == 1 else f"judge score (mean of {len(scored)} samples)"
    record.update(
        {
            "scores": {
                c: round(statistics.fmean(s["scores"][c] for s in scored), 6)
                for c in first["scores"]
            },
            "weighted_score": mean,
            "spread": {
                "min": min(values),
                "max": max(values),
                "sd": round(statistics.stdev(values), 6) if len(values) > 1 else 0.0,
            },
            "mismatch": "; ".join(s["mismatch"] for s in scored if s.get("mismatch")) or None,
            "confidence": round(statistics.fmean(s["confidence"] for s in scored), 6),
            # Each said once, however many samples said it.
            "issues": list(dict.fromkeys(i for s in scored for i in s["issues"])),
            "highlights": list(dict.fromkeys(h for s in scored for h in s["highlights"])),
            "passed": passed,
            "reason": f"{said} {mean:g} {'>=' if passed else '<'} threshold {threshold:g}",
            "error": None,
        }
    )
    return record
