"""The Ray executor: the agent and evaluate layers of runs carried out on a Ray cluster.

Imported only by a `doit run` whose executor is "ray", once a layer is found pending; `doit list`
and local runs never import Ray. doit stays the planner: it runs the layers' actions in threads of
the controller (`-n` is the number of layers under way), and each such action sends its
`llmtt.executors.remote.Job` to the cluster as a stateless Ray task, waits for the run folder to
come back and lands it (see `llmtt.executors.remote`). The budget ledger stays a file on the
controller; the nodes reach it through one Ray actor placed on the controller's own node.

A layer lost to the cluster (a node or worker that died, an object lost) is sent once more;
an error of the layer itself, or of a node that cannot carry out the plan, is not.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

# Ray's core logs warnings of its own on stderr (e.g. an outward address it could not find);
# errors still show.
os.environ.setdefault("RAY_BACKEND_LOG_LEVEL", "error")

import ray  # noqa: E402
import ray.exceptions as rex  # noqa: E402
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy  # noqa: E402

from llmtt import __version__
from llmtt.errors import LlmttError
from llmtt.execution.budget import BudgetExhausted, Ledger
from llmtt.executors.remote import Job, carry_out

# Failures of the cluster, not of the layer: the layer is sent once more.
LOST = (
    rex.NodeDiedError,
    rex.WorkerCrashedError,
    rex.LocalRayletDiedError,
    rex.ObjectLostError,
    rex.OutOfMemoryError,
    rex.OutOfDiskError,
    rex.RaySystemError,
)


class Lost(Exception):
    """A layer's attempt lost to the cluster (it may have run, and spent, in part)."""


@ray.remote(num_cpus=0)
class _LedgerActor:
    """The controller's ledger file, for the nodes: placed on the controller's node."""

    def __init__(self, path: str, budget: float) -> None:
        self.ledger = Ledger(Path(path), budget)

    def reserve(self, key: str, amount: float) -> str | None:
        try:
            self.ledger.reserve(key, amount)
        except BudgetExhausted as exc:
            return str(exc)
        return None

    def check(self, key: str, spent: float) -> str | None:
        return self.ledger.guard(key)(spent)

    def settle(self, key: str, cost: float | None, fallback: float) -> None:
        self.ledger.settle(key, cost, fallback)


@dataclass(frozen=True)
class LedgerProxy:
    """The ledger as a layer on a node uses it (llmtt.executors.remote.LedgerAccess)."""

    actor: Any

    def reserve(self, key: str, amount: float) -> None:
        """Hold `amount`, or raise BudgetExhausted."""
        refused = ray.get(self.actor.reserve.remote(key, amount))
        if refused is not None:
            raise BudgetExhausted(refused)

    def guard(self, key: str) -> Callable[[float], str | None]:
        """A running step's check against the session budget."""

        def check(spent: float) -> str | None:
            answer: str | None = ray.get(self.actor.check.remote(key, spent))
            return answer

        return check

    def settle(self, key: str, cost: float | None, fallback: float) -> None:
        """Replace a hold by what was spent."""
        ray.get(self.actor.settle.remote(key, cost, fallback))


def _remote_carry_out(
    job: Job, archive: bytes, ledger: LedgerProxy | None, keys: dict[str, str]
) -> dict[str, Any]:
    import socket

    node = f"ray:{ray.get_runtime_context().get_node_id()[:12]}@{socket.gethostname()}"
    return carry_out(job, archive, ledger, node, keys)


def _probe(job: Job, archive: bytes) -> dict[str, Any]:
    """On one node: this node's llmtt, and whether it plans `job`'s run as the controller did."""
    import secrets
    import shutil

    from llmtt.executors.remote import node_run, unpacked

    root = unpacked(job.project, archive)
    task = Path(".llmtt-remote") / f"probe-{secrets.token_hex(8)}"
    problem = None
    try:
        node_run(root, job, task)
    except LlmttError as exc:
        problem = str(exc)
    finally:
        shutil.rmtree(root / task, ignore_errors=True)
    return {"llmtt": __version__, "python": sys.version.split()[0], "problem": problem}


