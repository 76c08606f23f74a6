"""The `llmtt` command: checks and helpers around a project (the runs themselves are `doit run`)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import textwrap
from pathlib import Path

from llmtt import __version__
from llmtt.errors import LlmttError

# One line for each doit variable (llmtt.selection.VARIABLES; a test keeps the two in step).
DOIT_VARIABLES = {
    "scenario": "only these scenarios, by name (comma list): doit run scenario=git-first-commit",
    "tag": "only scenarios with one of these tags: doit run tag=smoke,git",
    "tier": "only scenarios of these tiers: doit run tier=1,2",
    "agent": "replace the matrix's agents: doit run agent=claude-code",
    "model": "replace the matrix's models: doit run model=scripted",
    "variant": "replace the matrix's variants ('none' lays no files): doit run variant=v1,v2",
    "repeats": "replace the number of repeats of each run: doit run repeats=5",
    "budget": "spend at most this many USD in this invocation: doit run budget=2",
}


def _parser() -> argparse.ArgumentParser:
    """Every llmtt command, each with its arguments and an example in its --help."""
    variables = "\n".join(f"  {k + '=':<10} {v}" for k, v in DOIT_VARIABLES.items())
    parser = argparse.ArgumentParser(
        prog="llmtt",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="The runs themselves are doit's: `doit run`, `doit list --status`, `doit info "
        f"RUN`.\nVariables of doit commands (comma lists allowed):\n{variables}",
    )
    parser.add_argument("--version", action="version", version=f"llmtt {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    def command(name: str, help: str, example: str) -> argparse.ArgumentParser:
        return sub.add_parser(
            name,
            help=help,
            description=textwrap.fill(help[0].upper() + help[1:] + ".", 79),
            epilog=f"Example: {example}",
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )

    def project(p: argparse.ArgumentParser) -> None:
        p.add_argument("project", nargs="?", default=".", type=Path, help="(default: .)")

    init = command(
        "init",
        "write a first project (llmtt.toml, dodo.py, a scenario, a rubric) for your tool",
        "llmtt init --target mytool",
    )
    init.add_argument("folder", nargs="?", default=".", type=Path, help="(default: .)")
    init.add_argument(
        "--target", default="git", help="your tool's executable, on PATH or a path (default: git)"
    )
    init.add_argument("--force", action="store_true", help="replace files that exist")
    project(command("validate", "check llmtt.toml, every scenario and rubric", "llmtt validate"))
    scenarios = command(
        "scenarios",
        "list the project's scenarios: name, tier, expect, tags, file, description",
        "llmtt scenarios --tag smoke --tier 1",
    )
    project(scenarios)
    scenarios.add_argument(
        "--tag", "--tags", action="append", default=[], help="only these tags (comma list)"
    )
    scenarios.add_argument(
        "--tier", action="append", default=[], help="only these tiers (comma list)"
    )
    show = command(
        "show",
        "a scenario's resolved settings (target, limits, runs, gates, evaluators, judge) "
        "or a run's results (outcome, reason, gates, metrics, files)",
        "llmtt show git-first-commit; llmtt show git-first-commit/oracle/r1",
    )
    show.add_argument("name", help="a scenario's name or a run id (SCENARIO/AGENT[-MODEL]/rN)")
    show.add_argument("--project", default=".", type=Path, help="(default: .)")
    clean = command(
        "clean",
        "list, and with --yes remove, the folders of deleted scenarios and (--older-than) "
        "run folders last written before that; nothing outside the results folder",
        "llmtt clean --older-than 7d --yes",
    )
    project(clean)
    clean.add_argument(
        "--older-than", type=_age, metavar="AGE", help="e.g. 7d, 12h, 2w: also old runs"
    )
    clean.add_argument("--yes", action="store_true", help="remove them (default: only list)")
    schema = command("schema", "write JSON Schema files for editors", "llmtt schema --out schemas")
    schema.add_argument(
        "--out", type=Path, default=Path("schemas"), help="folder (default: schemas)"
    )
    server = command(
        "scripted-server",
        "serve the scripted model for a scenario's solution, by hand",
        "llmtt scripted-server scenarios/git-first-commit.yaml --port 8123",
    )
    server.add_argument("scenario", type=Path, help="scenario file whose `solution` to play")
    server.add_argument("--port", type=int, default=0, help="port (default: a free one)")
    server.add_argument("--log", type=Path, help="append each request to this JSON-lines file")
    estimate = command(
        "estimate",
        "expected cost of the pending runs, before spending",
        "llmtt estimate --agent claude-code --model house",
    )
    project(estimate)
    for name in ("scenario", "tag", "agent", "model", "variant"):
        estimate.add_argument(f"--{name}", action="append", default=[], help="repeatable")
    estimate.add_argument("--repeats", type=int)
    project(command("bless", "record the current report as the baseline to commit", "llmtt bless"))
    check = command(
        "check",
        "for CI: exit 1 on an outcome its scenario does not expect, a run not carried out or "
        "a regression; print Markdown",
        "llmtt check --subset",
    )
    project(check)
    check.add_argument(
        "--subset",
        action="store_true",
        help="the results cover part of the baseline on purpose: compare that part only",
    )
    compare = command(
        "compare",
        "compare two result sets (report.json files or result folders; each agent / model / "
        "variant group of A against the same group of B) or two variants of the current "
        "results (A against B per agent and model), paired by scenario and repeat",
        "llmtt compare v1 v2; llmtt compare old/report.json llm-tool-test-results",
    )
    compare.add_argument("a", help="side A: a report.json, a results folder, or a variant")
    compare.add_argument("b", help="side B: the same kind as A")
    compare.add_argument("--project", default=".", type=Path, help="(default: .)")
    _agents_parsers(
        command(
            "agents",
            "list the agent CLIs llmtt pins and where it finds them, or install them",
            "llmtt agents install opencode; llmtt agents",
        )
    )
    command(
        "doit",
        "run doit with llmtt's Python (for pipx or uv tool installs, which put only `llmtt` on "
        "PATH): `llmtt doit run` is `doit run`",
        "llmtt doit run agent=oracle; llmtt doit list --status",
    )
    _import_parsers(
        command(
            "import",
            "write llmtt scenarios from another tool's dataset",
            "llmtt import bashkit-eval tasks.jsonl --solutions solutions.jsonl",
        )
    )
    return parser


def _agents_parsers(parent: argparse.ArgumentParser) -> None:
    parent.add_argument("--project", default=".", type=Path, help="(default: .)")
    actions = parent.add_subparsers(dest="action")
    install = actions.add_parser(
        "install",
        help="install the pinned agent CLIs with npm (all three: about 1 GB)",
        description="Install the pinned versions of the agent CLIs with npm, where every llmtt "
        "project of this user finds them (or only this project, with --project). "
        "Example: llmtt agents install claude-code opencode",
    )
    install.add_argument(
        "names", nargs="*", metavar="AGENT", help="claude-code, opencode, codex (default: all)"
    )
    where = install.add_mutually_exclusive_group()
    where.add_argument(
        "--project",
        dest="into_project",
        action="store_true",
        help="into the project's .llmtt/agents (default: the user's agents folder)",
    )
    where.add_argument(
        "--dir", type=Path, help="into this folder (then point LLMTT_AGENTS_DIR at it)"
    )


def _import_parsers(parent: argparse.ArgumentParser) -> None:
    imports = parent.add_subparsers(dest="source", required=True)
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


def main(argv: list[str] | None = None) -> int:
    """Entry point; a user's mistake becomes a message and exit code 2, never a traceback."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["doit"]:
        # Exec, so doit's signals, output and exit code are the user's own.
        os.execv(sys.executable, [sys.executable, "-m", "doit", *argv[1:]])
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "validate":
            return _validate(args.project)
        if args.command == "scenarios":
            return _scenarios(args.project, args.tag, args.tier)
        if args.command == "show":
            return _show(args.project, args.name)
        if args.command == "clean":
            return _clean(args.project, args.older_than, args.yes)
        if args.command == "bless":
            return _bless(args.project)
        if args.command == "check":
            return _check(args.project, args.subset)
        if args.command == "compare":
            return _compare(args.project, args.a, args.b)
        if args.command == "estimate":
            return _estimate(args)
        if args.command == "agents":
            return _agents(args)
        if args.command == "import":
            return _import(args)
        if args.command == "init":
            return _init(args)
        if args.command == "scripted-server":
            return _scripted_server(args.scenario, args.port, args.log)
        return _schema(args.out)
    except LlmttError as exc:
        from llmtt.redaction import console

        print(console(f"llmtt: {exc}"), file=sys.stderr)
        return 2


