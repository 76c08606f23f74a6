"""The `llmtt` command: checks and helpers around a project (the runs themselves are `doit run`)."""

from __future__ import annotations

import argparse
import os
import sys
import textwrap
from pathlib import Path

from llmtt import __version__
from llmtt.commands.clean import age
from llmtt.errors import LlmttError

# One line for each doit variable (llmtt.spec.selection.VARIABLES; a test keeps the two in step).
DOIT_VARIABLES = {
    "scenario": "only these scenarios, by name (comma list): doit run scenario=git-first-commit",
    "tag": "only scenarios with one of these tags: doit run tag=smoke,git",
    "tier": "scenarios of tier N and below (0 = smoke), or of tiers A to B: doit run tier=1 (2-2)",
    "agent": "replace the matrix's agents: doit run agent=claude-code",
    "model": "replace the matrix's models: doit run model=scripted",
    "variant": "replace the matrix's variants ('none' lays no files): doit run variant=v1,v2",
    "repeats": "replace the number of repeats of each run: doit run repeats=5",
    "budget": "spend at most this many USD in this invocation: doit run budget=2",
    "executor": "where runs are carried out, local or ray (a Ray cluster): doit run executor=ray",
    "jobs": "auto: find how many agents to run at once on this machine: doit run jobs=auto",
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
        "--tier",
        action="append",
        default=[],
        help="only tier N and below (the seed's --tier N), or tiers A to B (A-B)",
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
        "--older-than", type=age, metavar="AGE", help="e.g. 7d, 12h, 2w: also old runs"
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
    estimate.add_argument("--repeats", help="a whole number, or auto (rounds until decided)")
    estimate.add_argument(
        "--assume",
        metavar="A,B",
        help="pass rates of the baseline and a treatment, for comparisons with no finished pair",
    )
    lint = command(
        "lint",
        "the free static tier, before any paid run: the target's help and each subcommand's "
        "(examples, machine-readable output, prompts, pagers, wrong invocations), the guidance "
        "files (size, commands the tool lacks, their shell examples run in a fixture) and the "
        "scenarios (gate expectations leaked into the prompt); no model, no network",
        "llmtt lint --fail-on warning; llmtt lint --json --subcommand commit",
    )
    from llmtt.commands.lint import add_arguments as lint_arguments

    lint_arguments(lint)
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
        "the comparison with the baseline of the current results, with a verdict per scenario; "
        "or A (the baseline) against B: two variants of the current results, or two result "
        "sets (report.json files or result folders), paired by scenario, agent, model and "
        "repeat",
        "llmtt compare --json; llmtt compare v1 v2; llmtt compare old/report.json "
        "llm-tool-test-results",
    )
    compare.add_argument(
        "a", nargs="?", help="side A, the baseline: a report.json, a results folder, or a variant"
    )
    compare.add_argument("b", nargs="?", help="side B, the treatment: the same kind as A")
    compare.add_argument("--json", action="store_true", help="print the comparison as JSON")
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
    _judge_parsers(
        command(
            "judge",
            "check the judge against the scores a person expects: freeze finished runs as "
            "calibration cases, then score them all",
            "llmtt judge freeze git-commit/oracle/r1; llmtt judge calibrate",
        )
    )
    _import_parsers(
        command(
            "import",
            "write llmtt scenarios from another tool's dataset",
            "llmtt import bashkit-eval tasks.jsonl --solutions solutions.jsonl",
        )
    )
    # Runs as ATIF trajectories (issue 32): export here, import among the importers.
    export = command(
        "export",
        "write runs in another tool's format: ATIF trajectories (Harbor's, v1.7)",
        "llmtt export atif all; llmtt export atif s/oracle/r1 --out traj",
    )
    formats = export.add_subparsers(dest="format", required=True)
    atif = formats.add_parser(
        "atif",
        help="each run as an ATIF trajectory JSON file",
        description="Example: llmtt export atif all --out trajectories-out",
    )
    atif.add_argument("run", help="a run id (as `doit list` shows it), or all")
    atif.add_argument("--out", type=Path, help="folder (default: <results>/atif)")
    atif.add_argument("--project", default=".", type=Path, help="(default: .)")
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
    where.add_argument(
        "--skill",
        action="store_true",
        help="install (or update) llmtt's own skill in the project instead, where your coding "
        "agent finds it: .claude/skills/llmtt and .agents/skills/llmtt (no CLI is installed)",
    )

    check = actions.add_parser(
        "check",
        help="play a scripted session through each agent CLI and compare with the truth",
        description="Play one scripted session (free, offline) through each agent CLI found "
        "(the project's [agents] settings, else where llmtt finds it) and compare its events "
        "and metrics with what llmtt's pinned versions give; exits 1 when one differs. "
        "Example: llmtt agents check codex",
    )
    check.add_argument(
        "names", nargs="*", metavar="AGENT", help="claude-code, opencode, codex (default: all)"
    )


