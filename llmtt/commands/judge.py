"""`llmtt judge freeze` and `llmtt judge calibrate`: frozen runs with the scores a person
expects, and whether the configured judge gives them."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from llmtt.errors import LlmttError

CACHE = Path(".llmtt") / "calibration-cache.json"


def judge(args: argparse.Namespace) -> int:
    """The `llmtt judge` command's actions."""
    if args.action == "freeze":
        return freeze(args.project, args.run, args.into)
    return calibrate(args.project, args.dir)


def freeze(root: Path, run_id: str, into: Path | None) -> int:
    """Copy a finished run's events, run.json and gates.json into a calibration case."""
    from llmtt.evaluation.calibration import freeze as freeze_case
    from llmtt.evaluation.judge_layer import guidance_files
    from llmtt.spec.project import load_project
    from llmtt.util.atomic import read_json

    project = load_project(root)
    run_dir = project.results_dir / run_id
    if not (run_dir / "run.json").is_file():
        raise LlmttError(
            f"no run {run_id!r} in {project.results_dir}: name a run as `doit list` shows it "
            "(scenario/agent[-model][-variant]/rK)"
        )
    info = read_json(run_dir / "run.json")
    scenario = next((s for s in project.scenarios if s.name == info.get("scenario")), None)
    if scenario is None:
        raise LlmttError(f"run {run_id}'s scenario {info.get('scenario')!r} is no longer here")
    _check_as_run(project, run_id, info)
    rubric = project.rubric_path(scenario)
    if rubric is None:
        raise LlmttError(
            f"{scenario.path}: evaluation.judge.rubric names no rubric, and a case is graded "
            "against one: name the rubric the judge should use"
        )
    folder = freeze_case(
        run_dir,
        run_id,
        (into or project.root / "calibration"),
        scenario.spec.task.prompt,
        os.path.relpath(rubric, project.root),
        guidance_files(project, info.get("variant"), info),
        project.redactor(),
    )
    print(f"froze {run_id} into {folder}: write the score you expect in its case.toml")
    return 0


def _check_as_run(project: Any, run_id: str, info: dict[str, Any]) -> None:
    """LlmttError unless the project would carry the run out as it was (its agent key): the
    case is frozen with the prompt and guidance of the project now, which must be the run's."""
    from llmtt.plan.runs import build_plan
    from llmtt.spec.selection import Selection

    def axis(name: str) -> tuple[str, ...]:
        return (str(info[name]),) if info.get(name) else ()

    repeat = info.get("repeat")
    try:
        selection = Selection(
            scenarios=axis("scenario"),
            agents=axis("agent"),
            models=axis("model"),
            variants=axis("variant"),
            repeats=repeat if isinstance(repeat, int) and repeat > 0 else None,
        )
        runs = build_plan(project, selection).runs
    except LlmttError:
        runs = []
    now = next((r for r in runs if r.run_id == run_id), None)
    saved: dict[str, Any] = info["key"] if isinstance(info.get("key"), dict) else {}
    if now is None:
        changed = "the project plans it no more"
    elif now.agent_key == saved:
        return
    else:
        parts = set(now.agent_key) | set(saved)
        changed = ", ".join(sorted(k for k in parts if now.agent_key.get(k) != saved.get(k)))
    raise LlmttError(
        f"run {run_id} was carried out under another task, guidance or agent than the project "
        f"gives it now (changed: {changed}), and a case is frozen with the project's prompt and "
        f"guidance: run it again first (doit run), then freeze it"
    )


def calibrate(root: Path, folder: Path | None) -> int:
    """Score every case with the configured judge; 0 when all are in their band, 1 when one
    is not (or could not be scored)."""
    from llmtt.evaluation import calibration
    from llmtt.evaluation.judge import ask
    from llmtt.execution.budget import budget_limit
    from llmtt.providers import resolve_model, spending_refusal
    from llmtt.spec.config import default_judge_model
    from llmtt.spec.project import load_project
    from llmtt.util.atomic import read_json, write_json

    project = load_project(root)
    settings = project.config.judge
    where = folder or project.root / "calibration"
    cases = calibration.load_cases(where, project.root)
    name = default_judge_model(project.config)
    if not name or name == "scripted":
        raise LlmttError(
            f"{project.root / 'llmtt.toml'}: [judge] model names no model that can grade "
            "(set it, or LLMTT_JUDGE)"
        )
    model = resolve_model(name, project.config.models)
    redact = project.redactor()
    prompts = {
        c.name: calibration.case_prompt(
            c, settings.max_transcript_chars, settings.max_guidance_chars, redact
        )
        for c in cases
    }
    cache_path = project.root / CACHE
    cache = calibration.check_cache(
        read_json(cache_path) if cache_path.exists() else {}, cache_path
    )

    def asked(case: calibration.Case, prompt: str) -> dict[str, Any]:
        refusal = spending_refusal(model, "the judge")
        if refusal is not None:
            raise LlmttError(refusal)
        return ask(model, case.rubric, prompt, case.band[0])

    budget = budget_limit(project.config.budget.max_usd, None)
    try:
        found = calibration.calibrate(cases, model, prompts, cache, asked, settings.samples, budget)
    finally:
        # What was paid for is kept even when a refusal ends the command half way.
        write_json(cache_path, cache, redact)
    write_json(where / "calibration.json", found, redact)
    _print(found, where)
    return 0 if found["out_of_band"] == 0 and found["not_scored"] == 0 else 1


def _print(found: dict[str, Any], where: Path) -> None:
    for row in found["cases"]:
        low, high = row["band"]
        if row["score"] is None:
            print(f"  {row['case']}: not scored: {row['error']}")
            continue
        word = "in band" if row["in_band"] else "OUT OF BAND"
        print(
            f"  {row['case']}: judge {row['score']:g}, expected {low:g} to {high:g}: {word}"
            + (" (cached)" if not row["requests"] else "")
        )
    lenient = found["leniency"]
    if lenient is not None:
        side = "too lenient" if lenient > 0 else "too strict" if lenient < 0 else "even"
        print(
            f"leniency {lenient:+.3f} (mean judge minus mean expected: {side}); mean absolute "
            f"error {found['mean_absolute_error']:.3f}"
        )
    print(
        f"{found['in_band']} in band, {found['out_of_band']} out of band, "
        f"{found['not_scored']} not scored; judge {found['model']}: {found['requests']} "
        f"request(s), cost ${found['cost_usd']:.6f}; see {where / 'calibration.json'}"
    )
