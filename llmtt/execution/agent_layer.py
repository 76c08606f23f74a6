"""The agent layer of one run: workspace, setup, agent, and the artifacts that record them.

`run.json` is written last and atomically: its presence with `status` other than `error` is
what marks a run as carried out. Events and transcript are written under `.part` names while
the agent works and renamed when it is done, so a killed run never looks finished.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from llmtt import __version__
from llmtt.agents.base import Agent, AgentExit, PlacedSkill, RunContext
from llmtt.agents.pricing import Pricing, pricing_of
from llmtt.agents.registry import make_agent
from llmtt.errors import LlmttError
from llmtt.events import EventWriter
from llmtt.execution import isolation
from llmtt.execution.asciicast import CAST_FILE, Recorder, recorded
from llmtt.execution.budget import BUDGET_EXHAUSTED, usage_cost
from llmtt.execution.placement import (
    Placed,
    control_paths,
    laid_files,
    needles,
    placed_skills,
    placement,
)
from llmtt.execution.transcript import capped
from llmtt.execution.workspace import Workspace, WorkspaceError, prepare, run_setup
from llmtt.gateway.proxy import DRAIN_SECS, PLACEHOLDER_KEY, Gateway, Upstream
from llmtt.gateway.usage import WIRE_FILE, figures, fold, read_wire
from llmtt.plan.keys import ATTEMPTS
from llmtt.plan.runs import Run
from llmtt.process.sandbox.bwrap import Confinement, Sandbox, View, mounted
from llmtt.process.shell import ShellResult, run_shell
from llmtt.providers import endpoint_of
from llmtt.redaction import Redactor, console
from llmtt.scripted.server import ScriptedServer
from llmtt.spec.config import CONTROL_VARIANT, ModelSpec, NetworkPolicy, control_removes
from llmtt.spec.project import Project
from llmtt.spec.variables import expand_env
from llmtt.util.atomic import open_private, read_jsonl, write_json

RUN_FORMAT = 1
SCRIPTED = "scripted"
AGENT_ARTIFACTS = ("run.json", "events.jsonl", "transcript.raw.txt", "wire.jsonl", CAST_FILE)
# What a killed attempt leaves half-written: removed with the artifacts before the next one.
PARTS = ("events.jsonl.part", "transcript.raw.txt.part", f"{CAST_FILE}.part")
SCRIPTED_DRAIN_SECS = 1.0  # the scripted model answers at once: only a record on its way waits


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def execute_run(
    project: Project,
    run: Run,
    *,
    session_budget: Callable[[float], str | None] | None = None,
    refusal: str | None = None,
) -> dict[str, Any]:
    """Carry out one run and write its artifacts; return what went into `run.json`.

    `session_budget` stops the agent when the session's money is spent (see RunContext);
    a `refusal` (the budget was spent before it started) records the run as not carried out.
    """
    run.dir.mkdir(parents=True, exist_ok=True)
    # run.json last: while it is there, the records beside it are an earlier attempt's, which
    # a lost attempt must not be charged with (`_lost_spend`).
    for name in (*AGENT_ARTIFACTS[1:], *PARTS, AGENT_ARTIFACTS[0]):
        (run.dir / name).unlink(missing_ok=True)
    started_at, started = _now(), time.monotonic()
    record: dict[str, Any] = {
        "format": RUN_FORMAT,
        **run.identity(),
        "key": run.agent_key,
        "versions": {
            "llmtt": __version__,
            "agent": run.agent_version,
            "target": run.target_version,
        },
        "started_at": started_at,
    }
    agent = make_agent(project.config, project.root, run.agent)
    given_up = attempts_given_up(run, project.config.run.provider_attempts)
    placed: list[Placed] = []
    if refusal or given_up:
        outcome = _error(refusal or given_up or "")
    else:
        try:
            placed = placement(project.config, project.root, run.variant, agent, run.scenario)
        except LlmttError as exc:
            outcome = _error(f"variant {run.variant}: {exc}" if run.variant else str(exc))
        else:
            outcome = _ended(run, _run_agent(project, run, agent, placed, session_budget))
    record.update(
        {
            "finished_at": _now(),
            "duration_secs": round(time.monotonic() - started, 3),
            "agent_duration_secs": round(outcome.duration_secs, 3),
            "status": "error"
            if outcome.error
            else ("timeout" if outcome.timed_out else "completed"),
            "exit_code": outcome.exit_code,
            "timed_out": outcome.timed_out,
            "natural_stop": outcome.natural_stop,
            "stop_reason": outcome.reason or _stop_reason(run.dir / "events.jsonl"),
            "error": outcome.error,
            "free": agent.free or run.model == SCRIPTED,
            "isolation": isolation.record(project.config),
            "structured_events": agent.structured_events,
        }
    )
    if placed:
        record["placed"] = [p.record() for p in placed]
    drift = agent.drift(run.agent_version)
    if drift is not None:
        record["warnings"] = [drift]
    record = project.redactor().value(record)  # an error may quote setup output
    if not refusal and not given_up:
        _attempted(run, record, pricing_of(run.model, project.config.models, free=agent.free))
    write_json(run.dir / "run.json", record)
    return record


PROVIDER_FAILED = "the model provider failed, not the agent"


def _ended(run: Run, outcome: AgentExit) -> AgentExit:
    """How the run ended, with what its gateway saw. A run whose last request met a provider
    fault, or whose agent went on from an answer the provider cut, could not be carried out: it
    is not the agent's failure, and stays pending. A fault the agent recovered from (a 429 it
    waited out, a 5xx it retried) loses nothing, and the run stands. A run whose request was
    refused at a limit stopped for that reason."""
    records = read_wire(run.dir)
    if records is None:
        return outcome
    seen = fold(records, lambda *_: 0.0)
    if seen.last_fault is not None:
        return replace(outcome, error=f"{PROVIDER_FAILED}: {seen.last_fault}")
    if seen.went_on_from_cut is not None:
        # The session the agent had is not the one the model gave: it measures the provider.
        return replace(
            outcome,
            error=f"{PROVIDER_FAILED}: {seen.went_on_from_cut}, and the agent went on from "
            "the part it got",
        )
    last = records[-1] if records else {}
    if seen.refused is not None and (last.get("refused") or not outcome.error):
        if seen.refused.startswith(BUDGET_EXHAUSTED):
            return replace(outcome, error=seen.refused)
        # A limit the gateway held: the run stopped for it, and is judged (an agent that
        # took the refusal for an error of its own, as the litellm loop does, included).
        why = seen.refused if last.get("refused") else outcome.reason or seen.refused
        return replace(outcome, error=None, natural_stop=False, reason=why)
    return outcome


def attempts_given_up(run: Run, attempts: int) -> str | None:
    """Why the run is not tried again: the provider failed its last `attempts` attempts."""
    path = run.dir / ATTEMPTS
    try:
        earlier = [r for r in read_jsonl(path) if isinstance(r, dict)]
    except LlmttError:
        return None  # a damaged record of attempts stops nothing
    streak = []
    for attempt in reversed(earlier):
        if attempt.get("lost") and attempt.get("key") == run.agent_key:
            continue  # lost with its worker or node: says nothing of the provider
        if attempt.get("key") != run.agent_key or not attempt.get("provider_failed"):
            break
        streak.append(attempt)
    if len(streak) < attempts:
        return None
    return (
        f"not tried again: the model provider failed the last {len(streak)} attempts (the last: "
        f"{streak[0].get('error')}); remove {path} to try again, or raise [run] "
        "provider_attempts"
    )


def _attempted(run: Run, record: dict[str, Any], pricing: Pricing) -> None:
    """Add this attempt to the run's attempts.jsonl, which every attempt keeps: what each paid
    attempt cost, and how many in a row the provider failed."""
    records = read_wire(run.dir)
    seen = fold(records or [], pricing.price)
    requests: int | None = seen.sent
    cost = seen.cost
    if records is None:  # an agent outside the gateway: what its usage events said
        requests, cost = _events_spend(run.dir / "events.jsonl")
    attempt = {
        "key": run.agent_key,
        "started_at": record["started_at"],
        "status": record["status"],
        "error": record["error"],
        "provider_failed": str(record["error"] or "").startswith(PROVIDER_FAILED),
        "requests": requests,
        "cost_usd": cost,
        "cost_lower_bound": bool(seen.unreported),
    }
    _append_attempt(run, attempt)


def _append_attempt(run: Run, attempt: dict[str, Any]) -> None:
    """One line more of the run's attempts.jsonl."""
    with open(run.dir / ATTEMPTS, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(attempt, sort_keys=True) + "\n")


