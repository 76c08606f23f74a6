"""The judge layer of a run: the guidance the agent was given, the judge's samples (each held
in the budget before it is asked), and the run's outcome from them.

A judge that cannot answer is the judge's failure, not the agent's: the run's outcome is
`error` (`fail` when a gate failed or the agent timed out: the judge could not change that)
and the layer stays pending, so the next `doit run` asks the judge again, and only for the
samples it has not scored yet, until it has failed `[judge] attempts` times at the same
question. Every paid attempt stays on record in judge.json.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from llmtt.errors import LlmttError
from llmtt.evaluation.evaluate import Records, settle
from llmtt.evaluation.evaluators.runner import evaluator_failures
from llmtt.evaluation.judge import JUDGE_FORMAT
from llmtt.evaluation.outcome import JUDGE_GAVE_UP, doomed
from llmtt.plan.keys import JUDGE_VERSION
from llmtt.plan.runs import Run
from llmtt.providers import ResolvedModel, spending_refusal
from llmtt.spec.config import CONTROL_VARIANT
from llmtt.spec.project import Project
from llmtt.spec.skills import skill_files
from llmtt.util.atomic import read_json, write_json
from llmtt.util.hashing import hash_value
from llmtt.util.text import most_tokens


class JudgePurse(Protocol):
    """The session budget, as the judge's samples draw on it."""

    def hold(self, name: str, amount: float) -> None:
        """Hold `amount` for `name` (LlmttError when the budget cannot cover it)."""

    def settle(self, name: str, cost: float | None, held: float) -> None:
        """What `name` spent (None: unknown, the hold counts), releasing its hold."""


def guidance_files(
    project: Project, variant: str | None, info: dict[str, Any]
) -> list[tuple[str, str]]:
    """`(where the agent found it, its text)` for each file of guidance the run was given: the
    variant's `files`, and the guidance and skills placed for its agent (run.json `placed`),
    read from the project (a change of them re-runs the agent, so they are what it saw)."""
    found: list[tuple[str, Path]] = []
    spec = project.config.variants.get(variant or "")
    if spec is not None and variant != CONTROL_VARIANT:
        found += [(dest, project.root / src) for dest, src in spec.files.items()]
    for entry in info.get("placed") or []:
        source = project.root / entry["source"]
        if entry["kind"] == "guidance":
            found.append((entry["path"], source))
        else:
            found += [
                (f"{entry['path']}/{f.relative_to(source).as_posix()}", f)
                for f in (skill_files(source) if source.is_dir() else [])
            ]
    return [(where, _text(path)) for where, path in found]