class Cluster:
    """This invocation's connection to the cluster (one per controller process)."""

    def __init__(
        self,
        settings: dict[str, Any],
        project: tuple[str, bytes],
        ledger: Any,
        key_names: list[str],
    ) -> None:
        self.settings = settings
        self.key_names = key_names
        self.digest = project[0]
        self.archive = ray.put(project[1])
        self.ledger: LedgerProxy | None = None
        if ledger is not None:
            here = ray.get_runtime_context().get_node_id()
            actor = _LedgerActor.options(  # type: ignore[attr-defined]
                scheduling_strategy=NodeAffinitySchedulingStrategy(here, soft=False)
            ).remote(str(ledger.path), ledger.budget)
            self.ledger = LedgerProxy(actor)
        resources = {"num_cpus": settings["num_cpus"], "resources": settings["resources"] or None}
        self.task = ray.remote(max_retries=0)(_remote_carry_out).options(**resources)
        self._checked: str | None = None
        self._check_lock = threading.Lock()

    def check_nodes(self, job: Job) -> None:
        """Once per invocation: every live node plans `job`'s run as the controller did, with
        the same llmtt; otherwise one line saying which node and why (LlmttError)."""
        with self._check_lock:
            if self._checked is not None:
                if self._checked:
                    raise LlmttError(self._checked)
                return
            self._checked = self._check(job) or ""
            if self._checked:
                raise LlmttError(self._checked)

    def _check(self, job: Job) -> str | None:
        probe = ray.remote(max_retries=0)(_probe)
        nodes = [n for n in ray.nodes() if n.get("Alive")]  # type: ignore[no-untyped-call]
        refs = [
            probe.options(
                num_cpus=0,
                scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False),
            ).remote(job, self.archive)
            for n in nodes
        ]
        for node, ref in zip(nodes, refs, strict=True):
            where = f"Ray node {node.get('NodeManagerAddress')} ({node['NodeID'][:8]})"
            try:
                found = ray.get(ref)
            except rex.RayError as exc:
                return f"{where} cannot run llmtt: {_first_line(exc)}"
            if found["llmtt"] != __version__:
                return (
                    f"{where} has llmtt {found['llmtt']}, the controller {__version__}: install "
                    "the same llmtt on every node"
                )
            if found["problem"]:
                return f"{where} cannot carry out this plan: {found['problem']}"
        return None

    def carry_out(self, job: Job, budgeted: bool) -> dict[str, Any]:
        """One attempt at a layer on the cluster (`budgeted`: it draws on the session budget):
        what the node sent back; Lost when the cluster lost it, LlmttError when the layer
        failed there.

        The keys go as an argument of their own: small, it travels inside the task's message
        and is never put in the object store (which may spill to a node's disk)."""
        keys = {n: os.environ[n] for n in self.key_names if os.environ.get(n)}
        ref = self.task.remote(job, self.archive, self.ledger if budgeted else None, keys)
        try:
            result: dict[str, Any] = ray.get(ref)
            return result
        except rex.TaskCancelledError:
            raise KeyboardInterrupt from None
        except rex.RayTaskError as exc:
            cause = exc.cause
            if isinstance(cause, LlmttError):
                raise LlmttError(f"on a Ray node: {cause}") from None
            raise LlmttError(f"on a Ray node: {_first_line(exc)}") from None
        except LOST as exc:
            raise Lost(_first_line(exc)) from None
        except rex.RayError as exc:
            why = _first_line(exc)
            raise LlmttError(f"the Ray cluster could not carry out the layer: {why}") from None
        except BaseException:
            ray.cancel(ref)  # ^C or SIGTERM: the node ends the run's processes
            raise


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return f"{type(exc).__name__}: " + text.splitlines()[-1 if "Error" in text else 0][:500]