def record_lost(project: Project, run: Run, why: str, *, here: bool = True) -> None:
    """Add to the run's attempts.jsonl an attempt that was under way when what carried it out
    was lost (its worker process died; the Ray cluster lost it), as the reports count it: paid
    and in no result. `lost` leaves it out of the provider's failures in a row
    (`attempts_given_up`). Never raises: a record that cannot be written is said, and the run
    is recorded as not carried out all the same."""
    try:
        agent = make_agent(project.config, project.root, run.agent)
        pricing = pricing_of(run.model, project.config.models, free=agent.free)
        requests, cost, unsure = _lost_spend(run, pricing, here)
        attempt = {
            "key": run.agent_key,
            "started_at": None,
            "status": "error",
            "error": why,
            "provider_failed": False,
            "lost": True,
            "requests": requests,
            "cost_usd": cost,
            "cost_lower_bound": unsure,
        }
        run.dir.mkdir(parents=True, exist_ok=True)
        _append_attempt(run, attempt)
    except Exception as exc:  # noqa: BLE001 - the run's record of not being carried out comes first
        said = f"llmtt: {run.run_id}: warning: the lost attempt is not in {ATTEMPTS}: {exc}\n"
        sys.stderr.write(console(said))


def _lost_spend(run: Run, pricing: Pricing, here: bool) -> tuple[int | None, float | None, bool]:
    """What a lost attempt spent, as far as its run folder tells (requests, cost, whether that
    is a lower bound). Each attempt clears the folder's run.json and agent records as it
    starts and writes run.json last, after its own line of attempts.jsonl: with run.json there,
    the lost attempt never started, or had recorded itself. Otherwise the gateway's record,
    else the usage events, are this attempt's, a line cut by the kill left out; a request under
    way when it was lost is not known. A Ray node's records never come back (`here` False).
    Two windows of a few milliseconds are not told apart: a worker killed between its attempt's
    line and run.json has that attempt counted twice (at least); one killed after run.json,
    while its layer's success is saved, has it in no report (its line says completed)."""
    if pricing.source is not None and pricing.model is None:
        return None, 0.0, False  # a model that costs nothing
    if not here:
        return None, None, True
    if (run.dir / "run.json").exists():
        return 0, 0.0, False
    try:
        wire = _whole_lines(run.dir / WIRE_FILE)
        if wire is not None:
            seen = fold(wire, pricing.price)
            return seen.sent, seen.cost, True
        for name in (PARTS[0], "events.jsonl"):
            events = _whole_lines(run.dir / name)
            if events is not None:
                used = sum(1 for e in events if e.get("event") == "usage")
                return used, (usage_cost(events) if used else 0.0), True
    except Exception:  # noqa: BLE001 - a record that does not read: what it spent is not known
        return None, None, True
    return 0, 0.0, False  # its agent never started: no request was made


