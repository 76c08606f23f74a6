"""What each layer's task does when doit executes it: the run's agent, its evaluation, the
judge, its evaluation.md, and the reports over every run.

Each action gets the invocation's session (`llmtt.taskgraph.session`) and the run's spec. A
user's mistake met here fails the task with its message (`_guarded`); an agent that fails is a
result, recorded.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from doit.exceptions import TaskFailed

from llmtt.errors import LlmttError, no_space
from llmtt.execution.budget import BudgetExhausted, expected_cost, spent_by
from llmtt.plan.cache import RunSpec, TaskPlan
from llmtt.taskgraph.depfile import record_values, saved_values
from llmtt.taskgraph.warm import warm_evaluation
from llmtt.util.atomic import read_json, read_jsonl
from llmtt.util.text import printable

if TYPE_CHECKING:
    from llmtt.plan.runs import Run
    from llmtt.spec.project import Project
    from llmtt.taskgraph.session import Session


def console(text: str) -> str:
    """A message with secrets masked (imported only when there is one to print) and the
    terminal sequences and control characters of what a run printed made inert."""
    from llmtt.redaction import console as masked

    return printable(masked(text))


def _outcome_line(run_id: str, record: dict[str, Any]) -> str:
    """`llmtt: RUN: PASS - reason`: a record is redacted, but its reason may quote output."""
    return printable(f"llmtt: {run_id}: {record['outcome'].upper()} - {record['outcome_reason']}")


def _guarded(action: Callable[..., Any]) -> Callable[..., Any]:
    """A user's mistake met while running a task fails it with the message, not a traceback."""

    @functools.wraps(action)
    def wrapper(*args: Any) -> Any:
        where = args[1].run_id if len(args) > 1 else "the reports"
        try:
            return action(*args)
        except LlmttError as exc:
            return TaskFailed(console(f"llmtt: {exc}"))
        except OSError as exc:  # the environment's fault (a folder made read-only, a full disk)
            full = no_space(exc, args[1].dir if len(args) > 1 else args[0].results)
            if full is not None:
                return TaskFailed(console(f"llmtt: {where}: {full}"))
            return TaskFailed(
                console(f"llmtt: {where}: {exc.strerror or exc}: {exc.filename or ''}")
            )
        except KeyboardInterrupt as exc:
            # doit saves what finished and lets ^C end the process; the loader's excepthook
            # reports it.
            exc.add_note(where)
            raise
        except Exception as exc:
            full = no_space(exc)  # SQLite's "database or disk is full", from a file of results
            if full is None:
                raise
            return TaskFailed(console(f"llmtt: {where}: {full}"))

    return wrapper


@_guarded
def agent_action(session: Session, spec: RunSpec) -> dict[str, Any]:
    """The agent layer: launch the run's agent (or refuse it, the budget spent)."""
    import threading

    from llmtt.execution.agent_layer import execute_run

    if session.executor == "local" and threading.current_thread() is not threading.main_thread():
        # doit told to run tasks in threads some other way than -P (its config, a dodo.py).
        raise LlmttError(
            "llmtt carries out each run in a process of its own, and doit runs this one in a "
            "thread: set doit's parallel type to process (par_type), or leave it out"
        )
    project, run = session.run(spec)
    warm_evaluation(session, project)
    key = f"{run.run_id}:agent"
    amount: float | None = None
    refusal: str | None = None
    if _paid_agent(project, run):
        try:
            amount = _reserve(session, run, key, functools.partial(_agent_cost_hold, project))
        except BudgetExhausted as exc:
            # Recorded as a run not carried out, so the reports list it; it stays pending.
            refusal = str(exc)
    if session.executor == "ray" and refusal is None:
        record = _remote_agent(session, project, run, spec, amount)
    else:
        ledger = session.ledger
        guard = ledger.guard(key) if ledger is not None and amount is not None else None
        try:
            record = execute_run(project, run, session_budget=guard, refusal=refusal)
        finally:
            if ledger is not None and amount is not None:
                from llmtt.agents.pricing import pricing_of

                pricing = pricing_of(run.model, project.config.models)
                ledger.settle(key, spent_by(run.dir, pricing), amount)
    values: dict[str, Any] = {"status": record["status"]}
    if record["status"] == "error":
        # Carried on to evaluate, report (which fails the run with the reason) and aggregate,
        # so the reports show it; KeyCheck keeps the agent layer pending.
        values["error"] = record["error"]
    # What was paid for is on record now, even if doit is killed before it saves the task.
    record_values(session.dep_file, key, _saved(spec, "agent", values))
    return values


