"""`llmtt init`, `llmtt import`, `llmtt validate` and `llmtt schema`: a project's files."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def init(args: argparse.Namespace) -> int:
    from llmtt.commands.init import init_project

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


def import_dataset(args: argparse.Namespace) -> int:
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


def validate(root: Path) -> int:
    from llmtt.plan.runs import build_plan
    from llmtt.spec.project import load_project
    from llmtt.spec.selection import Selection

    project = load_project(root)
    plan = build_plan(project, Selection())
    for warning in project.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    print(
        f"ok: {root / 'llmtt.toml'}, {len(project.scenarios)} scenarios, "
        f"{len(project.rubrics)} rubrics, {len(plan.runs)} runs planned"
    )
    return 0


def schema(out: Path) -> int:
    from llmtt.spec.config import Config
    from llmtt.spec.rubric import Rubric
    from llmtt.spec.scenario import Scenario
    from llmtt.util.atomic import write_text

    for name, model in (("llmtt.toml", Config), ("scenario", Scenario), ("rubric", Rubric)):
        path = out / f"{name}.schema.json"
        write_text(path, json.dumps(model.model_json_schema(), indent=2) + "\n")
        print(f"wrote {path}")
    return 0