def _whole_lines(path: Path) -> list[dict[str, Any]] | None:
    """The JSON objects of a record a kill may have cut: lines that do not read are left out;
    None when there is no such file."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return None
    found = []
    for line in text.splitlines():
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            found.append(value)
    return found


def _events_spend(events: Path) -> tuple[int | None, float | None]:
    """The usage events of an attempt's event log, and what they add up to (None: unknown,
    as for a damaged log)."""
    try:
        lines = read_jsonl(events) if events.exists() else []
        used = sum(1 for e in lines if isinstance(e, dict) and e.get("event") == "usage")
        return used, usage_cost(lines) if used else 0.0
    except (OSError, LlmttError, AttributeError, TypeError, ValueError):
        return None, None


def _run_agent(
    project: Project,
    run: Run,
    agent: Agent,
    placed: list[Placed],
    budget: Callable[[float], str | None] | None,
) -> AgentExit:
    if run.target_version.startswith("error:"):
        return _error(f"target version probe {run.target_version.removeprefix('error: ')}")
    missing = agent.unavailable(run.model)
    if missing:
        return _error(missing)
    if not agent.free and run.model != SCRIPTED and os.environ.get("LLMTT_ENABLED") != "1":
        return _error(
            f"{run.agent} with model {run.model!r} can spend money; set LLMTT_ENABLED=1 to allow "
            f"paid runs (model=scripted rehearses for free)"
        )
    try:
        base = isolation.sandbox(
            project.root,
            project.results_dir,
            project.config,
            *agent.install_paths(),
            *isolation.target_program(run.target.binary),
        )
        network = project.config.isolation.network
        setup_hosts = isolation.destinations(network.setup, None)
    except LlmttError as exc:
        return _error(str(exc))
    mounts = run.scenario.spec.mounts
    if mounts and base is None:
        return _error(
            "the scenario's `mounts` need the sandbox, and runs are unconfined "
            "([isolation] mode or LLMTT_ISOLATION is none)"
        )
    variant_files = {}
    removes: list[str] = []
    if run.variant == CONTROL_VARIANT:
        removes = control_removes(project.config)
        removes += control_paths(project.config, agent, run.scenario)
    elif run.variant:
        for dest, src in project.config.variants[run.variant].files.items():
            variant_files[dest] = project.root / src
    guidance_files = [*variant_files, *(p.path for p in placed if p.kind == "guidance")]
    # A skill is laid whole: a fixture's own folder of that name is not mixed into it.
    removes += [p.path for p in placed if p.kind == "skill"]
    variant_files.update(laid_files(placed, project.root))
    try:
        ws = prepare(
            run.dir, run.scenario.fixture_dir, variant_files, removes, run.scenario.spec.path
        )
        view = _view(ws, mounts, base)
    except WorkspaceError as exc:
        return _error(str(exc))
    agent.prepare_home(ws.home, base)  # before the setup, the first process in that HOME
    try:
        target_env = expand_env(run.target.env, workspace=str(ws.workspace), run_dir=str(run.dir))
    except LlmttError as exc:
        return _error(str(exc))
    env = ws.env(target_env)
    setup = run.scenario.spec.setup
    timeout = setup.timeout_secs or project.config.run.setup_timeout_secs
    with isolation.confined(base, view, setup_hosts) as confine:
        failed = run_setup(
            setup.commands, cwd=ws.workspace, env=env, timeout_secs=timeout, confine=confine
        )
        if failed is not None:
            return _failed("setup command", failed)
        if run.target.health_check:
            # After the setup: the tool must work in the workspace the agent is given.
            health = run_shell(
                run.target.health_check,
                cwd=ws.workspace,
                env=env,
                timeout_secs=timeout,
                confine=confine,
            )
            if not health.ok:
                return _failed("target health check", health)
    env.update(agent.settings.env)
    guidance = _guidance(guidance_files, ws.workspace)
    pricing = pricing_of(run.model, project.config.models, free=agent.free)
    launch = _Launch(
        ws,
        env,
        guidance,
        project.config.models,
        project.redactor(),
        budget,
        network.agent,
        pricing,
        tuple(placed_skills(placed)),
        needles(placed, project.root),
    )
    if run.model == SCRIPTED and agent.needs_model:
        # The scripted model lives exactly as long as the run that needs it.
        log = run.dir / "scripted.log"
        log.unlink(missing_ok=True)
        spec = run.scenario.spec
        with ScriptedServer(spec.scripted or spec.solution, log=log) as server:
            # A short drain: the last answer's record may still be on its way.
            with _gateway(run, launch, drain_secs=SCRIPTED_DRAIN_SECS) as gateway:
                # The agent reaches the scripted model as any other: through the gateway.
                url = gateway.add(Upstream(f"{server.url}/v1"), run.run_id).removesuffix("/v1")
                return _confined_launch(run, agent, launch, (base, view, [url]), url)
    urls = agent.model_urls(run.model) if run.model else []
    if urls is None:
        urls = []
        if network.agent == isolation.MODEL or isolation.MODEL in network.agent:
            return _error(
                f"llmtt does not know where {run.agent} reaches model {run.model!r}, so its "
                "sandbox cannot let it through: give [models] api_base for it, or list the "
                "host in [isolation.network] agent"
            )
    model = project.config.models.get(run.model or "")
    upstream: Upstream | None = None
    secrets: tuple[str, ...] = ()
    if agent.through_gateway and model is not None and model.api_base:
        # An endpoint llmtt knows the URL of: the agent is given the gateway's, and a key
        # that opens nothing; the gateway adds the real one.
        key = endpoint_of(run.model or "", project.config.models, env).key
        upstream = Upstream(model.api_base, key or None, agent.key_header_for(model))
        secrets = (model.api_key_env,) if model.api_key_env else ()
    elif agent.through_gateway and run.model:
        # The CLI's own provider (no api_base), with an API key llmtt holds: the same.
        own = agent.own_provider(run.model, env)
        if own is not None:
            model = model or ModelSpec()
            upstream = Upstream(own.base_url, own.key, own.header)
            secrets = own.secrets
            launch = replace(launch, stand_in=True)
    if upstream is not None and model is not None:
        with _gateway(run, launch) as gateway:
            route = gateway.add(upstream, run.run_id)
            through = model.model_copy(update={"api_base": route, "api_key_env": GATEWAY_KEY_ENV})
            launch = _through(launch, agent, run.model or "", through, secrets)
            return _confined_launch(run, agent, launch, (base, view, [route]), None)
    return _confined_launch(run, agent, launch, (base, view, urls), None)


GATEWAY_KEY_ENV = "LLMTT_GATEWAY_KEY"  # the variable holding the placeholder key an agent gets


def _through(
    launch: _Launch, agent: Agent, name: str, spec: ModelSpec, secrets: tuple[str, ...]
) -> _Launch:
    """`launch` with model `name` reached at the gateway (`spec`) and its placeholder key;
    the agent's own `[models]` follow, so no real key variable is passed to it, and the
    variables holding the real key (`secrets`, were the user to set them for the agent) are
    taken out of its environment."""
    models = {**launch.models, name: spec}
    agent.models = {**agent.models, name: spec}
    env = {k: v for k, v in launch.env.items() if k not in secrets}
    return replace(launch, models=models, env={**env, GATEWAY_KEY_ENV: PLACEHOLDER_KEY})


class _Wire:
    """A run's requests as its gateway passes them: each written to `<run>/wire.jsonl` and
    kept, so the limits can be checked before the next goes upstream (`admit`)."""

    def __init__(self, run: Run, launch: _Launch) -> None:
        self.path = run.dir / WIRE_FILE
        self.path.write_bytes(b"")  # present: the run went through a gateway
        self.lock = threading.Lock()
        self.open = True
        self.records: list[dict[str, Any]] = []
        self.max_turns = run.max_turns
        self.max_usd = run.scenario.spec.cost.max_usd
        self.budget = launch.session_budget
        self.price = launch.pricing.price
        self.needles = launch.needles

    def write(self, record: dict[str, Any]) -> None:
        """One request's record."""
        with self.lock:
            # A request still being read when the run ended (an answer the agent hung up on,
            # from a stalled provider) is not written into the next attempt's record.
            if self.open:
                # Priced as the run is: a later edit of [models] prices reprices nothing.
                if record.get("wire") and isinstance(record.get("status"), int):
                    record["cost_usd"] = self.price(*figures(record))
                self.records.append(record)
                with open(self.path, "a", encoding="utf-8") as handle:
                    handle.write(json.dumps(record, sort_keys=True) + "\n")

    def admit(self) -> str | None:
        """Why the next request must not go upstream (a limit reached), or None."""
        with self.lock:
            run = fold(list(self.records), self.price)
        if run.loop.requests >= self.max_turns:
            return f"turn limit reached ({self.max_turns} turns)"
        # A request whose usage was never reported counts at its worst: the limits hold.
        spent = run.worst_cost if run.worst_cost is not None else run.cost
        if spent is None:
            return None  # no price: nothing to compare with a limit in dollars
        if self.max_usd is not None and spent >= self.max_usd:
            return f"cost limit reached: spent ${spent:.4f} of ${self.max_usd:g}"
        return self.budget(spent) if self.budget is not None else None