def _init(args: argparse.Namespace) -> int:
    from llmtt.scaffold import init_project

    made = init_project(args.folder, args.target, force=args.force)
    for path in made.written:
        print(f"wrote {path}")
    about = f"its `{made.subcommand}` command" if made.subcommand else "its --help"
    where = "" if args.folder == Path(".") else f"cd {args.folder} && "
    print(
        f"\nThe first scenario asks an agent about {about}. Next:\n"
        f"  {where}llmtt validate          # check every file\n"
        f"  {where}doit run                # the oracle plays the reference solution\n"
        f"  {where}llmtt agents install claude-code && doit run agent=claude-code "
        "model=scripted   # a real agent CLI, free"
    )
    return 0


def _agents(args: argparse.Namespace) -> int:
    from llmtt.agents import install

    root = args.project.resolve()
    if args.action == "install":
        dest = args.dir or (install.project_dir(root) if args.into_project else install.user_dir())
        names = args.names or list(install.CLI_AGENTS)
        unknown = [n for n in names if n not in install.CLI_AGENTS]
        if unknown:
            raise LlmttError(
                f"agents install: unknown agent {unknown[0]!r}; installable: "
                f"{', '.join(install.CLI_AGENTS)}"
            )
        for name in names:
            print(f"installing {install.pinned(name)} into {dest / name}", flush=True)
            found = install.install(name, dest)
            print(f"  {name}: {', '.join(sorted(p.name for p in found.iterdir()))} in {found}")
        if args.dir and install.user_dir() != args.dir:
            print(f"llmtt finds them there with LLMTT_AGENTS_DIR={args.dir}")
        return 0
    return _list_agents(root)


