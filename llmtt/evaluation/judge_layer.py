"""The judge layer of a run: the guidance the agent was given, the judge's samples (each held
in the budget before it is asked), and the run's outcome from them.

A judge that cannot answer is the judge's failure, not the agent's: the run's outcome is
`error` and the layer stays pending, so the next `doit run` asks the judge again, and only
for the samples it has not scored yet. Every paid attempt stays on record in judge.json.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from llmtt.errors import LlmttError
from llmtt.evaluation.evaluate import Records, settle
from llmtt.evaluation.evaluators.runner import evaluator_failures
from llmtt.plan.keys import JUDGE_VERSION
from llmtt.plan.runs import Run
from llmtt.providers import ResolvedModel, spending_refusal
from llmtt.spec.config import CONTROL_VARIANT
from llmtt.spec.project import Project
from llmtt.spec.skills import skill_files
from llmtt.util.atomic import read_json, write_json
from llmtt.util.hashing import hash_value


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
    project: Project, run: Run, records: Records, purse: JudgePurse | None = None
) -> dict[str, Any]:
    """Layer 3 of a run, then its outcome.

    Each sample the judge is asked for is held in `purse` first. A judge that may not run (no
    LLMTT_ENABLED=1 for a paid model, no key, no budget) or could not answer leaves the run's
    outcome `error` with the reason, the reports still written.
    """
    from llmtt.evaluation.judge import build_prompt, guidance_section
    from llmtt.providers import resolve_model
    from llmtt.util.atomic import read_jsonl

    assert run.judge is not None
    info = read_json(run.dir / "run.json")
    metrics = read_json(run.dir / "metrics.json")
    gates = read_json(run.dir / "gates.json")["gates"]
    redact = project.redactor()
    if info["status"] == "error":
        write_json(run.dir / "judge.json", {"format": 1, "skipped": "run could not be carried out"})
        return settle(project, run, records, info, metrics, gates, None)
    if run.judge.when == "gates_pass" and not all(g["passed"] for g in gates):
        # The seed's rule: the judge grades runs whose gates passed; this one fails on its
        # gates, and nothing is paid for a verdict that could not change that.
        failed = sum(not g["passed"] for g in gates)
        why = (
            f"the judge was not asked: {failed} gate(s) failed, and [judge] when is "
            '"gates_pass" (set it to "always" to judge every run)'
        )
        write_json(run.dir / "judge.json", {"format": 1, "skipped": why, "not_asked": True})
        return settle(project, run, records, info, metrics, gates, None, note=why)
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
    refusal = spending_refusal(model, "the judge")
    if (metrics.get("evaluators") or {}).get("refused"):
        # The run stays pending for its evaluators: the judge would be paid for twice.
        refusal = "an evaluator did not run: " + "; ".join(metrics["evaluators"]["refused"])
    elif evaluator_failures(metrics.get("evaluators")):
        # Likewise until the evaluator is fixed.
        refusal = "an evaluator failed: " + "; ".join(evaluator_failures(metrics["evaluators"]))
    # What was paid for this very question before (same prompt, system, model and judge
    # version): scored samples are kept, failed ones are money spent, kept on record.
    key = hash_value([JUDGE_VERSION, model.name, prompt])
    kept, earlier = _paid_before(run.dir / "judge.json", key)
    # Fewer samples than were paid for: the first ones count, the rest are kept (and their
    # cost counted) for when the number is raised again.
    samples, spare = kept[: run.judge.samples], kept[run.judge.samples :]
    if refusal is None:
        refusal = _ask_missing(model, rubric, prompt, run, samples, purse)
    record = _record(run, samples, earlier, key, spare)
    if refusal is not None:
        record["skipped"] = refusal
        record["error"] = record["reason"] = f"the judge did not run: {refusal}"
        write_json(run.dir / "judge.json", record, redact)
        # What was paid for before the refusal stays in the run's row (its judge cost).
        paid = record if record["samples"] or record["earlier_attempts"] else None
        return settle(project, run, records, info, metrics, gates, paid, refused=refusal)
    write_json(run.dir / "judge.json", record, redact)
    return settle(project, run, records, info, metrics, gates, record)


def _paid_before(path: Path, key: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The scored samples a judge.json holds for the question `key`, and its attempts that
    gave no score (its earlier ones and its failed samples)."""
    if not path.exists():
        return [], []
    before = read_json(path)
    if before.get("question") != key:
        return [], []
    samples = [*(before.get("samples") or []), *(before.get("spare_samples") or [])]
    scored = [s for s in samples if s.get("error") is None]
    failed = [s for s in samples if s.get("error") is not None]
    return scored, [*(before.get("earlier_attempts") or []), *failed]


def _ask_missing(
    model: ResolvedModel,
    rubric: Any,
    prompt: str,
    run: Run,
    samples: list[dict[str, Any]],
    purse: JudgePurse | None,
) -> str | None:
    """Ask the judge for the samples not yet scored, each held in the budget first, appending
    them to `samples`; stops at the first that fails (asking on would pay for answers a broken
    judge cannot give). Returns why the judge may not be asked, or None."""
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
        samples.append(sample)
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