@contextlib.contextmanager
def _gateway(run: Run, launch: _Launch, drain_secs: float = DRAIN_SECS) -> Iterator[_Routes]:
    """A model gateway for one run, whose routes count the run's requests and hold its
    limits; each request it passes becomes a line of `<run>/wire.jsonl`."""
    wire = _Wire(run, launch)
    try:
        with Gateway(wire.write, drain_secs) as gateway:
            yield _Routes(gateway, wire)
    finally:
        with wire.lock:
            wire.open = False


@dataclass(frozen=True)
class _Routes:
    gateway: Gateway
    wire: _Wire

    def add(self, upstream: Upstream, label: str) -> str:
        """The URL an agent is given for `upstream`, its requests held to the run's limits."""
        held = replace(upstream, admit=self.wire.admit, needles=self.wire.needles)
        return self.gateway.add(held, label)


def _confined_launch(
    run: Run,
    agent: Agent,
    launch: _Launch,
    confinement: tuple[Sandbox | None, View, list[str]],
    url: str | None,
) -> AgentExit:
    """The agent's run in its sandbox, reaching what [isolation.network] agent allows."""
    base, view, model_urls = confinement
    try:
        model = [isolation.host_port(u) for u in model_urls]
        hosts = isolation.destinations(launch.network, model)
    except LlmttError as exc:
        return _error(str(exc))
    with isolation.confined(base, view, hosts) as confine:
        return _launch(run, agent, launch, url, confine)


