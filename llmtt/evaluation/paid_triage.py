"""The triage layer: a model asked, once per failed run and set of inputs, why the run failed,
in one line (`[triage] enabled`, off by default). It reads the run's redacted events, bounded,
and the rule-based triage (llmtt.evaluation.triage), whose fields stay; its answer goes to
triage.json, keyed by what it was asked, so the same question is never paid for twice."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from llmtt.errors import LlmttError
from llmtt.evaluation.judge import event_line
from llmtt.plan.keys import TRIAGE_FILE
from llmtt.plan.runs import Run
from llmtt.providers import ResolvedModel
from llmtt.redaction import Redactor
from llmtt.spec.project import Project
from llmtt.util.atomic import read_json, read_jsonl, write_json
from llmtt.util.hashing import hash_value
from llmtt.util.text import most_tokens

TRIAGE_FORMAT = 2  # 2: `answers`, by inputs, and each one's `earlier_attempts`
MAX_ANSWER_TOKENS = 200
OUTPUT_CHARS = 1000  # of each tool result shown
LINE_CHARS = 300  # of the answer kept

SYSTEM = (
    "You read the log of a coding agent that failed a task with a command-line tool. Say in "
    "one line, under 40 words, why it failed: the first wrong command, what the tool answered, "
    "what the agent did next. Reply with that line only."
)


def triage_run(
    project: Project, run: Run, reserve: Callable[[str], None] | None = None
) -> dict[str, Any]:
    """The triage of a run, as written to triage.json: `line` when the model answered (now or
    earlier, for the same inputs), `skipped` when it was not asked and why (the run did not
    fail, or may not spend: `refused`), `gave_up` once `[run] provider_attempts` attempts on
    the same inputs gave no answer. Every answer and failed attempt stays in `answers`, keyed
    by its inputs, across the run's outcome flipping, so none is paid for twice.
    `reserve(prompt)` holds the budget before asking (raising LlmttError when it is spent)."""
    from llmtt.providers import resolve_model, spending_refusal

    assert run.triage is not None
    spec = project.config.triage
    path = run.dir / TRIAGE_FILE
    redact = project.redactor()
    answers = kept_answers(path)
    result = read_json(run.dir / "result.json")
    rule = result.get("triage")
    if result.get("outcome") != "fail" or not rule:
        return _written(path, {"skipped": "the run did not fail"}, answers, redact)
    events = read_jsonl(run.dir / "events.jsonl") if (run.dir / "events.jsonl").exists() else []
    prompt = build_prompt(
        run.scenario.spec.task.prompt, rule, events, spec.max_events_chars, redact
    )
    inputs = hash_value({"key": run.triage, "prompt": prompt})
    known = answers.get(inputs)
    if known is not None and (known.get("line") or known.get("gave_up")):
        # Asked already about these very inputs (answered, or given up on): not paid again.
        return _written(path, known, answers, redact)
    assert spec.model is not None  # the plan refuses [triage] enabled without one
    model = resolve_model(spec.model, project.config.models)
    refusal = spending_refusal(model, "the triage")
    if refusal is None and reserve is not None:
        try:
            reserve(prompt)
        except LlmttError as exc:
            refusal = str(exc)
    if refusal is not None:  # nothing paid: the answers kept stay as they were
        return _written(path, {"skipped": refusal, "refused": True}, answers, redact)
    record = ask(model, prompt)
    record.update(inputs=inputs, rule_line=rule.get("line"))
    if known is not None:  # earlier attempts on these inputs that gave no answer, paid
        earlier = known.pop("earlier_attempts", [])
        record["earlier_attempts"] = [*earlier, known]
    tried = 1 + len(record.get("earlier_attempts", []))
    if not record["line"] and tried >= project.config.run.provider_attempts:
        record["gave_up"] = (
            f"no answer in {tried} attempts ([run] provider_attempts), the last: "
            f"{record['error']}; asked again only when what it is asked changes"
        )
    answers[inputs] = record
    return _written(path, record, answers, redact)


def triage_holds(project: Project, run: Run) -> float | None:
    """What the next `triage_run` of an evaluated run may cost, taking its path up to the
    asking: nothing when the run did not fail or these very inputs were answered (or given up
    on) before, else what its question holds of the budget. None: the model has no price."""
    from llmtt.providers import resolve_model

    assert run.triage is not None and project.config.triage.model is not None
    result = read_json(run.dir / "result.json")
    rule = result.get("triage")
    if result.get("outcome") != "fail" or not rule:
        return 0.0
    prompt = build_prompt(
        run.scenario.spec.task.prompt,
        rule,
        read_jsonl(run.dir / "events.jsonl"),
        project.config.triage.max_events_chars,
        project.redactor(),
    )
    known = kept_answers(run.dir / TRIAGE_FILE).get(
        hash_value({"key": run.triage, "prompt": prompt})
    )
    if known is not None and (known.get("line") or known.get("gave_up")):
        return 0.0
    model = resolve_model(project.config.triage.model, project.config.models)
    return None if model.cost(1, 1) is None else round(cost_hold(model, prompt), 6)


# Of the question besides the task, the events and a gate: its headings and the note of what
# was cut; and of the rules' line, a failed command and the next (each cut at 200 characters),
# the head of its output (400) and the words around them, or the outcome's reason when neither
# a command nor a gate failed (`triage_bound`).
QUESTION_CHARS = 500
RULE_CHARS = 3_000


def triage_bound(project: Project, run: Run) -> float | None:
    """What the triage may cost about a run not yet evaluated: its longest question, asked if
    the run fails: the task as `most_tokens` counts it, and the rest a token a character (as no
    ASCII text counts more; other text may cost up to a token a byte, and is held so): the
    rules' line and the longest gate it may quote, and the events at `[triage]
    max_events_chars`. None: the model has no price."""
    from llmtt.evaluation.judge_layer import GATE_LINE_CHARS, gate_texts
    from llmtt.providers import resolve_model

    assert project.config.triage.model is not None
    model = resolve_model(project.config.triage.model, project.config.models)
    if model.cost(1, 1) is None:
        return None
    gate = max((len(g) + GATE_LINE_CHARS for g in gate_texts(run)), default=0)
    tokens = most_tokens(run.scenario.spec.task.prompt.strip()) + QUESTION_CHARS + RULE_CHARS
    tokens += gate + project.config.triage.max_events_chars + most_tokens(SYSTEM) + 100
    return round(model.cost(tokens, MAX_ANSWER_TOKENS) or 0.0, 6)


def kept_answers(path: Path) -> dict[str, dict[str, Any]]:
    """The answers (and failed attempts) triage.json keeps, by the hash of their inputs."""
    if not path.exists():
        return {}
    kept: dict[str, Any] = read_json(path)
    answers: dict[str, dict[str, Any]] = dict(kept.get("answers") or {})
    if not answers and kept.get("inputs") and "model" in kept:  # format 1: one asked, kept
        answers[kept["inputs"]] = {k: v for k, v in kept.items() if k != "answers"}
    return answers


def spent(path: Path) -> float | None:
    """What the triage of a run has cost in all, over every answer and attempt it keeps (None:
    nothing paid, or no price known)."""
    costs = [
        attempt.get("cost_usd")
        for answer in kept_answers(path).values()
        for attempt in [answer, *answer.get("earlier_attempts", [])]
    ]
    known = [float(c) for c in costs if c is not None]
    return round(sum(known), 8) if known else None


def _written(
    path: Path, record: dict[str, Any], answers: dict[str, dict[str, Any]], redact: Redactor
) -> dict[str, Any]:
    """triage.json: this time's record at the top (what the reports read), the answers kept
    beside it."""
    record = {**record, "format": TRIAGE_FORMAT}
    write_json(path, {**record, "answers": answers}, redact)
    return record


def build_prompt(
    task: str, rule: dict[str, Any], events: list[dict[str, Any]], max_chars: int, redact: Redactor
) -> str:
    """The question: the task, what the rules found, and the events cut to `max_chars`."""
    lines = (event_line(e, OUTPUT_CHARS) for e in events)
    log = redact("\n".join(line for line in lines if line))
    if len(log) > max_chars:
        log = log[:max_chars] + f"\n[... {len(log) - max_chars} characters cut by llmtt ...]"
    return (
        f"## Task given to the agent\n{task.strip()}\n\n"
        f"## What llmtt's rules found\n{redact(str(rule.get('line') or ''))}\n\n"
        f"## What the agent did\n{log}\n"
    )


def ask(model: ResolvedModel, prompt: str) -> dict[str, Any]:
    """One short call; the record with the answer's first line, or the provider's error."""
    from llmtt.providers import ProviderStop, answer_text, complete

    record: dict[str, Any] = {
        "format": TRIAGE_FORMAT,
        "model": model.name,
        "line": None,
        "error": None,
        "input_tokens": 0,
        "output_tokens": 0,
        "cost_usd": None,
    }
    try:
        response = complete(
            model,
            messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}],
            max_retries=2,
            backoff_secs=2.0,
            timeout_secs=60.0,
            max_tokens=MAX_ANSWER_TOKENS,
        )
    except ProviderStop as exc:
        record["error"] = f"provider error: {exc}"
        return record
    usage = getattr(response, "usage", None)
    record["input_tokens"] = int(getattr(usage, "prompt_tokens", 0) or 0)
    record["output_tokens"] = int(getattr(usage, "completion_tokens", 0) or 0)
    record["cost_usd"] = model.cost(record["input_tokens"], record["output_tokens"])
    text = answer_text(response)
    line = next((" ".join(part.split()) for part in text.splitlines() if part.strip()), "")
    if line:
        record["line"] = line[:LINE_CHARS]
    else:
        record["error"] = "the model gave an empty answer"
    return record


def cost_hold(model: ResolvedModel, prompt: str) -> float:
    """What one triage call holds of the budget: its prompt (`most_tokens`) and the longest
    answer it may give."""
    return model.cost(most_tokens(prompt) + most_tokens(SYSTEM) + 100, MAX_ANSWER_TOKENS) or 0.0