def _list_agents(root: Path) -> int:
    from llmtt.agents import install
    from llmtt.agents.cli import CliAgent
    from llmtt.agents.registry import agent_class
    from llmtt.config import AgentSettings

    settings: dict[str, AgentSettings] = {}
    if (root / "llmtt.toml").is_file():
        from llmtt.project import load_project

        settings = load_project(root).config.agents
    print(f"{'agent':<12} {'pinned':<36} found")
    for name in install.CLI_AGENTS:
        agent = agent_class(name)(settings.get(name) or AgentSettings(), root)
        assert isinstance(agent, CliAgent)
        exe = agent.executable()
        if exe is None:
            found = f"not installed: llmtt agents install {name}"
        else:
            origin = (
                "llmtt.toml" if agent.settings.executable else install.where_found(root, name, exe)
            )
            version = install.version_of(exe)
            found = f"{version} ({origin}: {exe})"
            if agent.package.rpartition("@")[2] not in version:
                found += ", not the pinned version"
        print(f"{name:<12} {agent.package:<36} {found}")
    print(f"user agents folder: {install.user_dir()}")
    return 0


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
    from llmtt.compare import compare

    print(compare(a, b, root), end="")
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


def _scenarios(root: Path, tags: list[str], tiers: list[str]) -> int:
    from llmtt.project import load_project
    from llmtt.selection import Selection, nearest

    selection = Selection.from_variables({"tag": ",".join(tags), "tier": ",".join(tiers)})
    project = load_project(root)
    chosen = [
        s
        for s in project.scenarios
        if (not selection.tags or set(selection.tags) & set(s.spec.tags))
        and (not selection.tiers or s.spec.tier in selection.tiers)
    ]
    if not chosen:
        known = {t for s in project.scenarios for t in s.spec.tags}
        hint = "".join(nearest(t, known) for t in selection.tags if t not in known)
        raise LlmttError(f"no scenario has {selection.describe()}{hint}")
    for s in sorted(chosen, key=lambda s: s.name):
        about = s.spec.description.strip().splitlines()
        print(
            f"{s.name}  tier {s.spec.tier}  expect {s.spec.expect}  "
            f"tags {','.join(s.spec.tags) or '-'}  {_shown_path(root, s.path)}"
        )
        if about:
            print(f"    {about[0]}")
    print(f"{len(chosen)} of {len(project.scenarios)} scenarios")
    return 0


