"""`llmtt bless`, `llmtt check` and `llmtt estimate`: baselines, CI verdicts and costs ahead."""

from __future__ import annotations

import argparse
from pathlib import Path

from llmtt.errors import LlmttError


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

    report_path, baseline = _report_path(root)
    report = read_json(report_path)
    ok, text = check_summary(report)
    if not report.get("runs"):
        ok, text = False, text + "\nNo run in these results: nothing was checked.\n"
    if baseline.exists():
        covered, note = _coverage(report, read_json(baseline), baseline.name, subset)
        ok, text = ok and covered, text + note
    print(text, end="")
    summary_file = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary_file:
        with open(summary_file, "a", encoding="utf-8") as handle:
            handle.write(text)
    return 0 if ok else 1


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
    from llmtt.execution.budget import expected_cost
    from llmtt.plan.runs import build_plan
    from llmtt.spec.project import load_project
    from llmtt.spec.selection import Selection
    from llmtt.util.atomic import read_json, read_jsonl

    project = load_project(args.project)
    selection = Selection(
        scenarios=tuple(args.scenario),
        tags=tuple(args.tag),
        agents=tuple(args.agent),
        models=tuple(args.model),
        variants=tuple(args.variant),
        repeats=args.repeats,
    )
    plan = build_plan(project, selection)
    history = read_jsonl(project.results_dir / "results.jsonl")
    pending = []
    for run in plan.runs:
        done = run.dir / "result.json"
        if done.exists():
            record = read_json(done)
            if record.get("key") == run.agent_key and record.get("outcome") != "error":
                continue
        pending.append((run, expected_cost(run, history, project.config.models)))
    known = [c for _, c in pending if c is not None]
    for run, cost in pending:
        shown = "unknown" if cost is None else f"${cost:.4f}"
        print(f"{shown:>10}  {run.run_id}")
    unknown = len(pending) - len(known)
    print(
        f"{len(pending)} pending of {len(plan.runs)} runs; expected total ${sum(known):.4f}"
        + (f" (+ {unknown} runs of unknown cost: no price for their model)" if unknown else "")
    )
    return 0