@_guarded
def agent_lost(session: Session, spec: RunSpec, cause: str) -> dict[str, Any]:
    """An agent layer whose worker process died (`llmtt.taskgraph.runner`), in doit's main
    process: the run recorded as not carried out, saying why (the reports show it, the next
    `doit run` carries it out again); what it held of the session budget counts as spent, what
    it cost being unknown; the attempt goes into attempts.jsonl with what its records show it
    spent, so that the reports count it. The layer's values, as `agent_action` returns them."""
    from llmtt.execution.agent_layer import execute_run, record_lost

    project, run = session.run(spec)
    if session.ledger is not None:
        session.ledger.settle(f"{run.run_id}:agent", None, 0.0)
    record_lost(project, run, cause)
    record = execute_run(project, run, refusal=cause)
    return {"status": "error", "error": record["error"]}


@_guarded
def evaluate_action(session: Session, spec: RunSpec) -> dict[str, Any]:
    """The evaluate layer: metrics, gates and evaluators of the run."""
    from llmtt.evaluation.evaluate import evaluate_run
    from llmtt.executors.remote import LedgerPurse
    from llmtt.results.store import ResultsStore

    project, run = session.run(spec)
    if session.executor == "ray":
        record = _remote_evaluate(session, project, run, spec)
    else:
        purse = LedgerPurse(session.ledger, run.run_id) if session.ledger is not None else None
        store = ResultsStore(project.results_dir, project.redactor())
        record = evaluate_run(project, run, store, purse)
    if record is not None and record["outcome"] != "error":
        print(_outcome_line(run.run_id, record))
    values: dict[str, Any] = {"status": "ok"}
    metrics = read_json(run.dir / "metrics.json")
    refused = (metrics.get("evaluators") or {}).get("refused")
    failed = (metrics.get("evaluators") or {}).get("errors")
    if refused:
        # An evaluator that may not call its model yet: the layer stays pending (KeyCheck),
        # the reports list the run.
        values = {"status": "error", "error": "an evaluator did not run: " + "; ".join(refused)}
    elif failed:
        # An evaluator that raised or gave another's results: pending until it is fixed (the
        # agent is not run again), the console and the reports say which and where.
        values = {"status": "error", "error": "an evaluator failed: " + "; ".join(failed)}
    # Saved now: evaluated again after a kill, its new gates.json would re-pay the judge.
    deps = [os.path.join(spec.dir, "run.json")]
    record_values(
        session.dep_file, f"{run.run_id}:evaluate", _saved(spec, "evaluate", values), deps
    )
    return values


def _remote_job(
    session: Session, layer: str, project: Project, run: Run, spec: RunSpec
) -> tuple[Any, Any]:
    """The cluster (joined at the first layer sent) and the job of one layer of a run."""
    from llmtt.executors import ray as raycluster
    from llmtt.executors.remote import PASSED_ENV, Job, key_names

    try:
        cluster = raycluster.cluster(
            session.tasks.executor,
            session.root,
            session.results,
            session.ledger,
            key_names(project),
        )
    except LlmttError as exc:
        # No layer can go anywhere: the invocation ends on this one line.
        raise SystemExit(console(f"llmtt: {exc}")) from None
    scenario = Path(spec.scenario_file)
    if not scenario.is_relative_to(session.root):
        raise LlmttError(
            f"executor=ray sends the project folder {session.root} to the nodes, and the "
            f"scenario file {scenario} is outside it"
        )
    words = {k: v for k, v in session.variables.items() if k not in ("budget", "executor")}
    job = Job(
        layer=layer,
        run_id=run.run_id,
        scenario=scenario.relative_to(session.root).as_posix(),
        keys=spec.keys,
        versions={"agent": run.agent_version, "target": run.target_version},
        selection=words,
        project=cluster.digest,
        env={name: os.environ.get(name) for name in PASSED_ENV},
    )
    return cluster, job


def _remote_agent(
    session: Session, project: Project, run: Run, spec: RunSpec, held: float | None
) -> Any:
    """The agent layer of a run on the Ray cluster."""
    from llmtt.executors import ray as raycluster

    cluster, job = _remote_job(session, "agent", project, run, spec)
    key = f"{run.run_id}:agent"
    return raycluster.agent_layer(
        cluster,
        job,
        project,
        run,
        session.ledger,
        held,
        lambda: _reserve(session, run, key, functools.partial(_agent_cost_hold, project)),
    )


