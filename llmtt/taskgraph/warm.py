"""A head start for the workers of a local `doit run -n N`: what they all need, loaded once
before they are forked, and what only the later layers need, loaded beside each first agent."""

from __future__ import annotations

import gc
import os
from typing import TYPE_CHECKING, Any

from llmtt.plan.cache import RunSpec

if TYPE_CHECKING:
    from llmtt.plan.runs import Run
    from llmtt.spec.project import Project
    from llmtt.taskgraph.session import Session

# A worker's warm-up of the later layers waits this long into its first agent's run: while the
# workers are still being forked and their agents started, it would only take a core from them.
WARM_AFTER_SECS = 0.5


def warm_workers(session: Session, task: Any) -> None:
    """Once a layer is found pending in a `doit run -n N`, before doit's main process forks
    its workers: the head start (`_head_start`) for that layer's run. Under llmtt's loader the
    workers are forked by a forker, which has had its own head start (`warm_forker`): the
    loader marks this one done."""
    if "workers" in session.warmed:
        return
    session.warmed.add("workers")
    args = task.actions[0].args if task.actions else []
    spec = args[-1] if args else None
    _head_start(session, spec if isinstance(spec, RunSpec) else None)


def warm_forker(session: Session) -> None:
    """In the forker of a `doit run -n N` (llmtt.taskgraph.forker), before it forks its first
    worker: the head start (`_head_start`) for the plan's first run without a record (the first
    agent a worker will likely carry out; a run done, or none, gives no hint). What the later
    layers need is not loaded here: the first agents would start that much later (about 0.1 s
    at -n 4 on two cores, bench/README.md), while each worker loads it beside its first agent."""
    pending = next((r for r in session.tasks.runs if not _recorded(r)), None)
    _head_start(session, pending)


def _recorded(spec: RunSpec) -> bool:
    return os.path.exists(os.path.join(spec.dir, "run.json"))


def _head_start(session: Session, spec: RunSpec | None) -> None:
    """Import what every worker needs to start its agent, load `spec`'s run, and freeze it all
    out of the garbage collector's sight, so that the workers share those pages and start at
    once instead of each doing the same work on two cores. What only the later layers need is
    left to each worker's agent run (`warm_evaluation`): the first agents start that much
    sooner."""
    import llmtt.agents.cli_agent  # noqa: F401
    import llmtt.execution.agent_layer  # noqa: F401
    import llmtt.plan.runs  # noqa: F401
    import llmtt.process.pty  # noqa: F401
    import llmtt.spec.project  # noqa: F401

    if spec is not None:
        try:
            project, run = session.run(spec)
            _warm_libraries(project, run)
        except Exception:  # noqa: BLE001 - only a head start: the task meets it again and says
            pass
    gc.freeze()


def _warm_libraries(project: Project, run: Run) -> None:
    """What the run's agent loads first (litellm, for llmtt's own agent loop: 3 s of CPU and
    140 MB, once here rather than in each worker, its pages shared). A judge's litellm is
    left to the workers, as the later layers are (it may not be asked at all)."""
    from llmtt.agents.registry import make_agent

    make_agent(project.config, project.root, run.agent).warm()


def warm_evaluation(session: Session, project: Project) -> None:
    """In a worker of a `doit run -n N`, as its first agent starts: import what the evaluate
    and report layers need and compile the evaluation.md template, in a thread of its own (the
    agent's run waits on the agent, not on the interpreter), so that neither the start of the
    first agents nor the evaluation after them waits for it."""
    if "evaluation" in session.warmed or session.processes < 2:
        return
    session.warmed.add("evaluation")

    def warm() -> None:
        try:
            import jinja2  # noqa: F401

            import llmtt.evaluation.evaluate  # noqa: F401
            import llmtt.executors.remote  # noqa: F401
            import llmtt.report.render

            llmtt.report.render._environment(project).get_template("evaluation.md.j2")
        except Exception:  # noqa: BLE001 - only a head start: the report layer meets it and says
            pass

    import threading

    timer = threading.Timer(WARM_AFTER_SECS, warm)
    timer.name, timer.daemon = "llmtt-warm", True
    timer.start()