def _text(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        return "(not text: not shown)"
    except OSError as exc:
        return f"(could not be read: {exc.strerror or exc})"


def judge_run(
    project: Project,
    run: Run,
    records: Records,
    purse: JudgePurse | None = None,
    *,
    forgotten: bool = False,
) -> dict[str, Any]:
    """Layer 3 of a run, then its outcome.

    Each sample the judge is asked for is held in `purse` first, and judge.json is written
    after each one. A judge that may not run (no LLMTT_ENABLED=1 for a paid model, no key, no
    budget) or could not answer leaves the run's outcome `error` with the reason, the reports
    still written. After `[judge] attempts` failed attempts at the same question the judge is
    not asked again (it gave up) until the question changes or, `forgotten`, the user made
    doit forget the layer.
    """
    assert run.judge is not None
    info = read_json(run.dir / "run.json")
    metrics = read_json(run.dir / "metrics.json")
    gates = read_json(run.dir / "gates.json")["gates"]
    redact = project.redactor()
    path = run.dir / "judge.json"
    before = read_json(path) if path.exists() else {}
    skipped = _not_asked(run, info, gates)
    if skipped is not None:
        fields, note = skipped
        write_json(path, {"format": JUDGE_FORMAT, **fields, **_carried(before)}, redact)
        return settle(project, run, records, info, metrics, gates, None, note=note)
    model, rubric, prompt = _question(project, run, info, gates)
    # What was paid for this very question before (same prompt, system, model and judge
    # version): scored samples are kept; failed ones, and every sample of an earlier
    # question, are money spent, kept on record.
    key = hash_value([JUDGE_VERSION, model.name, prompt])
    kept, earlier = _paid_before(before, key)
    if forgotten:
        # `doit forget <run>:judge`: the attempts that failed before do not stop it now.
        for attempt in earlier:
            attempt["forgiven"] = True
    # Fewer samples than were paid for: the first ones count, the rest are kept (and their
    # cost counted) for when the number is raised again.
    samples, spare = kept[: run.judge.samples], kept[run.judge.samples :]

    def keep(asked: list[dict[str, Any]]) -> None:
        write_json(path, _record(run, asked, earlier, key, spare), redact)

    refusal, stop = _evaluators_waiting(metrics), None
    if refusal is None and len(samples) < run.judge.samples:
        stop = _stop(run, earlier, key, before, doomed(gates, info))
        if stop is None:
            # Only a sample to be asked needs the paid switch: settling again on samples
            # already scored (a threshold or samples edit) asks nothing.
            refusal = spending_refusal(model, "the judge")
        if stop is None and refusal is None:
            refusal = _ask_missing(model, rubric, prompt, run, samples, purse, key, keep)
    record = _record(run, samples, earlier, key, spare)
    if stop is not None:
        record.update(stop)
    elif record.get("error") and len(_failed(earlier + samples, key)) >= run.judge.attempts:
        record["error"] = record["reason"] = (
            f"{record['error']}; the judge is not asked again: {_again(run)}"
        )
    if refusal is not None:
        record["skipped"] = refusal
        record["error"] = record["reason"] = f"the judge did not run: {refusal}"
        write_json(path, record, redact)
        # What was paid for before the refusal stays in the run's row (its judge cost).
        paid = record if record["samples"] or record["earlier_attempts"] else None
        return settle(project, run, records, info, metrics, gates, paid, refused=refusal)
    write_json(path, record, redact)
    return settle(project, run, records, info, metrics, gates, record)


def _not_asked(
    run: Run, info: dict[str, Any], gates: list[dict[str, Any]]
) -> tuple[dict[str, Any], str | None] | None:
    """judge.json's fields and the outcome's note when the judge is not to be asked at all
    (the run was not carried out, or `[judge] when` leaves it out), else None."""
    assert run.judge is not None
    if info["status"] == "error":
        return {"skipped": "run could not be carried out"}, None
    if run.judge.when == "gates_pass" and not all(g["passed"] for g in gates):
        # The seed's rule: the judge grades runs whose gates passed; this one fails on its
        # gates, and nothing is paid for a verdict that could not change that.
        failed = sum(not g["passed"] for g in gates)
        why = (
            f"the judge was not asked: {failed} gate(s) failed, and [judge] when is "
            '"gates_pass" (set it to "always" to judge every run)'
        )
        return {"skipped": why, "not_asked": True}, why
    return None


def _question(
    project: Project, run: Run, info: dict[str, Any], gates: list[dict[str, Any]]
) -> tuple[ResolvedModel, Any, str]:
    """The judge's model, the run's rubric and the prompt the judge is asked."""
    from llmtt.evaluation.judge import build_prompt, guidance_section
    from llmtt.providers import resolve_model
    from llmtt.util.atomic import read_jsonl

    assert run.judge is not None
    redact = project.redactor()
    model = resolve_model(run.judge.model, project.config.models)
    rubric = project.rubrics[run.judge.rubric]
    settings = project.config.judge
    guidance = guidance_section(
        guidance_files(project, run.variant, info), settings.max_guidance_chars, redact
    )
    prompt = build_prompt(
        run.scenario.spec.task.prompt,
        rubric,
        gates,
        read_jsonl(run.dir / "events.jsonl"),
        settings.max_transcript_chars,
        redact,
        guidance,
    )
    return model, rubric, prompt


def judge_holds(
    project: Project, run: Run, *, forgotten: bool = False, fresh: bool = False
) -> float | None:
    """What the next `judge_run` of a run whose agent is done may cost: each sample it would
    ask at what it holds of the budget (`hold_for`, the most a sample may cost), taking the
    same path as `judge_run` up to the asking: nothing when the judge is not to be asked
    (`[judge] when`), an evaluator waits, or it gave up on this question (`forgotten`: the
    user made doit forget the layer, and its failed attempts no longer count). `fresh`: the
    run is evaluated again first, so its question is new and every sample is asked (priced
    from its files as they are now). None: the judge's model has no price."""
    from llmtt.evaluation.judge import hold_for

    assert run.judge is not None
    info = read_json(run.dir / "run.json")
    metrics = read_json(run.dir / "metrics.json")
    gates = read_json(run.dir / "gates.json")["gates"]
    path = run.dir / "judge.json"
    before = read_json(path) if path.exists() else {}
    if not fresh and (_not_asked(run, info, gates) or _evaluators_waiting(metrics)):
        return 0.0
    model, _, prompt = _question(project, run, info, gates)
    if model.cost(1, 1) is None:
        return None
    missing = run.judge.samples
    if not fresh:
        key = hash_value([JUDGE_VERSION, model.name, prompt])
        kept, earlier = _paid_before(before, key)
        if forgotten:
            earlier = [{**attempt, "forgiven": True} for attempt in earlier]
        missing = max(0, run.judge.samples - len(kept))
        if missing and _stop(run, earlier, key, before, doomed(gates, info)) is not None:
            return 0.0
    return round(missing * hold_for(model, prompt), 6)


# Of the judge's question besides the task, the rubric, the transcript and the guidance: its
# headings and the notes of what was cut; and a gate's line besides the gate itself (its
# message: what it found, up to 200 characters of output, escaped) (`judge_bound`).
HEADINGS_CHARS = 1_000
GATE_LINE_CHARS = 1_500


def judge_bound(project: Project, run: Run) -> float | None:
    """What the judge may cost about a run still to be carried out: each sample at what it
    holds of the budget for the longest question it may be asked: the task, the rubric and the
    gates as `most_tokens` counts them, and the transcript and guidance at their `[judge]` caps,
    a token a character (as no ASCII text counts more; other text may cost up to a token a
    byte, and is held so). None: its model has no price."""
    from llmtt.evaluation.judge import hold_for_tokens
    from llmtt.providers import resolve_model

    assert run.judge is not None
    model = resolve_model(run.judge.model, project.config.models)
    if model.cost(1, 1) is None:
        return None
    settings = project.config.judge
    rubric = project.rubrics[run.judge.rubric].model_dump_json()
    gates = gate_texts(run)
    known = run.scenario.spec.task.prompt + rubric + "".join(gates)
    tokens = most_tokens(known) + HEADINGS_CHARS + GATE_LINE_CHARS * len(gates)
    tokens += settings.max_transcript_chars + settings.max_guidance_chars
    return round(run.judge.samples * hold_for_tokens(model, tokens), 6)


def gate_texts(run: Run) -> list[str]:
    """The run's gates as a question about it may quote them, the target's health check last
    when it is run as a gate: what `judge_bound` and the triage's bound count."""
    gates = [g.model_dump_json() for g in run.scenario.spec.evaluation.gates]
    if run.target.health_check_gate:
        gates.append(run.target.health_check or "")  # run as a last gate
    return gates


def _evaluators_waiting(metrics: dict[str, Any]) -> str | None:
    """Why the judge is not asked while an evaluator waits: the run stays pending for it, and
    the judge would be paid for twice."""
    evaluated = metrics.get("evaluators") or {}
    if evaluated.get("refused"):
        return "an evaluator did not run: " + "; ".join(evaluated["refused"])
    if evaluator_failures(evaluated):
        return "an evaluator failed: " + "; ".join(evaluator_failures(evaluated))
    return None


def _again(run: Run) -> str:
    assert run.judge is not None
    return (
        f"it failed {run.judge.attempts} attempts at this question ([judge] attempts); it is "
        "asked again when the rubric, the judge model or its prompt changes, or after "
        f"`doit forget {run.run_id}:judge`"
    )


def _stop(
    run: Run,
    earlier: list[dict[str, Any]],
    key: str,
    before: dict[str, Any],
    doomed: bool,
) -> dict[str, Any] | None:
    """Why the judge is not asked although a sample is missing (judge.json's fields for it),
    or None: it gave up on this question, or it failed before about a run that fails whatever
    it says (a failed gate, a timeout)."""
    assert run.judge is not None
    failed = _failed(earlier, key)
    if len(failed) >= run.judge.attempts:
        why = f"{JUDGE_GAVE_UP} after {len(failed)} attempts (the last: {failed[-1]['error']}); "
        why += _again(run).split("; ", 1)[1]
        return {"gave_up": why, "error": why, "reason": why}
    if doomed and before.get("error"):
        # Its verdict could not change the outcome: the error stands, beside the agent's fail.
        return {"error": str(before["error"]), "reason": str(before["error"])}
    return None


def _failed(attempts: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    """The attempts at question `key` that gave no score and count toward giving up."""
    return [
        a
        for a in attempts
        if a.get("question") == key and a.get("error") is not None and not a.get("forgiven")
    ]


def _attempts(before: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A judge.json's samples (its scored and failed ones, spare ones too) and its earlier
    attempts, each marked with the question it was asked (a record written before the
    samples, format 1, is one attempt)."""
    question = before.get("question")
    if "samples" in before:
        asked = [*(before.get("samples") or []), *(before.get("spare_samples") or [])]
    elif before.get("attempts"):
        fields = ("model", "attempts", "input_tokens", "output_tokens", "cost_usd", "error")
        asked = [{k: before[k] for k in (*fields, "weighted_score") if k in before}]
    else:
        asked = []
    earlier = [dict(a) for a in before.get("earlier_attempts") or [] if isinstance(a, dict)]
    for attempt in [*asked, *earlier]:
        attempt.setdefault("question", question)
    return asked, earlier


def _carried(before: dict[str, Any]) -> dict[str, Any]:
    """judge.json's fields that keep what was paid for when the judge is not asked now."""
    asked, earlier = _attempts(before)
    paid = [*earlier, *asked]
    if not paid:
        return {}
    costs = [a.get("cost_usd") for a in paid]
    return {
        "earlier_attempts": paid,
        "cost_usd": None if None in costs else round(sum(c or 0.0 for c in costs), 8),
    }


def _paid_before(
    before: dict[str, Any], key: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The scored samples a judge.json holds for the question `key`, and every other paid
    attempt: its earlier ones, its failed samples, the samples of another question."""
    asked, earlier = _attempts(before)
    scored = [s for s in asked if s["question"] == key and s.get("error") is None]
    return scored, [*earlier, *(s for s in asked if not any(s is t for t in scored))]


def _ask_missing(
    model: ResolvedModel,
    rubric: Any,
    prompt: str,
    run: Run,
    samples: list[dict[str, Any]],
    purse: JudgePurse | None,
    key: str,
    keep: Callable[[list[dict[str, Any]]], None],
) -> str | None:
    """Ask the judge for the samples not yet scored, each held in the budget first, appending
    them to `samples` and keeping each (`keep`, so a kill loses none paid for); stops at the
    first that fails (asking on would pay for answers a broken judge cannot give). Returns
    why the judge may not be asked, or None."""
    from llmtt.evaluation.judge import ask, hold_for

    assert run.judge is not None
    for index in range(len(samples), run.judge.samples):
        name = f"sample{index + 1}"
        amount = hold_for(model, prompt)
        if purse is not None:
            try:
                purse.hold(name, amount)
            except LlmttError as exc:
                return str(exc)
        sample: dict[str, Any] | None = None
        try:
            sample = ask(model, rubric, prompt, run.judge.threshold)
        finally:
            if purse is not None:
                purse.settle(name, sample.get("cost_usd") if sample else None, amount)
        sample["question"] = key
        samples.append(sample)
        keep(samples)
        if sample.get("error") is not None:
            break
    return None


def _record(
    run: Run,
    samples: list[dict[str, Any]],
    earlier: list[dict[str, Any]],
    key: str,
    spare: list[dict[str, Any]],
) -> dict[str, Any]:
    from llmtt.evaluation.judge import verdict

    assert run.judge is not None
    record = verdict(samples, earlier, run.judge.samples, run.judge.threshold, spare)
    record["model"] = run.judge.model
    record["rubric"] = str(run.judge.rubric)
    record["question"] = key
    return record
