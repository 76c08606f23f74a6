"""`llmtt export atif` and `llmtt import atif`: runs as ATIF trajectories, and back."""

from __future__ import annotations

import argparse
import difflib
import sys
from pathlib import Path

from llmtt.errors import LlmttError


def export_atif(args: argparse.Namespace) -> int:
    """Write each chosen run carried out (`all`, or one run id) as `<out>/<run id>.json`."""
    from llmtt import __version__
    from llmtt.plan.runs import build_plan
    from llmtt.spec.project import load_project
    from llmtt.spec.selection import Selection
    from llmtt.trajectories.export import export_run
    from llmtt.util.atomic import write_json

    project = load_project(args.project)
    runs = build_plan(project, Selection()).runs
    if args.run != "all":
        chosen = [r for r in runs if r.run_id == args.run]
        if not chosen:
            near = difflib.get_close_matches(args.run, [r.run_id for r in runs], n=3)
            hint = f"; did you mean {', '.join(near)}?" if near else " (`doit list` names them)"
            raise LlmttError(f"export atif: no run {args.run!r} in the project's plan{hint}")
        runs = chosen
    out: Path = args.out or project.results_dir / "atif"
    redact = project.redactor()
    written = skipped = 0
    for run in runs:
        if not (run.dir / "run.json").exists() or not (run.dir / "events.jsonl").exists():
            skipped += 1
            if args.run != "all":
                raise LlmttError(f"export atif: {run.run_id} has not run yet (`doit run` runs it)")
            continue
        trajectory = export_run(run.dir, run.scenario.spec.task.prompt, __version__)
        write_json(out / f"{run.run_id}.json", trajectory, redact)  # redacted like every artifact
        written += 1
    print(
        f"wrote {written} trajectory file(s) (ATIF-v1.7) to {out}"
        + (f"; {skipped} run(s) not carried out yet" if skipped else "")
    )
    return 0


def import_atif(args: argparse.Namespace) -> int:
    """Keep a trajectory as a run to replay of an agent named after its own; say how to run it."""
    from llmtt.importers.atif import import_trajectory

    done = import_trajectory(
        args.project, args.file, args.scenario, agent=args.agent, workspace=args.workspace
    )
    print(f"kept {done.trajectory} as scenario {args.scenario} of agent {done.agent}")
    if done.advice:
        print(done.advice, file=sys.stderr)
    return 0