def _view(ws: Workspace, mounts: Mapping[str, str], base: Sandbox | None) -> View:
    """What the setup and the agent see: the workspace and HOME, their /tmp, the `mounts`
    (WorkspaceError: a mount that cannot be shown as written)."""
    view = View(cwd=ws.workspace, writable=(ws.workspace, ws.home), tmp=ws.tmp)
    view = mounted(view, ws.workspace, mounts)
    shown = [folder for _, folder in view.mounts]
    if None in shown or (view.tmp_checked and view.tmp is None):
        raise WorkspaceError(
            "mounts: a folder to show is a link or a file in the workspace; a mount must name "
            "a folder of the fixture (or one to be made)"
        )
    covered = base.covered(view) if base is not None else None
    if covered:
        raise WorkspaceError(covered)
    return view


@dataclass(frozen=True)
class _Launch:
    """What a prepared run hands to its agent besides the run itself."""

    ws: Workspace
    env: dict[str, str]
    guidance: dict[str, str]
    models: dict[str, ModelSpec]
    redact: Redactor  # for the event log; the transcript, kept raw, is private to its owner
    session_budget: Callable[[float], str | None] | None
    network: NetworkPolicy = "model"  # [isolation.network] agent
    pricing: Pricing = Pricing(None)  # what the run's model costs
    skills: tuple[PlacedSkill, ...] = ()  # the variant's skills, where they were placed
    # What shows the guidance and skills in a request to the model (placement.needles).
    needles: Mapping[str, tuple[bytes, ...]] = field(default_factory=dict)
    stand_in: bool = False  # the gateway stands in for the agent's own provider