def _remote_evaluate(session: Session, project: Project, run: Run, spec: RunSpec) -> Any:
    """The evaluate layer of a run on the Ray cluster."""
    from llmtt.executors import ray as raycluster

    cluster, job = _remote_job(session, "evaluate", project, run, spec)
    return raycluster.evaluate_layer(cluster, job, project, run)


def _saved(spec: RunSpec, layer: str, values: dict[str, Any] | None = None) -> dict[str, Any]:
    """A layer's values as doit saves them: its action's, then its KeyCheck's."""
    return {**(values or {}), "llmtt_key": spec.keys[layer]}


@_guarded
def judge_action(session: Session, spec: RunSpec) -> dict[str, Any]:
    """The judge layer: the LLM judge's verdict on the run."""
    from llmtt.evaluation.judge_layer import judge_run
    from llmtt.results.store import ResultsStore

    project, run = session.run(spec)
    judge = run.judge
    assert judge is not None
    key = f"{run.run_id}:judge"
    ledger = session.ledger
    purse = _JudgePurse(ledger, key) if ledger is not None and _paid_model(judge.model) else None
    store = ResultsStore(project.results_dir, project.redactor())
    # Nothing saved for the layer: never run, or `doit forget` (failed attempts asked again).
    forgotten = saved_values(session.dep_file, key) is None
    record = judge_run(project, run, store, purse, forgotten=forgotten)
    judged = read_json(run.dir / "judge.json")
    # Whether the judge was asked (a verdict stands when [judge] when changes: JudgeCheck);
    # `rules`: settled under the rule that a judge error is not the agent's fail (JudgeCheck).
    values: dict[str, Any] = {"status": "ok", "asked": not judged.get("not_asked"), "rules": 2}
    if judged.get("gave_up"):
        # Not asked again about this question: the layer is done, the run stays an error.
        print(console(f"llmtt: {run.run_id}: {record['outcome_reason']}"))
    elif record["outcome"] == "error":
        # Not judged (no budget, no key, a judge that could not answer...): the layer stays
        # pending, the reports list the run, and the run's last layer fails the invocation.
        values = {"status": "error", "error": record["outcome_reason"]}
    else:
        print(_outcome_line(run.run_id, record))
    # What was paid for is on record now, even if doit is killed before it saves the task.
    deps = [os.path.join(spec.dir, n) for n in ("metrics.json", "gates.json")]
    record_values(session.dep_file, key, _saved(spec, "judge", values), deps)
    return values


class _JudgePurse:
    """The session ledger, for the judge's samples of one run (each held under its name)."""

    def __init__(self, ledger: Any, key: str) -> None:
        self.ledger = ledger
        self.key = key

    def hold(self, name: str, amount: float) -> None:
        """Hold `amount` (BudgetExhausted when the budget cannot cover it)."""
        self.ledger.reserve(f"{self.key}:{name}", amount)

    def settle(self, name: str, cost: float | None, held: float) -> None:
        """Record what was spent; the hold goes."""
        self.ledger.settle(f"{self.key}:{name}", cost, held)


@_guarded
def triage_action(session: Session, spec: RunSpec) -> dict[str, Any]:
    """The triage layer: a model's one line on why a failed run failed ([triage] enabled)."""
    from llmtt.evaluation.paid_triage import cost_hold, triage_run
    from llmtt.providers import resolve_model

    project, run = session.run(spec)
    ledger = session.ledger
    key = f"{run.run_id}:triage"
    model = project.config.triage.model
    held: list[float] = []

    def reserve(prompt: str) -> None:
        if ledger is not None and _paid_model(model):
            assert model is not None
            amount = cost_hold(resolve_model(model, project.config.models), prompt)
            ledger.reserve(key, amount)
            held.append(amount)

    record: dict[str, Any] | None = None
    try:
        record = triage_run(project, run, reserve)
    finally:
        if ledger is not None and held:
            # What this attempt cost when it wrote its record; else (it raised) the hold.
            ledger.settle(key, None if record is None else record.get("cost_usd"), held[0])
    values: dict[str, Any] = {"status": "ok"}
    problem = record.get("skipped") if record.get("refused") else record.get("error")
    if record.get("gave_up"):
        # Not pending: asked again only when its inputs (result.json, the key) change.
        print(console(f"llmtt: {run.run_id}: the triage gave up: {record['gave_up']}"))
        values = {"status": "ok", "gave_up": str(record["gave_up"])}
    elif problem:
        # Not asked (no budget, no LLMTT_ENABLED=1...) or no answer: the layer stays pending
        # and the reports keep the rule-based line; the run's outcome is not the triage's.
        print(console(f"llmtt: {run.run_id}: the triage did not answer: {problem}"))
        values = {"status": "error", "error": str(problem)}
    deps = [os.path.join(spec.dir, "result.json")]
    record_values(session.dep_file, key, _saved(spec, "triage", values), deps)
    return values


