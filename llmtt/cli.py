"""The `llmtt` command: checks and helpers around a project (the runs themselves are `doit run`)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from llmtt.errors import LlmttError


def main(argv: list[str] | None = None) -> int:
    """Entry point; a user's mistake becomes a message and exit code 2, never a traceback."""
    parser = argparse.ArgumentParser(prog="llmtt", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    validate = sub.add_parser("validate", help="check llmtt.toml, every scenario and rubric")
    validate.add_argument("project", nargs="?", default=".", type=Path)
    schema = sub.add_parser("schema", help="write JSON Schema files for editors")
    schema.add_argument(
        "--out", type=Path, default=Path("schemas"), help="folder (default: schemas)"
    )
    server = sub.add_parser(
        "scripted-server", help="serve the scripted model for a scenario's solution, by hand"
    )
    server.add_argument("scenario", type=Path, help="scenario file whose `solution` to play")
    server.add_argument("--port", type=int, default=0, help="port (default: a free one)")
    server.add_argument("--log", type=Path, help="append each request to this JSON-lines file")
    estimate = sub.add_parser("estimate", help="expected cost of the pending runs, before spending")
    estimate.add_argument("project", nargs="?", default=".", type=Path)
    for name in ("scenario", "tag", "agent", "model", "variant"):
        estimate.add_argument(f"--{name}", action="append", default=[], help="repeatable")
    estimate.add_argument("--repeats", type=int)
    bless = sub.add_parser("bless", help="record the current report as the baseline to commit")
    bless.add_argument("project", nargs="?", default=".", type=Path)
    check = sub.add_parser(
        "check", help="for CI: exit 1 on any failed outcome or regression; print Markdown"
    )
    check.add_argument("project", nargs="?", default=".", type=Path)
    check.add_argument(
        "--subset",
        action="store_true",
        help="the results cover part of the baseline on purpose: compare that part only",
    )
    compare = sub.add_parser(
        "compare",
        help="compare two result sets (report.json files or "
        "result folders) or two variants of the current results",
    )
    compare.add_argument("a")
    compare.add_argument("b")
    compare.add_argument("--project", default=".", type=Path)
    imports = sub.add_parser(
        "import", help="write llmtt scenarios from another tool's dataset"
    ).add_subparsers(dest="source", required=True)
    bashkit = imports.add_parser(
        "bashkit-eval",
        help="one scenario per task of a bashkit-eval JSONL dataset",
        description="Example: llmtt import bashkit-eval tasks.jsonl --solutions solutions.jsonl",
    )
    bashkit.add_argument("tasks", type=Path, help="the dataset (JSON lines)")
    bashkit.add_argument(
        "--out", type=Path, default=Path("scenarios"), help="scenario folder (default: scenarios)"
    )
    bashkit.add_argument(
        "--fixtures", type=Path, help="where the tasks' files go (default: OUT/fixtures)"
    )
    bashkit.add_argument(
        "--solutions", type=Path, help='reference solutions: JSON lines {"id", "solution": [...]}'
    )
    bashkit.add_argument("--force", action="store_true", help="replace existing scenario files")
    seed = imports.add_parser(
        "llm-tool-test",
        help="llm-tool-test's own scenario files as llmtt scenarios",
        description="Example: llmtt import llm-tool-test ../old/scenarios/*.yaml",
    )
    seed.add_argument("files", type=Path, nargs="+", help="the seed's scenario files")
    seed.add_argument(
        "--out", type=Path, default=Path("scenarios"), help="scenario folder (default: scenarios)"
    )
    seed.add_argument("--force", action="store_true", help="replace existing scenario files")
    args = parser.parse_args(argv)
    try:
        if args.command == "validate":
            return _validate(args.project)
        if args.command == "bless":
            return _bless(args.project)
        if args.command == "check":
            return _check(args.project, args.subset)
        if args.command == "compare":
            return _compare(args.project, args.a, args.b)
        if args.command == "estimate":
            return _estimate(args)
        if args.command == "import":
            return _import(args)
        if args.command == "scripted-server":
            return _scripted_server(args.scenario, args.port, args.log)
        return _schema(args.out)
    except LlmttError as exc:
        from llmtt.redaction import console

        print(console(f"llmtt: {exc}"), file=sys.stderr)
        return 2


def _import(args: argparse.Namespace) -> int:
    if args.source == "llm-tool-test":
        from llmtt.importers.llm_tool_test import check_files, import_llm_tool_test

        check_files(args.files)
        done = import_llm_tool_test(args.files, args.out, force=args.force)
    else:
        from llmtt.importers.bashkit import import_bashkit

        fixtures = args.fixtures or args.out / "fixtures"
        done = import_bashkit(args.tasks, args.out, fixtures, args.solutions, force=args.force)
    for warning in done.warnings:
        print(f"llmtt: warning: {warning}", file=sys.stderr)
    for problem in done.problems:
        print(f"llmtt: {problem}", file=sys.stderr)
    print(f"wrote {len(done.written)} scenario(s) to {args.out}")
    return 1 if done.problems else 0


def _validate(root: Path) -> int:
    from llmtt.plan import build_plan
    from llmtt.project import load_project
    from llmtt.selection import Selection

    project = load_project(root)
    plan = build_plan(project, Selection())
    for warning in project.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    print(
        f"ok: {root / 'llmtt.toml'}, {len(project.scenarios)} scenarios, "
        f"{len(project.rubrics)} rubrics, {len(plan.runs)} runs planned"
    )
    return 0


def _report_path(root: Path) -> tuple[Path, Path]:
    from llmtt.config import load_config

    config, _ = load_config(root)
    report = root / config.paths.results / "report.json"
    if not report.exists():
        raise LlmttError(f"{report} does not exist: run `doit run` first")
    return report, root / config.paths.baseline


def _bless(root: Path) -> int:
    from llmtt.baseline import bless

    report, baseline = _report_path(root)
    data = bless(report, baseline)
    print(f"wrote {baseline} ({len(data['groups'])} groups); commit it to compare against it")
    return 0


def _check(root: Path, subset: bool) -> int:
    import os

    from llmtt.atomic import read_json
    from llmtt.baseline import check_summary

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
    from llmtt.baseline import missing_groups

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


def _compare(root: Path, a: str, b: str) -> int:
    from llmtt.atomic import read_json
    from llmtt.summary import comparisons

    def rows(source: str) -> list[dict[str, object]] | None:
        path = Path(source)
        if path.is_dir():
            path = path / "report.json"
        return list(read_json(path)["runs"]) if path.is_file() else None

    left, right = rows(a), rows(b)
    if left is not None and right is not None:
        tagged = [{**r, "variant": a} for r in left] + [{**r, "variant": b} for r in right]
    elif left is None and right is None:
        report, _ = _report_path(root)
        tagged = [r for r in read_json(report)["runs"] if r.get("variant") in (a, b)]
    else:
        raise LlmttError("compare takes two result sets (report.json or folders) or two variants")
    found = [c for c in comparisons(tagged) if c["axis"] == "variant"]
    if not found:
        raise LlmttError(
            f"no paired runs between {a} and {b} (same scenario, agent, model, repeat)"
        )
    for c in found:
        print(
            f"{c['a']} vs {c['b']}: {c['pairs']} pairs, pass rate {c['pass_rate_a']} -> "
            f"{c['pass_rate_b']} ({c['difference']:+g}, 95% CI {c['ci_low']:+g} to "
            f"{c['ci_high']:+g}, McNemar p = {c['p_value']:g})"
        )
        for name, m in c["metrics"].items():
            delta = "n/a" if m["delta"] is None else f"{m['delta']:+g}"
            print(f"  {name}: {m['a']} -> {m['b']} ({delta})")
    return 0


def _estimate(args: argparse.Namespace) -> int:
    from llmtt.atomic import read_json, read_jsonl
    from llmtt.budget import expected_cost
    from llmtt.plan import build_plan
    from llmtt.project import load_project
    from llmtt.selection import Selection

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


def _scripted_server(scenario: Path, port: int, log: Path | None) -> int:
    import threading

    from llmtt.scenario import load_scenario
    from llmtt.scripted import ScriptedServer

    spec = load_scenario(scenario).spec
    with ScriptedServer(spec.scripted or spec.solution, log=log, port=port) as server:
        turns = len(server.session.turns)
        print(f"scripted model for {scenario} ({turns} turns) on {server.url}")
        print(f"  claude-code: ANTHROPIC_BASE_URL={server.url} ANTHROPIC_API_KEY=scripted")
        print(f"  OpenAI-compatible clients: base URL {server.url}/v1, model scripted")
        print("Ctrl-C stops it.", flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass
    return 0


def _schema(out: Path) -> int:
    from llmtt.atomic import write_text
    from llmtt.config import Config
    from llmtt.rubric import Rubric
    from llmtt.scenario import Scenario

    for name, model in (("llmtt.toml", Config), ("scenario", Scenario), ("rubric", Rubric)):
        path = out / f"{name}.schema.json"
        write_text(path, json.dumps(model.model_json_schema(), indent=2) + "\n")
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