_CLUSTER: Cluster | None = None
_LOCK = threading.Lock()


def cluster(
    settings: dict[str, Any], root: Path, results: Path, ledger: Any, key_names: list[str]
) -> Cluster:
    """This process's connection to the cluster, made at the first layer that needs it."""
    global _CLUSTER
    with _LOCK:
        if _CLUSTER is None:
            from llmtt.executors.remote import pack_project

            project = pack_project(root, results, settings["exclude"])
            address = settings["address"] or os.environ.get("RAY_ADDRESS") or None
            if address is not None and address.startswith("ray://"):
                raise LlmttError(
                    f"executor=ray joins the cluster as a driver, not as a Ray Client ({address}): "
                    "make this machine a node of the cluster (`ray start --address=HEAD:6379 "
                    "--num-cpus=0`) and give the head's host:port"
                )
            if address is not None and address != "auto":
                _reachable(address)
            try:
                ray.init(
                    address=address,
                    runtime_env=settings["runtime_env"] or None,
                    namespace="llmtt",
                    log_to_driver=False,
                    logging_level=logging.ERROR,
                    configure_logging=True,
                    include_dashboard=False if address is None else None,
                )
            except (ConnectionError, RuntimeError, ValueError) as exc:
                where = address or "a local cluster"
                raise LlmttError(
                    f"cannot join the Ray cluster at {where}: {exc} (set [executor] address, or "
                    "RAY_ADDRESS, to the head's host:port)"
                ) from None
            _CLUSTER = Cluster(settings, project, ledger, key_names)
        return _CLUSTER


def _reachable(address: str, timeout: float = 10.0) -> None:
    """LlmttError at once when nothing answers at the head's host:port (Ray itself would keep
    trying for minutes)."""
    import socket

    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            pass
    except (OSError, ValueError) as exc:
        raise LlmttError(
            f"no Ray cluster answers at {address} ({exc}): start its head (`ray start --head`), "
            "or set [executor] address (or RAY_ADDRESS) to the head's host:port"
        ) from None


_SLOTS: dict[str, threading.BoundedSemaphore] = {}


def _slot(settings: dict[str, Any], model: str | None) -> threading.BoundedSemaphore | None:
    """The semaphore that keeps a model's runs under way within [executor]
    max_in_flight_per_model, if it has a limit."""
    limit = settings["max_in_flight_per_model"].get(model) if model else None
    if limit is None:
        return None
    with _LOCK:
        return _SLOTS.setdefault(str(model), threading.BoundedSemaphore(limit))


def _attempts(
    c: Cluster, job: Job, model: str | None, budgeted: bool, lost: Callable[[str], bool]
) -> dict[str, Any]:
    """The layer carried out on the cluster, sent once more when the cluster lost it and
    `lost(why)` (told of each loss) allows it."""
    try:
        c.check_nodes(job)
    except LlmttError as exc:
        # No layer can go anywhere: the invocation ends, on this one line; what finished is
        # kept, and the runs stay pending.
        raise SystemExit(f"llmtt: {exc}") from None
    slot = _slot(c.settings, model)
    while True:
        if slot is not None:
            slot.acquire()
        try:
            return c.carry_out(job, budgeted)
        except Lost as exc:
            if not lost(str(exc)):
                raise LlmttError(
                    f"{job.run_id}: the Ray cluster lost its {job.layer} layer twice ({exc}); "
                    "it stays pending"
                ) from None
        finally:
            if slot is not None:
                slot.release()