@_guarded
def report_action(session: Session, spec: RunSpec) -> TaskFailed | None:
    """The report layer, the run's visible task: its evaluation.md."""
    from llmtt.report.render import render_evaluation

    project, run = session.run(spec)
    from llmtt.evaluation.outcome import JUDGE_GAVE_UP

    outcome, reason = render_evaluation(project, run)
    if outcome == "error" and not reason.startswith(JUDGE_GAVE_UP):
        # The run's last layer fails, so `doit run <run>` exits non-zero too; the aggregate,
        # which needs only the evaluation, still reports it.
        return TaskFailed(f"{run.run_id}: {reason}")
    return None


@_guarded
def aggregate_action(session: Session) -> TaskFailed | None:
    """The reports over every selected run."""
    from llmtt.evaluation.outcome import JUDGE_GAVE_UP
    from llmtt.report.aggregate import aggregate

    plan = session.plan()[0]
    if TaskPlan.of(plan) != session.tasks:
        raise session.stale("the runs or the aggregate key changed")
    data = aggregate(plan, _adaptive(session))
    summary = data["summary"]
    results = os.path.relpath(plan.project.results_dir / "report.md")
    print(
        f"llmtt: {summary['runs']} runs: {summary['passed']} passed, {summary['failed']} failed, "
        f"{summary['errors']} could not be carried out; see {results}"
    )
    errored = [r for r in data["runs"] if r["outcome"] in ("error", "missing")]
    # A judge that gave up is asked no more: said, but it fails no invocation after its own.
    given_up = [r["run_id"] for r in errored if r["outcome_reason"].startswith(JUDGE_GAVE_UP)]
    errored = [r for r in errored if r["run_id"] not in given_up]
    if given_up:
        print(
            f"llmtt: the judge gave up on {len(given_up)} run(s) (asked again when the "
            f"question changes, or after doit forget <run>:judge): {', '.join(given_up)}"
        )
    unjudged = [r["run_id"] for r in errored if r["outcome_reason"].startswith("judge error")]
    if unjudged:
        # The judge's failure, not the agents': said apart, in one line.
        print(
            f"llmtt: the judge could not answer about {len(unjudged)} run(s) (the next doit run "
            f"asks it again): {', '.join(unjudged)}"
        )
    if errored:
        lines = "\n".join(f"  {r['run_id']}: {r['outcome_reason']}" for r in errored)
        return TaskFailed(
            console(f"{len(errored)} run(s) could not be carried out (they stay pending):\n{lines}")
        )
    return None


def _adaptive(session: Session) -> dict[str, Any] | None:
    """repeats=auto: the design and where each scenario's comparison stands, for the reports."""
    if not session.selection.adaptive:
        return None
    from llmtt.results.adaptive import looks_of
    from llmtt.taskgraph.session import adaptive_round

    plan = session.plan()[0]
    spec = plan.project.config.compare
    _, rounds = adaptive_round(session.root, session.selection)  # with this round's runs done
    runs: dict[str, int] = {}
    for run in plan.runs:
        runs[run.scenario.name] = runs.get(run.scenario.name, 0) + 1
    return {
        "looks": looks_of(spec),
        "round_repeats": spec.round_repeats,
        "max_repeats": spec.max_repeats,
        "scenarios": {
            name: {"repeats": r.repeats, "status": r.status, "runs": runs.get(name, 0)}
            for name, r in sorted(rounds.items())
        },
    }


def _paid_model(model: str | None) -> bool:
    return model is not None and model != "scripted"


def _paid_agent(project: Project, run: Run) -> bool:
    from llmtt.agents.registry import make_agent

    return _paid_model(run.model) and not make_agent(project.config, project.root, run.agent).free


def _agent_cost_hold(project: Project, run: Run) -> float:
    """What a paid run holds while it runs: its own limit, else its expected cost."""
    if run.scenario.spec.cost.max_usd is not None:
        return run.scenario.spec.cost.max_usd
    history = read_jsonl(project.results_dir / "results.jsonl")
    return expected_cost(run, history, project.config.models) or 0.0


def _reserve(session: Session, run: Run, key: str, hold: Callable[[Run], float]) -> float | None:
    """Hold money for a paid step in the session budget (BudgetExhausted when it is spent)."""
    if session.ledger is None:
        return None
    amount = hold(run)
    session.ledger.reserve(key, amount)
    return amount
