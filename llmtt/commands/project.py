"""`llmtt init`, `llmtt import`, `llmtt validate` and `llmtt schema`: a project's files."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from llmtt.plan.runs import Plan
    from llmtt.spec.project import Project


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
    from llmtt.errors import LlmttError
    from llmtt.plan.runs import build_plan
    from llmtt.spec.project import load_project
    from llmtt.spec.selection import Selection

    project = load_project(root)
    plan = build_plan(project, Selection())
    for warning in project.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    missing = missing_dependencies(project, plan)
    if missing:
        raise LlmttError("; ".join(missing))
    print(
        f"ok: {root / 'llmtt.toml'}, {len(project.scenarios)} scenarios, "
        f"{len(project.rubrics)} rubrics, {len(plan.runs)} runs planned"
    )
    return 0


def missing_dependencies(project: Project, plan: Plan) -> list[str]:
    """What the planned runs need that this Python lacks (the litellm agent, a judge or an
    evaluator that calls a model, without litellm), each with the command that installs it."""
    from llmtt.agents.registry import make_agent
    from llmtt.evaluation.evaluators.registry import evaluator_class
    from llmtt.providers import litellm_missing

    found: list[str | None] = []
    for agent in dict.fromkeys(run.agent for run in plan.runs):
        found.append(make_agent(project.config, project.root, agent).missing_dependency())
    if any(run.judge is not None for run in plan.runs):
        found.append(litellm_missing("the judge"))
    types = dict.fromkeys(
        spec.type for run in plan.runs for spec in run.scenario.spec.evaluation.evaluators
    )
    for type_id in types:
        if evaluator_class(type_id, project.config.evaluators, project.root).calls_model:
            found.append(litellm_missing(f"evaluator {type_id}"))
    return [message for message in dict.fromkeys(found) if message is not None]


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