def _judge_parsers(parent: argparse.ArgumentParser) -> None:
    """`llmtt judge freeze` and `llmtt judge calibrate`."""
    actions = parent.add_subparsers(dest="action", required=True)
    freeze = actions.add_parser(
        "freeze",
        help="copy a finished run (its events, run.json, gates.json, guidance) into a "
        "calibration case, with a case.toml to write the expected score in",
        description="Copy what the judge reads of a finished run into a calibration case.",
        epilog="Example: llmtt judge freeze git-commit/oracle/r1 --into calibration",
    )
    freeze.add_argument("run", help="the run, as `doit list` names it")
    freeze.add_argument(
        "--into", type=Path, help="the calibration folder (default: calibration/ in the project)"
    )
    freeze.add_argument("--project", default=".", type=Path, help="(default: .)")
    calibrate = actions.add_parser(
        "calibrate",
        help="score every case with the configured judge and rubric: per case in or out of "
        "its band, the leniency and the mean absolute error; exit 1 when a case is out",
        description="Score every calibration case with the configured judge (paid: "
        "LLMTT_ENABLED=1); scores are cached until a case, its rubric or the judge changes.",
        epilog="Example: LLMTT_ENABLED=1 llmtt judge calibrate --dir calibration",
    )
    calibrate.add_argument(
        "--dir", type=Path, help="the calibration folder (default: calibration/ in the project)"
    )
    calibrate.add_argument("--project", default=".", type=Path, help="(default: .)")


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
    atif = imports.add_parser(
        "atif",
        help="an ATIF trajectory (Harbor's, v1.7) as a run of a scenario, graded by doit run",
        description="Example: llmtt import atif trajectory.json --scenario git-first-commit "
        "--workspace trial/workspace",
    )
    atif.add_argument("file", type=Path, help="the trajectory (JSON)")
    atif.add_argument("--scenario", required=True, help="the scenario it is a run of")
    atif.add_argument(
        "--agent", help="the agent it is a run of (default: atif-<the trajectory's agent>)"
    )
    atif.add_argument(
        "--workspace", type=Path, help="the workspace the run left, for the gates to check"
    )
    atif.add_argument("--project", default=".", type=Path, help="(default: .)")


def main(argv: list[str] | None = None) -> int:
    """Entry point; a user's mistake becomes a message and exit code 2, never a traceback."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["doit"]:
        # Exec, so doit's signals, output and exit code are the user's own; doit with
        # llmtt's loader (llmtt.taskgraph.loader), which a plain `doit` reaches through dodo.py.
        os.execv(sys.executable, [sys.executable, "-m", "llmtt.taskgraph", *argv[1:]])
    parser = _parser()
    args = parser.parse_args(argv)
    from llmtt.redaction import console
    from llmtt.spec.variables import apply_seed_names

    for warning in apply_seed_names():  # the seed's LLM_TOOL_TEST_* names
        print(console(f"llmtt: warning: {warning}"), file=sys.stderr)
    try:
        return _dispatch(args)
    except LlmttError as exc:
        print(console(f"llmtt: {exc}"), file=sys.stderr)
        return 2


def _dispatch(args: argparse.Namespace) -> int:
    """The command's module, imported only when that command runs (`llmtt --help` stays quick)."""
    from llmtt.commands import agents, browse, ci, clean, project

    command = args.command
    if command in ("validate", "scenarios", "clean", "bless", "check"):
        root = args.project
        if command == "validate":
            return project.validate(root)
        if command == "scenarios":
            return browse.scenarios(root, args.tag, args.tier)
        if command == "clean":
            return clean.clean(root, args.older_than, args.yes)
        return ci.bless(root) if command == "bless" else ci.check(root, args.subset)
    if command == "show":
        return browse.show(args.project, args.name)
    if command == "lint":
        from llmtt.commands.lint import lint

        return lint(args)
    if command == "compare":
        return _compare(args.project, args.a, args.b, as_json=args.json)
    if command == "estimate":
        return ci.estimate(args)
    if command == "agents":
        return agents.agents(args)
    if command == "import" and args.source == "atif":
        from llmtt.commands.trajectories import import_atif

        return import_atif(args)
    if command == "import":
        return project.import_dataset(args)
    if command == "export":
        from llmtt.commands.trajectories import export_atif

        return export_atif(args)
    if command == "judge":
        from llmtt.commands.judge import judge

        return judge(args)
    if command == "init":
        return project.init(args)
    if command == "scripted-server":
        return _scripted_server(args.scenario, args.port, args.log)
    return project.schema(args.out)


def _compare(root: Path, a: str | None, b: str | None, *, as_json: bool) -> int:
    from llmtt.errors import LlmttError
    from llmtt.results.compare import as_json as json_text
    from llmtt.results.compare import as_text, compare

    if (a is None) != (b is None):
        raise LlmttError("compare takes no side (the baseline comparison) or two: A and B")
    found = compare(root, a, b)
    print(json_text(found) if as_json else as_text(found), end="")
    return 0


def _scripted_server(scenario: Path, port: int, log: Path | None) -> int:
    import threading

    from llmtt.scripted.server import ScriptedServer
    from llmtt.spec.scenario import load_scenario

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


if __name__ == "__main__":
    sys.exit(main())
