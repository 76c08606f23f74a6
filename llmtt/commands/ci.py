"""`llmtt bless`, `llmtt check` and `llmtt estimate`: baselines, CI verdicts and costs ahead."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llmtt.errors import LlmttError

if TYPE_CHECKING:
    from llmtt.plan.runs import Plan, Run
    from llmtt.spec.project import Project


def _report_path(root: Path) -> tuple[Path, Path]:
    from llmtt.spec.config import load_config

    config, _ = load_config(root)
    report = root / config.paths.results / "report.json"
    if not report.exists():
        raise LlmttError(f"{report} does not exist: run `doit run` first")
    return report, root / config.paths.baseline


def bless(root: Path) -> int:
    from llmtt.results.baseline import bless as write_baseline

    report, baseline = _report_path(root)
    data = write_baseline(report, baseline)
    print(f"wrote {baseline} ({len(data['groups'])} groups); commit it to compare against it")
    return 0


def check(root: Path, subset: bool) -> int:
    import os

    from llmtt.results.baseline import check_summary
    from llmtt.util.atomic import read_json
    from llmtt.util.text import printable

    report_path, baseline = _report_path(root)
    report = read_json(report_path)
    ok, text = check_summary(report)
    if not report.get("runs"):
        ok, text = False, text + "\nNo run in these results: nothing was checked.\n"
    if baseline.exists():
        covered, note = _coverage(report, read_json(baseline), baseline.name, subset)
        ok, text = ok and covered, text + note
    text += _splits(report)
    unconfined = (report.get("summary") or {}).get("unconfined")
    if unconfined:
        text += (
            f"Unconfined: {unconfined} of the evaluated runs ran without the sandbox; their "
            "agents could reach the user's files and their own record.\n"
        )
    text = printable(text)  # outcome reasons may quote what runs printed
    print(text, end="")
    summary_file = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary_file:
        with open(summary_file, "a", encoding="utf-8") as handle:
            handle.write(text)
    return 0 if ok else 1


def _splits(report: dict[str, Any]) -> str:
    """The tune and holdout scenarios' results apart (nothing when none is held out): guidance
    tuned on the first is judged on the second."""
    splits = report.get("splits")
    if not isinstance(splits, dict):
        return ""
    lines = ["### Tune and holdout scenarios", ""]
    for split in ("tune", "holdout"):
        s = splits.get(split) or {}
        rate = s.get("pass_rate")
        lines.append(
            f"- {split}: {s.get('runs', 0)} runs, {s.get('passed', 0)} passed, "
            f"{s.get('failed', 0)} failed; pass rate {'n/a' if rate is None else rate}"
        )
    return "\n".join(lines) + "\n"


def _coverage(
    report: dict[str, object], baseline: dict[str, object], name: str, subset: bool
) -> tuple[bool, str]:
    """Whether the results cover every baseline group, and the Markdown that says so."""
    from llmtt.results.baseline import missing_groups

    runs = report.get("runs")
    missing = missing_groups(runs if isinstance(runs, list) else [], baseline)
    if not missing:
        return True, ""
    groups = baseline.get("groups")
    total = len(groups) if isinstance(groups, dict) else len(missing)
    shown = ", ".join(missing[:20]) + (
        f", ... ({len(missing) - 20} more)" if len(missing) > 20 else ""
    )
    selection = report.get("selection") or "every run"
    lines = [
        "### Baseline groups without results",
        "",
        f"Compared {total - len(missing)} of the {total} groups of {name} "
        f"(results of: {selection}); no finished run of: {shown}.",
    ]
    if subset:
        lines.append("Only the compared groups are checked (--subset).")
    else:
        lines.append("Run them (or pass --subset to check only the compared groups).")
    return subset, "\n".join(lines) + "\n"


def estimate(args: argparse.Namespace) -> int:
    from llmtt.plan.runs import build_plan
    from llmtt.spec.project import load_project
    from llmtt.spec.selection import Selection
    from llmtt.taskgraph.session import DEP_FILE
    from llmtt.util.atomic import read_jsonl

    project = load_project(args.project)
    repeats = Selection.from_variables({"repeats": args.repeats} if args.repeats else {})
    selection = dataclasses.replace(
        repeats,
        scenarios=tuple(args.scenario),
        tags=tuple(args.tag),
        agents=tuple(args.agent),
        models=tuple(args.model),
        variants=tuple(args.variant),
    )
    every = build_plan(project, selection)  # under repeats=auto: every repeat it may take
    if selection.adaptive:
        from llmtt.taskgraph.session import adaptive_round

        selection = adaptive_round(project.root, selection)[0]
    plan = build_plan(project, selection)  # under repeats=auto: the round under way
    history = read_jsonl(project.results_dir / "results.jsonl")
    dep_file = str(project.results_dir / DEP_FILE)
    pending: list[tuple[Run, float | None, str]] = []  # (run, its cost, what is pending)
    for run in plan.runs:
        layers = _pending_layers(dep_file, run)
        if layers:
            pending.append((run, *_pending_cost(project, run, layers, history, dep_file)))
    known = [c for _, c, _ in pending if c is not None]
    for run, cost, what in pending:
        shown = "unknown" if cost is None else f"${cost:.4f}"
        print(f"{shown:>10}  {run.run_id}  ({what})")
    unknown = len(pending) - len(known)
    print(
        f"{len(pending)} pending of {len(plan.runs)} runs; expected total ${sum(known):.4f}"
        + (f" (+ {unknown} runs of unknown cost: see each line)" if unknown else "")
    )
    _decisions(every, history, args.assume)
    return 0


def _pending_layers(dep_file: str, run: Run) -> set[str]:
    """The layers of `run` the next `doit run` carries out, as its own checks find them: the
    keys saved in doit's dependency file against the plan's, the files each layer makes; a
    layer made from what a pending one writes again is pending too."""
    from types import SimpleNamespace

    from llmtt.plan.cache import RunSpec
    from llmtt.plan.keys import TRIAGE_FILE
    from llmtt.taskgraph.tasks import AGENT_OUTPUTS, EVALUATE_OUTPUTS
    from llmtt.taskgraph.uptodate import JudgeCheck, KeyCheck

    keys = RunSpec.of(run).keys
    judged = "judge" in keys
    made = {
        "agent": AGENT_OUTPUTS,
        "evaluate": EVALUATE_OUTPUTS[:2] if judged else EVALUATE_OUTPUTS,
        "judge": ("judge.json", "result.json"),
        "triage": (TRIAGE_FILE,),
        "report": ("evaluation.md",),
    }
    after = {"evaluate": {"agent"}, "judge": {"agent", "evaluate"}}
    after["triage"] = after["report"] = {"agent", "evaluate", "judge"}
    found: set[str] = set()
    for layer in (name for name in made if name in keys):
        if found & after.get(layer, set()):
            found.add(layer)  # made from what the layers before it write again
            continue
        if not all((run.dir / name).exists() for name in made[layer]):
            found.add(layer)  # doit makes a missing target again
            continue
        check = (
            JudgeCheck(layer, keys[layer], judged=str(run.dir / "judge.json"))
            if layer == "judge"
            else KeyCheck(layer, keys[layer])
        )
        task = run.run_id if layer == "report" else f"{run.run_id}:{layer}"  # the visible one
        saved = _saved(dep_file, task)
        if not check(SimpleNamespace(value_savers=[]), saved):
            found.add(layer)
    return found


def _saved(dep_file: str, task: str) -> dict[str, Any]:
    """What doit saved for `task` ({}: nothing, or no dependency file yet); a damaged record
    is an LlmttError saying how to be rid of it."""
    from llmtt.taskgraph.depfile import saved_values

    if not Path(dep_file).exists():
        return {}  # and none made by reading it
    try:
        return saved_values(dep_file, task) or {}
    except (ValueError, AttributeError, TypeError):
        raise LlmttError(
            f"{dep_file}: what doit saved for {task} is damaged; `doit forget {task}` clears it"
        ) from None


def _pending_cost(
    project: Project, run: Run, layers: set[str], history: list[dict[str, Any]], dep_file: str
) -> tuple[float | None, str]:
    """What the pending `layers` of `run` are expected to cost (None: unknown), and what they
    are, as a line of `llmtt estimate` says them."""
    from llmtt.evaluation.judge_layer import judge_bound
    from llmtt.execution.budget import expected_cost

    parts: list[str] = []
    cost: float | None = 0.0
    if layers == {"report"}:
        return 0.0, "its report"
    if "agent" in layers:
        cost = expected_cost(run, history, project.config.models)
        parts.append("the agent")
    elif "evaluate" in layers:
        parts.append("its evaluation")
    paid = _paid_evaluators(project, run) if "evaluate" in layers else []
    if paid:
        cost = None
        parts.append(f"its evaluators {', '.join(paid)}: not estimated")
    if "judge" in layers:
        if "agent" in layers:
            # As on earlier runs like it, else at most what its longest question may cost.
            judge = _judge_from_history(run, history)
            if judge is None:
                judge = judge_bound(project, run)
                parts.append("the judge, at most")
            else:
                parts.append("the judge, as before")
        else:
            forgotten = not _saved(dep_file, f"{run.run_id}:judge")
            fresh = "evaluate" in layers
            judge = _judge_holds(project, run, forgotten, fresh)
            if fresh and judge is not None:
                # Asked after an evaluation still to come, whose gates may say more.
                bound = judge_bound(project, run)
                judge = None if bound is None else max(judge, bound)
            parts.append("the judge, at most")
        cost = None if cost is None or judge is None else round(cost + judge, 6)
    if "triage" in layers:
        triage = _triage_cost(project, run, layers)
        cost = None if cost is None or triage is None else round(cost + triage, 6)
        parts.append("its triage, at most")
    return cost, ", ".join(parts)


def _triage_cost(project: Project, run: Run, layers: set[str]) -> float | None:
    """What the triage may cost about `run` (None: unknown): asked only if the run fails, about
    the outcome its pending layers settle, else about the one its files hold now."""
    from llmtt.evaluation.paid_triage import triage_bound, triage_holds

    try:
        if layers & {"agent", "evaluate", "judge"}:
            return triage_bound(project, run)
        return triage_holds(project, run)
    except (OSError, KeyError, TypeError, AttributeError, ValueError, LlmttError):
        return None


def _paid_evaluators(project: Project, run: Run) -> list[str]:
    """The run's evaluators that may spend money: those that call a model not known to cost
    nothing (its price unknown or above nothing, no model at all, or the scripted one, which
    they cannot be priced by), or that cannot be told (an evaluator not found or a config
    that does not read). An answer reused from an earlier evaluation is not told apart."""
    from llmtt import registry
    from llmtt.providers import resolve_model
    from llmtt.spec.config import default_judge_model

    paid = []
    for spec in run.scenario.spec.evaluation.evaluators:
        try:
            cls = registry.evaluator(spec.type, project.config.evaluators, project.root)
            if not cls.calls_model:
                continue
            # Its own model as its config reads it (a default of its own included), else the
            # judge's, as the evaluator runner picks it.
            config = cls.Config.model_validate(spec.config)
            name = getattr(config, "model", None) or default_judge_model(project.config)
            free = isinstance(name, str) and (
                resolve_model(name, project.config.models).cost(10**6, 10**6) == 0
            )
        except (LlmttError, ImportError, AttributeError, TypeError, ValueError):
            free = False
        if not free:
            paid.append(spec.type)
    return list(dict.fromkeys(paid))


def _judge_from_history(run: Run, history: list[dict[str, Any]]) -> float | None:
    """What the judge cost on earlier runs of the same scenario, agent and model with the same
    judge model, a sample on average, times the samples asked now (None: none recorded)."""
    assert run.judge is not None
    paid = []
    for row in history:
        judge = row.get("judge") if isinstance(row, dict) else None
        if (
            isinstance(judge, dict)
            and (row.get("scenario"), row.get("agent"), row.get("model"))
            == (run.scenario.name, run.agent, run.model)
            and judge.get("model") == run.judge.model
            and isinstance(judge.get("cost_usd"), int | float)
        ):
            paid.append(float(judge["cost_usd"]) / max(1, len(judge.get("samples") or [])))
    return round(run.judge.samples * sum(paid) / len(paid), 6) if paid else None


def _judge_holds(project: Project, run: Run, forgotten: bool, fresh: bool) -> float | None:
    """What asking the judge again about `run` may cost (None: unknown, its files unread)."""
    from llmtt.evaluation.judge_layer import judge_holds

    try:
        return judge_holds(project, run, forgotten=forgotten, fresh=fresh)
    except (OSError, KeyError, TypeError, AttributeError, ValueError, LlmttError):
        return None


def _decisions(plan: Plan, history: list[dict[str, Any]], assume: str | None) -> None:
    """What a verdict on each comparison is likely to take, in pairs and dollars."""
    from llmtt.execution.budget import expected_cost
    from llmtt.results.adaptive import decision_estimates, looks_of

    rates = None
    if assume:
        try:
            a, b = (float(v) for v in assume.split(","))
        except ValueError:
            raise LlmttError(
                f"--assume {assume}: expected two pass rates, baseline then treatment "
                "(e.g. --assume 0.5,0.7)"
            ) from None
        if not (0 <= a <= 1 and 0 <= b <= 1):
            raise LlmttError(f"--assume {assume}: two pass rates between 0 and 1")
        rates = (a, b)
    spec = plan.project.config.compare
    looks = looks_of(spec) if plan.selection.adaptive else 1
    found = decision_estimates(plan, looks, rates)
    if not found:
        return
    cost: dict[tuple[str, str, str | None, str], float | None] = {}
    for run in plan.runs:
        key = (run.scenario.name, run.agent, run.model, run.variant or "none")
        if key not in cost:
            cost[key] = expected_cost(run, history, plan.project.config.models)
    print(
        f"\nto decide each comparison at its min_effect (80% chance; {looks} look"
        f"{'s' if looks != 1 else ''}; pairs in all, of which done):"
    )
    for e in found:
        where = " / ".join(p for p in (e["scenario"], e["agent"], e["model"]) if p)
        head = f"  {where}: {e['treatment']} vs {e['baseline']}"
        if e["verdict"] not in (None, "cant_tell"):
            print(f"{head}: decided ({e['verdict']}) at {e['done']} pairs")
            continue
        if e["pairs"] is None:
            print(f"{head}: no finished pair yet; pass --assume A,B (expected pass rates)")
            continue
        more = max(0, e["pairs"] - e["done"])
        sides = [
            cost.get((e["scenario"], e["agent"], e["model"], v))
            for v in (e["baseline"], e["treatment"])
        ]
        dollars = (
            "unknown cost"
            if any(c is None for c in sides)
            else f"about ${more * sum(c or 0.0 for c in sides):.4f}"
        )
        capped = f"; over max_repeats ({spec.max_repeats})" if e["pairs"] > spec.max_repeats else ""
        print(
            f"{head}: about {e['pairs']} pairs ({e['done']} done, {more} more: {dollars}; "
            f"from the pass rates {e['from']}){capped}"
        )
