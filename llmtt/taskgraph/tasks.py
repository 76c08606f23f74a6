"""The doit surface: the plan's runs in, doit tasks out.

Per run, `doit list` shows one task named after the run
(`<scenario>/<agent>[-<model>][-<variant>]/r<k>`): its last layer, which renders
`evaluation.md`. The earlier layers are its subtasks (`<run>:agent`, `<run>:evaluate`, and
`<run>:judge` when judged; `doit list --all` shows them), and `aggregate` writes the reports.
Each layer carries its own content key, so only what changed re-runs.
"""

from __future__ import annotations

import functools
import gc
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from doit.task import Task, clean_targets

from llmtt.plan.cache import RunSpec
from llmtt.plan.keys import TRIAGE_FILE
from llmtt.report.panels import panel_targets, remove_panels
from llmtt.taskgraph import actions
from llmtt.taskgraph.uptodate import JudgeCheck, KeyCheck, LayersDone
from llmtt.taskgraph.warm import warm_workers

if TYPE_CHECKING:
    from llmtt.taskgraph.session import Session

EVALUATE_OUTPUTS = ("metrics.json", "gates.json", "result.json")
AGENT_OUTPUTS = ("run.json", "events.jsonl", "transcript.raw.txt")
Pending = Callable[[Any], None] | None  # told of a task whose layer is found pending


def make_tasks(session: Session) -> Iterator[Task | dict[str, Any]]:
    """Every run's layers and the aggregate.

    The garbage collector is off while the tasks are made and what exists then is frozen out
    of its sight: tens of thousands of live objects made at once set off collections that each
    walk them all (at 10,000 runs, 1.2 s of collecting for 0.24 s of making them), and they
    live as long as the invocation anyway.
    """
    # In a local `doit run -n N`, a layer found pending gives the workers a head start.
    warm = functools.partial(warm_workers, session) if session.processes >= 2 else None
    gc.disable()
    try:
        for run in session.tasks.runs:
            yield from _run_tasks(session, run, warm)
        yield _aggregate_task(session, warm)
    finally:
        gc.freeze()
        gc.enable()


def _run_tasks(session: Session, run: RunSpec, warm: Pending) -> Iterator[Task]:
    """A run's layers as doit tasks; the last layer, report, is the run's visible task.

    Built as `Task` objects rather than dicts: the loader's dict handling and a group task per
    run cost a quarter of a no-op `doit run` on a plan of a thousand runs.
    """
    rid = run.run_id
    d = run.dir + os.sep
    judged = run.judge_model is not None
    layers = [f"{rid}:agent", f"{rid}:evaluate"] + ([f"{rid}:judge"] if judged else [])
    # result.json (the settled outcome) comes from the judge when there is one.
    evaluated = ["metrics.json", "gates.json"] + ([] if judged else ["result.json"])
    task_io = session.task_io
    yield Task(
        layers[0],
        [(actions.agent_action, [session, run])],
        targets=[d + n for n in AGENT_OUTPUTS],
        uptodate=[KeyCheck("agent", run.keys["agent"], warm)],
        clean=[(_remove_dir, [Path(run.dir)])],
        doc=f"launch {run.agent} for {run.label}",
        verbosity=2,
        io=task_io,
        subtask_of=rid,
    )
    yield Task(
        layers[1],
        [(actions.evaluate_action, [session, run])],
        file_dep=[d + "run.json"],
        targets=[d + n for n in evaluated],
        uptodate=[KeyCheck("evaluate", run.keys["evaluate"], warm)],
        clean=True,
        doc=f"metrics and gates of {run.label}",
        verbosity=2,
        io=task_io,
        subtask_of=rid,
    )
    if judged:
        yield Task(
            layers[2],
            [(actions.judge_action, [session, run])],
            file_dep=[d + "metrics.json", d + "gates.json"],
            targets=[d + "judge.json", d + "result.json"],
            uptodate=[JudgeCheck("judge", run.keys["judge"], warm, d + "judge.json")],
            clean=True,
            doc=f"LLM judge ({run.judge_model}) of {run.label}",
            verbosity=2,
            io=task_io,
            subtask_of=rid,
        )
    triaged = "triage" in run.keys
    if triaged:
        # After the outcome is settled (result.json, the evaluate or judge layer's), and only
        # when the user switched it on; it asks about failed runs alone.
        layers.append(f"{rid}:triage")
        yield Task(
            layers[-1],
            [(actions.triage_action, [session, run])],
            file_dep=[d + "result.json"],
            targets=[d + TRIAGE_FILE],
            uptodate=[KeyCheck("triage", run.keys["triage"], warm)],
            clean=True,
            doc=f"why {run.label} failed, in a model's words",
            verbosity=2,
            io=task_io,
            subtask_of=rid,
        )
    report_check: list[Any] = [KeyCheck("report", run.keys["report"], warm)]
    if session.show_status:
        report_check.append(LayersDone(layers))
    yield Task(
        rid,
        [(actions.report_action, [session, run])],
        file_dep=[d + n for n in EVALUATE_OUTPUTS]
        + ([d + "judge.json"] if judged else [])
        + ([d + TRIAGE_FILE] if triaged else []),
        targets=[d + "evaluation.md"],
        task_dep=layers,
        uptodate=report_check,
        clean=True,
        doc=run.label,
        verbosity=2,
        io=task_io,
    )


def _aggregate_task(session: Session, warm: Pending) -> dict[str, Any]:
    results = session.results
    return {
        "basename": "aggregate",
        "doc": "report.md and report.json over every selected run",
        "actions": [(actions.aggregate_action, [session])],
        "file_dep": [os.path.join(run.dir, "result.json") for run in session.tasks.runs]
        + [
            os.path.join(run.dir, TRIAGE_FILE) for run in session.tasks.runs if "triage" in run.keys
        ],
        # report.html's runs' panels, in the files of a folder beside it (llmtt.report.panels)
        "targets": [
            str(results / n) for n in ("report.md", "report.json", "report.html", "junit.xml")
        ]
        + [str(path) for path in panel_targets(results, len(session.tasks.runs))],
        "uptodate": [KeyCheck("aggregate", session.tasks.aggregate_key, warm)],
        # Every file of report-runs/ and the folder, first: a selection narrower than the one
        # that wrote them lists fewer of them as targets.
        "clean": [(remove_panels, [results]), clean_targets],
        "verbosity": 2,
        "io": session.task_io,
    }


def _remove_dir(path: Path) -> None:
    if path.exists():
        shutil.rmtree(path)
