"""`llmtt export atif` and `llmtt import atif`: runs as ATIF trajectories, and back."""

from __future__ import annotations

import argparse
import difflib
import os
import sys
from pathlib import Path

from llmtt.errors import LlmttError


def export_atif(args: argparse.Namespace) -> int:
    """Write each run carried out (`all`, or one run id) as `<out>/<run id>.json`: the runs in
    the results folder, whichever invocation selected them."""
    from llmtt import __version__
    from llmtt.spec.project import load_project
    from llmtt.trajectories.export import export_run
    from llmtt.util.atomic import read_json, write_json

    project = load_project(args.project)
    results = project.results_dir
    found = _carried_out(results)
    if args.run != "all":
        if args.run not in found:
            near = difflib.get_close_matches(args.run, list(found), n=3)
            hint = f"; did you mean {', '.join(near)}?" if near else " (`doit list` names them)"
            raise LlmttError(f"export atif: no run {args.run!r} carried out in {results}{hint}")
        found = {args.run: found[args.run]}
    prompts = {s.name: s.spec.task.prompt for s in project.scenarios}
    out: Path = args.out or results / "atif"
    redact = project.redactor()
    written = 0
    for run_id, folder in found.items():
        scenario = read_json(folder / "run.json").get("scenario")
        if scenario not in prompts:
            print(
                f"llmtt: warning: {run_id}: its scenario {scenario!r} is gone; not exported",
                file=sys.stderr,
            )
            continue
        trajectory = export_run(folder, prompts[scenario], __version__)
        try:
            write_json(out / f"{run_id}.json", trajectory, redact)  # redacted like every artifact
        except OSError as exc:
            raise LlmttError(
                f"export atif: --out {out}: cannot write {run_id}.json: {exc}"
            ) from None
        written += 1
    print(f"wrote {written} trajectory file(s) (ATIF-v1.7) to {out}")
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


def _carried_out(results: Path) -> dict[str, Path]:
    """Every run folder whose agent layer is done, by run id (its path in the results)."""
    found: dict[str, Path] = {}
    for folder, dirs, files in os.walk(results):
        if "run.json" in files:
            dirs.clear()  # a run's own folders (its workspace) hold no run
            if "events.jsonl" in files:
                found[os.path.relpath(folder, results)] = Path(folder)
        else:
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
    return found