def _shown_path(root: Path, path: Path) -> str:
    try:
        return str(path.resolve().relative_to(root.resolve()))
    except ValueError:
        return str(path)


def _show(root: Path, name: str) -> int:
    from llmtt.config import load_config

    config, _ = load_config(root)
    folder = root / config.paths.results / name.strip("/")
    if (folder / "result.json").is_file() or (folder / "run.json").is_file():
        return _show_run(folder, name.strip("/"))
    from llmtt.plan import build_plan
    from llmtt.project import load_project
    from llmtt.selection import Selection, nearest

    project = load_project(root)
    names = [s.name for s in project.scenarios]
    if name not in names:
        planned = [r.run_id for r in build_plan(project, Selection()).runs]
        if name in planned:
            print(f"run {name}: not run yet (`doit run` runs it)")
            return 0
        names += planned
        raise LlmttError(
            f"{name} is neither a scenario of {root} nor a run folder in "
            f"{root / config.paths.results}{nearest(name, names)} (`llmtt scenarios` lists them)"
        )
    scenario = project.scenario(name)
    spec = scenario.spec
    runs = build_plan(project, Selection(scenarios=(name,))).runs
    target = project.target_for(scenario)
    print(f"scenario {name} ({_shown_path(root, scenario.path)})")
    if spec.description.strip():
        print(f"  description: {' '.join(spec.description.split())}")
    print(f"  tags: {', '.join(spec.tags) or '-'}; tier {spec.tier}; expect {spec.expect}")
    print(f"  target: {target.binary or '-'} (command pattern {target.effective_pattern()})")
    first = runs[0]
    cost = f"${spec.cost.max_usd:g}" if spec.cost.max_usd is not None else "no limit"
    print(f"  limits: {first.timeout_secs:g} s, {first.max_turns} turns, cost {cost}")
    print(f"  fixture: {scenario.fixture_dir or '-'}; solution: {len(spec.solution)} commands")
    print(f"  runs ({len(runs)}, with the default matrix):")
    for run in runs:
        print(f"    {run.run_id}  (agent {run.agent} {run.agent_version})")
    gates = spec.evaluation.gates
    print(f"  gates ({len(gates)}):")
    for index, gate in enumerate(gates, start=1):
        said = gate.description or " ".join(
            f"{k}={v}" for k, v in gate.model_dump(exclude_defaults=True).items() if k != "type"
        )
        print(f"    {index}. {gate.type}: {said}")
    evaluators = spec.evaluation.evaluators
    if evaluators:
        print("  evaluators: " + ", ".join(e.type for e in evaluators))
    judge = first.judge
    if judge is not None:
        print(f"  judge: {judge.model}, rubric {judge.rubric}, pass at {judge.threshold:g}")
    return 0