def agent_layer(
    c: Cluster,
    job: Job,
    project: Any,
    run: Any,
    ledger: Ledger | None,
    held: float | None,
    hold_again: Callable[[], float | None],
) -> dict[str, Any]:
    """A run's agent layer on the cluster, landed in its run folder: run.json's record.

    A paid run's hold is settled by what its events say it cost. An attempt the cluster lost
    may have spent money that no event brought back: its hold counts as spent, it is written
    into run.json (`lost_attempts`), and the layer is sent once more only under a new hold.
    """
    from llmtt.agents.pricing import pricing_of
    from llmtt.execution.agent_layer import attempts_given_up, execute_run, record_lost
    from llmtt.execution.budget import spent_by
    from llmtt.executors.remote import land
    from llmtt.plan.keys import ATTEMPTS
    from llmtt.util.atomic import read_json, write_json

    key = f"{run.run_id}:agent"
    lost: list[dict[str, Any]] = []
    refusal: list[str] = []
    landed = False

    def again(why: str) -> bool:
        nonlocal held
        lost.append({"error": why, "held_usd": held})
        if ledger is not None and held is not None:
            ledger.settle(key, None, held)
            held = None
        record_lost(project, run, f"lost by the Ray cluster ({why})", here=False)
        if len(lost) > 1:
            raise _LostTwice(f"the Ray cluster lost the agent layer twice ({why})")
        print(f"llmtt: {run.run_id}: lost by the Ray cluster ({why}); sent once more")
        try:
            held = hold_again()
        except BudgetExhausted as exc:
            refusal.append(str(exc))
            raise _Refused from None
        return True

    given_up = attempts_given_up(run, project.config.run.provider_attempts)
    try:
        try:
            if given_up is not None:
                refusal.append(given_up)
                raise _Refused
            result = _attempts(c, job, run.model, held is not None, again)
        except _Refused:
            record = execute_run(project, run, refusal=refusal[0])
            result = None
        except _LostTwice as exc:
            # Recorded as a run not carried out, so the reports list it; it stays pending.
            record = execute_run(project, run, refusal=str(exc))
            result = None
        if result is not None:
            # The run's record of attempts is the controller's (the attempts the cluster lost
            # included): a node starts from an empty folder, and sends back its own line.
            path = run.dir / ATTEMPTS
            earlier = path.read_bytes() if path.exists() else b""
            after = {ATTEMPTS: earlier}
            land(result["files"], run.dir, first=["run.json"], last="run.json", after=after)
            landed = True
            record = result["value"]
    finally:
        if ledger is not None and held is not None:
            # Nothing landed: what the attempt spent is unknown, its hold counts as spent
            # (nothing, when it was not sent: the provider had failed it too often).
            spent = spent_by(run.dir, pricing_of(run.model, project.config.models))
            ledger.settle(key, spent if landed else (0.0 if given_up else None), held)
    if lost:
        record = {**read_json(run.dir / "run.json"), "lost_attempts": lost}
        write_json(run.dir / "run.json", record)
    return record


class _Refused(Exception):
    """No money left for another attempt at a lost run."""


class _LostTwice(Exception):
    """The cluster lost both attempts at a layer."""


def evaluate_layer(c: Cluster, job: Job, project: Any, run: Any) -> dict[str, Any] | None:
    """A run's evaluate layer on the cluster, landed in its run folder, its records appended
    to the results store here: what evaluate_run returns."""
    from llmtt.executors.remote import land, pack_dir
    from llmtt.results.store import append_evaluation, append_result

    losses: list[str] = []

    def again(why: str) -> bool:
        losses.append(why)
        if len(losses) > 1:
            return False
        print(f"llmtt: {run.run_id}: evaluation lost by the Ray cluster ({why}); sent once more")
        return True

    job = replace(job, run_files=pack_dir(run.dir))
    result = _attempts(c, job, None, True, again)
    land(
        result["files"],
        run.dir,
        first=[],
        last="result.json" if run.judge is None else "metrics.json",
    )
    redact = project.redactor()
    for line in result["records"].get("evaluations.jsonl", []):
        append_evaluation(project.results_dir / "evaluations.jsonl", line, redact)
    for line in result["records"].get("results.jsonl", []):
        append_result(project.results_dir / "results.jsonl", line, redact)
    value: dict[str, Any] | None = result["value"]
    return value
