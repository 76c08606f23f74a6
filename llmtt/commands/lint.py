"""`llmtt lint`: the free static tier, before any paid run. Reads the target tool's help and
every subcommand's, the guidance files (and runs their examples), and the scenarios' gates
against their prompts; prints the findings, writes them to the results folder's lint.json (the
aggregate report puts them beside what agents hit on each subcommand), and exits 1 on a finding
at or above `--fail-on`."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from llmtt.errors import LlmttError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """`llmtt lint`'s options."""
    parser.add_argument("project", nargs="?", default=".", type=Path, help="(default: .)")
    parser.add_argument("--json", action="store_true", help="print the findings as JSON")
    parser.add_argument(
        "--fail-on",
        choices=("info", "warning", "error", "never"),
        default="error",
        help="exit 1 on a finding at this level or above (default: error)",
    )
    parser.add_argument(
        "--subcommand",
        action="append",
        default=[],
        metavar="NAME",
        help="only these subcommands of the tool (repeatable, comma lists allowed)",
    )
    parser.add_argument(
        "--scenario",
        action="append",
        default=[],
        metavar="NAME",
        help="only these scenarios (repeatable, comma lists allowed)",
    )
    parser.add_argument(
        "--no-examples", action="store_true", help="do not run the guidance's shell examples"
    )
    parser.add_argument(
        "--timeout",
        type=_positive,
        default=5.0,
        metavar="SECS",
        help="limit of each call of the tool: one still running then waits for input (default: 5)",
    )
    parser.add_argument(
        "--max-help-tokens",
        type=_count,
        default=2000,
        metavar="N",
        help="a help longer than this is a warning (tokens of about 4 characters; default: 2000)",
    )
    parser.add_argument(
        "--max-error-tokens",
        type=_count,
        default=500,
        metavar="N",
        help="an answer to a wrong call longer than this is a warning (default: 500)",
    )
    parser.add_argument(
        "--max-guidance-tokens",
        type=_count,
        default=10000,
        metavar="N",
        help="a guidance file longer than this is a warning (default: 10000)",
    )


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r}: give a number of seconds above 0")
    return value


def _count(text: str) -> int:
    if not text.isdigit() or int(text) == 0:
        raise argparse.ArgumentTypeError(f"{text!r}: give a whole number above 0")
    return int(text)


def _names(values: list[str]) -> tuple[str, ...]:
    return tuple(n.strip() for v in values for n in v.split(",") if n.strip())


def lint(args: argparse.Namespace) -> int:
    """Run the checks, print and save the findings; 1 on a finding at `--fail-on` or above."""
    from llmtt.lint.findings import LINT_FILE, at_least
    from llmtt.lint.project import Options, lint_project
    from llmtt.lint.surface import Bounds
    from llmtt.spec.project import load_project
    from llmtt.util.atomic import write_json

    project = load_project(args.project)
    options = Options(
        bounds=Bounds(
            timeout_secs=args.timeout,
            max_help_tokens=args.max_help_tokens,
            max_error_tokens=args.max_error_tokens,
        ),
        subcommands=_names(args.subcommand),
        scenarios=_names(args.scenario),
        examples=not args.no_examples,
        max_guidance_tokens=args.max_guidance_tokens,
    )
    report = lint_project(project, options)
    data = report.as_json()
    redact = project.redactor()
    try:
        write_json(project.results_dir / LINT_FILE, data, redact)
    except OSError as exc:
        raise LlmttError(f"cannot write {project.results_dir / LINT_FILE}: {exc}") from None
    if args.json:
        print(json.dumps(redact.value(data), indent=2))
    else:
        print(redact(report.as_text()), end="")
    if args.fail_on == "never":
        return 0
    return 1 if any(at_least(f.level, args.fail_on) for f in report.findings) else 0