def _show_run(folder: Path, run_id: str) -> int:
    from llmtt.atomic import read_json

    result = folder / "result.json"
    if not result.is_file():
        print(f"run {run_id}: not evaluated yet (`doit run` carries it on)\n  files: {folder}")
        return 0
    record = read_json(result)
    # The verdict against the scenario's `expect` is the reports' (report.json), when there.
    report = folder.parents[2] / "report.json"
    rows = read_json(report).get("runs", []) if report.is_file() else []
    verdicts = [r.get("verdict") for r in rows if r.get("run_id") == run_id]
    print(f"run {run_id}: {verdicts[0] if verdicts and verdicts[0] else record['outcome']}")
    print(f"  reason: {record['outcome_reason']}")
    gates_file = folder / "gates.json"
    gates = read_json(gates_file)["gates"] if gates_file.is_file() else []
    print(f"  gates: {record.get('gates_passed')}/{record.get('gates_total')} passed")
    for gate in gates:
        mark = "pass" if gate["passed"] else "FAIL"
        print(f"    {gate['index']}. {mark} {gate['type']}: {gate.get('message', '')}")
    metrics = record.get("metrics") or {}
    shown = ("turns", "total_commands", "error_count", "help_invocations")
    print("  metrics: " + ", ".join(f"{k} {metrics.get(k, 'n/a')}" for k in shown))
    cost = record.get("cost_usd")
    print(
        f"  cost: {'unknown' if cost is None else f'${cost:g}'}; "
        f"duration {record.get('duration_secs')} s; "
        f"judge {(record.get('judge') or {}).get('weighted_score', 'none')}"
    )
    print(f"  files: {folder} (evaluation.md, events.jsonl, workspace/, ...)")
    return 0


_AGE = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def _age(text: str) -> float:
    """`7d`, `12h`, `30m`, `2w` or `45s` as seconds."""
    number, unit = text[:-1], text[-1:]
    if unit not in _AGE or not number.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r}: write a whole number and s, m, h, d or w")
    return int(number) * _AGE[unit]


def _clean(root: Path, older_than: float | None, yes: bool) -> int:
    import shutil
    import time

    from llmtt.project import load_project

    # Loading the whole project (not just llmtt.toml): a scenario whose file is broken is still
    # a scenario, and its results are not pruned as those of a deleted one.
    project = load_project(root)
    results = project.results_dir.resolve()
    names = {s.name for s in project.scenarios}
    doomed: list[tuple[Path, str]] = []
    if results.is_dir():
        for folder in sorted(results.iterdir()):
            if folder.name.startswith(".") or folder.is_symlink() or not folder.is_dir():
                continue
            if folder.name not in names:
                doomed.append((folder, "its scenario no longer exists"))
            elif older_than is not None:
                cutoff = time.time() - older_than
                for run in sorted(folder.glob("*/*/run.json")):
                    last = max(p.stat().st_mtime for p in run.parent.glob("*.json"))
                    if last < cutoff:
                        doomed.append((run.parent, f"last written {_ago(time.time() - last)}"))
    total = 0
    for folder, why in doomed:
        assert folder.resolve().is_relative_to(results) and folder.resolve() != results
        size = _size(folder)
        total += size
        print(f"{'removed' if yes else 'would remove'} {folder} ({_bytes(size)}; {why})")
        if yes:
            shutil.rmtree(folder)
            for parent in (folder.parent, folder.parent.parent):
                if parent.resolve() != results and parent.is_dir() and not any(parent.iterdir()):
                    parent.rmdir()
    if not doomed:
        print(f"nothing to remove in {results}")
    elif yes:
        print(f"freed {_bytes(total)} in {len(doomed)} folders; `doit run` runs them again")
    else:
        print(f"{_bytes(total)} in {len(doomed)} folders would be freed: pass --yes to remove")
    return 0


def _size(folder: Path) -> int:
    return sum(p.lstat().st_size for p in folder.rglob("*") if not p.is_dir() or p.is_symlink())


def _bytes(size: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return ""


def _ago(secs: float) -> str:
    return f"{secs / 86400:.1f} days ago" if secs >= 86400 else f"{secs / 3600:.1f} hours ago"


if __name__ == "__main__":
    sys.exit(main())