def _launch(
    run: Run, agent: Agent, launch: _Launch, url: str | None, confine: Confinement | None
) -> AgentExit:
    events_part = run.dir / "events.jsonl.part"
    transcript_part = run.dir / "transcript.raw.txt.part"
    # The session is recorded as it runs; the recording, redacted, may be shown in report.html.
    recorder = Recorder(run.dir / CAST_FILE, launch.redact)
    with (
        recorder,
        open(events_part, "w", encoding="utf-8") as events,
        capped(open_private(transcript_part)) as capped_raw,
        recorded(capped_raw, recorder) as raw,
    ):
        ctx = RunContext(
            run_id=run.run_id,
            scenario=run.scenario.spec,
            prompt=run.scenario.spec.task.prompt,
            workspace=launch.ws.workspace,
            home=launch.ws.home,
            env=launch.env,
            model=run.model,
            timeout_secs=run.timeout_secs,
            max_turns=run.max_turns,
            transcript=raw,
            events=EventWriter(events, launch.redact),
            model_url=url,
            guidance=launch.guidance,
            max_usd=run.scenario.spec.cost.max_usd,
            models=launch.models,
            session_budget=launch.session_budget,
            confine=confine,
            stand_in=launch.stand_in,
            skills=launch.skills,
        )
        result = agent.run(ctx)
    os.replace(events_part, run.dir / "events.jsonl")
    os.replace(transcript_part, run.dir / "transcript.raw.txt")
    return result


GUIDANCE_FILES = ("AGENTS.md", "CLAUDE.md", "README.md")
GUIDANCE_LIMIT = 1_000_000  # characters of one guidance file given to an agent


def _guidance(variant_files: list[str], workspace: Path) -> dict[str, str]:
    """The guidance an agent is given: the variant's files, else the workspace's own."""
    names = variant_files or [n for n in GUIDANCE_FILES if (workspace / n).is_file()]
    out = {}
    for name in names:
        path = workspace / name
        if path.is_file():
            # Read no more than is given: a fixture's README may be any size.
            with open(path, encoding="utf-8", errors="replace") as handle:
                text = handle.read(GUIDANCE_LIMIT + 1)
            if len(text) > GUIDANCE_LIMIT:
                text = text[:GUIDANCE_LIMIT] + f"\n[... {name} cut at {GUIDANCE_LIMIT:,} chars]\n"
            out[name] = text
    return out


def _stop_reason(events: Path) -> str | None:
    """The reason in the event log's `complete` event: what an agent that says why it stopped
    only there (in its events) gave."""
    try:
        with open(events, "rb") as handle:
            handle.seek(max(0, os.fstat(handle.fileno()).st_size - 65536))
            last = handle.read().decode("utf-8", errors="replace").rstrip().rsplit("\n", 1)[-1]
        record = json.loads(last)
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict):
        return None
    reason = record.get("reason") if record.get("event") == "complete" else None
    return reason if isinstance(reason, str) else None


def _failed(what: str, result: ShellResult) -> AgentExit:
    """A command that had to succeed before the agent could start failed: its output's end."""
    output = (result.stdout + result.stderr).strip()
    return _error(
        f"{what} `{result.command}` failed ({result.describe()})"
        + (f": {output[-2000:]}" if output else "")
    )


def _error(message: str) -> AgentExit:
    return AgentExit(exit_code=None, timed_out=False, duration_secs=0.0, error=message)
