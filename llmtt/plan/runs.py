"""The plan: config x scenarios expanded into runs, each with one content-hash key per layer."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llmtt import __version__, registry
from llmtt.agents.registry import make_agent
from llmtt.errors import ConfigError, LlmttError
from llmtt.plan.keys import JUDGE_VERSION, TRIAGE_VERSION
from llmtt.plan.sources import project_sources
from llmtt.plan.versions import Versions
from llmtt.spec.config import (
    CONTROL_VARIANT,
    EVALUATION_SETTINGS,
    KEYED_WHEN_SET,
    AgentSettings,
    TargetSpec,
    control_places,
    control_removes,
    default_judge_model,
)
from llmtt.spec.gates import Gate
from llmtt.spec.loading import Loc, dotted, line_of
from llmtt.spec.project import Project, folder_clash, folder_part, known_agents, unknown_variant
from llmtt.spec.scenario import LoadedScenario, ScenarioMatrix
from llmtt.spec.selection import Selection, listing, nearest, tier_text
from llmtt.spec.skills import skill_files
from llmtt.util import signatures as inputs
from llmtt.util.hashing import Key, hash_file, hash_tree, hash_value

# What `llmtt lint` writes in the results folder; the aggregate report reads it.
LINT_FILE = "lint.json"


@dataclass(frozen=True)
class JudgePlan:
    """Layer 3 of a run: which model grades it against which rubric, and the layer's key."""

    model: str
    rubric: Path
    threshold: float
    key: Key
    when: str = "gates_pass"  # [judge] when: the runs it is asked about
    samples: int = 1  # how many times the judge is asked about the run
    attempts: int = 3  # [judge] attempts: failed ones at a question before it gives up


@dataclass(frozen=True, eq=False)
class Run:
    """One scenario x agent x model x variant x repeat: the unit of caching."""

    run_id: str
    scenario: LoadedScenario
    target: TargetSpec
    target_version: str
    agent: str
    agent_version: str
    model: str | None
    variant: str | None
    repeat: int
    dir: Path
    timeout_secs: float
    max_turns: int
    agent_key: Key
    eval_key: Key
    report_key: Key
    tags: tuple[str, ...] = field(default=())
    judge: JudgePlan | None = None
    triage: Key | None = None  # the triage layer's key, when [triage] is enabled

    def identity(self) -> dict[str, Any]:
        """The fields that name a run in every record written about it."""
        return {
            "run_id": self.run_id,
            "scenario": self.scenario.name,
            "agent": self.agent,
            "model": self.model,
            "variant": self.variant,
            "repeat": self.repeat,
        }

    @property
    def label(self) -> str:
        """Readable one-liner for `doit list`."""
        who = self.agent + (f" / {self.model}" if self.model else "")
        if self.variant:
            who += f" / {self.variant}"
        return f"{self.scenario.name}: {who}, repeat {self.repeat}"


@dataclass(frozen=True)
class Plan:
    """All runs of one invocation, with what selected them."""

    project: Project
    runs: list[Run]
    selection: Selection
    aggregate_key: Key


def build_plan(project: Project, selection: Selection, *, part: bool = False) -> Plan:
    """Expand the project's matrix (with the selection's overrides and filters) into runs.

    `part`: the project holds part of the scenarios (`load_project(only=...)`), so that the
    selection names what is not there is no mistake; the whole plan was checked when built.
    """
    versions = Versions(project.results_dir / ".llmtt-cache" / "versions.json", project.root)
    agents: dict[str, tuple[str, str, str]] = {}  # name -> (version, key part, model field)
    variants: dict[str | None, str] = {}
    fixtures: dict[Path, str] = {}  # each fixture hashed once per plan, not once per run
    runs: list[Run] = []
    said: set[str] = set()  # the replaying agents given one repeat where more were asked
    template = _template_key(project, "evaluation.md.j2")
    code = _evaluator_code(project)
    if not part:
        _check_selection(project, selection)
    for scenario in project.scenarios:
        if not _selected(scenario, selection):
            continue
        target = project.target_for(scenario)
        version = versions.target(target)
        fixture = scenario.fixture_dir
        if fixture is not None and fixture not in fixtures:
            fixtures[fixture] = hash_tree(fixture)
        fixture_key = fixtures[fixture] if fixture is not None else "none"
        keys = _scenario_keys(project, scenario, target, version, fixture_key, code)
        for axes in _axes(project, scenario, selection, said):
            agent, _, variant, _ = axes
            if agent not in agents:
                agents[agent] = _agent_parts(project, agent, versions)
            if variant not in variants:
                variants[variant] = _variant_key(project, variant)
            runs.append(
                _make_run(
                    project,
                    scenario,
                    keys,
                    target,
                    version,
                    axes,
                    agents[agent],
                    variants[variant],
                    template,
                )
            )
    versions.save()
    if not part:
        _check_selected(project, selection, runs)
    aggregate_key = {
        "runs": hash_value([r.run_id for r in runs]),
        "template": _template_key(project, "report.md.j2"),
        "html": _template_key(project, "report.html.j2"),
        "html_run": _template_key(project, "report-run.html.j2"),
        "html_player": _template_key(project, "report-player.html.j2"),
        "llmtt": __version__,
    }
    # The comparison follows [compare] (and the scenarios' own), and repeats=auto pays for its
    # looks: either re-writes the reports (and re-runs nothing). Absent at the defaults.
    compare = {
        "config": project.config.compare.model_dump(exclude_defaults=True),
        "scenarios": {
            s.name: s.spec.compare.model_dump(exclude_defaults=True)
            for s in project.scenarios
            if s.spec.compare is not None
        },
        "adaptive": selection.adaptive,
    }
    if any(compare.values()):
        aggregate_key["compare"] = hash_value(compare)
    # The reports read each outcome against its scenario's `expect`: editing it re-writes them
    # (and re-runs nothing else). Absent while no scenario expects a failure: keys stay as were.
    expected = sorted(r.run_id for r in runs if r.scenario.spec.expect == "fail")
    if expected:
        aggregate_key["expect_fail"] = hash_value(expected)
    # The reports give the holdout scenarios' results apart: moving one re-writes them (and
    # re-runs nothing else). Absent while no scenario is held out: keys stay as they were.
    holdout = sorted(r.run_id for r in runs if r.scenario.spec.split == "holdout")
    if holdout:
        aggregate_key["holdout"] = hash_value(holdout)
    # The reports compare against the committed baseline: `llmtt bless` re-writes them (and
    # nothing else). Absent while there is no baseline: keys stay as they were.
    baseline = project.root / project.config.paths.baseline
    inputs.note_file(baseline)
    if baseline.is_file():
        aggregate_key["baseline"] = hash_file(baseline)
    # `llmtt lint`'s findings stand beside the agents' per-subcommand friction in the reports:
    # a new lint re-writes them. Absent while lint has not run: keys stay as they were.
    lint = project.results_dir / LINT_FILE
    inputs.note_file(lint)
    if lint.is_file():
        aggregate_key["lint"] = hash_file(lint)
    # The judge agreement says which runs the judge was asked about; the default adds nothing.
    when = project.config.judge.when
    if when != "gates_pass" and any(r.judge is not None for r in runs):
        aggregate_key["judge_when"] = when
    return Plan(project, runs, selection, aggregate_key)


def _check_selection(project: Project, selection: Selection) -> None:
    """Each value of a doit variable selects something: a typo is an error naming the nearest
    name, never an empty plan that passes in CI (the files' own names are checked on load)."""
    scenarios = [s.name for s in project.scenarios]
    tags = {t for s in project.scenarios for t in s.spec.tags}
    tiers = {s.spec.tier for s in project.scenarios}
    for name in selection.scenarios:
        if name not in scenarios:
            raise LlmttError(
                f"scenario={name}: no such scenario{nearest(name, scenarios)} "
                f"(scenarios: {listing(scenarios)})"
            )
    for tag in selection.tags:
        if tag not in tags:
            raise LlmttError(
                f"tag={tag}: no scenario has this tag{nearest(tag, tags)} (tags: {listing(tags)})"
            )
    for lo, hi in selection.tiers:
        if not any(lo <= tier <= hi for tier in tiers):
            which = f"tier {hi} or below" if lo == 0 else f"a tier from {lo} to {hi}"
            raise LlmttError(
                f"tier={tier_text((lo, hi))}: no scenario is of {which} (tiers: {listing(tiers)})"
            )
    known = known_agents(project.config)
    for name in selection.agents:
        if name not in known:
            raise LlmttError(f"agent={name}: {registry.unknown('agent', name)}")
    for name in selection.variants:
        message = unknown_variant(project.config, name)
        if message is not None:
            raise LlmttError(f"variant={name}: {message}")
    for var, values in (
        ("agent", selection.agents),
        ("model", selection.models),
        ("variant", selection.variants),
    ):
        clash = folder_clash(values)
        if clash is not None:
            raise LlmttError(f"{var}={','.join(values)}: {clash[1]}")


def _check_selected(project: Project, selection: Selection, runs: list[Run]) -> None:
    """The variables together select at least one run, and no two runs share a folder."""
    chosen = selection.describe()
    if chosen and not runs:
        raise LlmttError(f"{chosen}: selects no run (no scenario matches all of these)")
    if selection.models and not any(run.model for run in runs):
        agents = sorted({run.agent for run in runs})
        raise LlmttError(
            f"model={','.join(selection.models)}: none of the selected agents "
            f"({', '.join(agents)}) takes a model; add agent=NAME"
        )
    folders: dict[str, Run] = {}
    for run in runs:
        first = folders.setdefault(run.run_id, run)
        if first is not run:
            raise ConfigError.one(
                project.root / "llmtt.toml",
                f"two runs would share the folder {run.run_id}: {first.label} and {run.label}; "
                "rename a model or variant",
            )


def _selected(scenario: LoadedScenario, selection: Selection) -> bool:
    spec = scenario.spec
    if selection.scenarios and scenario.name not in selection.scenarios:
        return False
    if selection.tags and not set(selection.tags) & set(spec.tags):
        return False
    return selection.tier_selected(spec.tier)


def _axes(
    project: Project, scenario: LoadedScenario, selection: Selection, said: set[str]
) -> list[tuple[str, str | None, str | None, int]]:
    matrix = project.config.matrix
    own = scenario.spec.matrix or ScenarioMatrix()
    agents = list(selection.agents) or own.agents or matrix.agents
    models = list(selection.models) or own.models or matrix.models
    variants = list(selection.variants) or own.variants or matrix.variants
    repeats = selection.repeats or own.repeats or matrix.repeats
    if (
        project.config.compare.control
        and not selection.variants
        and any(v != "none" for v in variants)
        and CONTROL_VARIANT not in variants
    ):
        variants = [*variants, CONTROL_VARIANT]  # the no-guidance control runs beside them
    if selection.adaptive and len(set(variants)) >= 2:
        # repeats=auto: every repeat a comparison may take while the rounds are not known,
        # then the round under way of each scenario compared (the others keep their repeats)
        if selection.rounds is None:
            repeats = project.config.compare.max_repeats
        else:
            repeats = selection.repeats_of(scenario.name) or repeats
    out: list[tuple[str, str | None, str | None, int]] = []
    for agent in agents:
        made = make_agent(project.config, project.root, agent)
        needs_model = made.needs_model
        if made.replays and repeats > 1 and agent not in said:
            said.add(agent)
            print(
                f"llmtt: agent {agent} replays one trajectory per scenario: 1 repeat, not "
                f"{repeats}",
                file=sys.stderr,
            )
        agent_models: Sequence[str | None] = models if needs_model else [None]
        if needs_model and not agent_models:
            raise ConfigError.one(
                project.root / "llmtt.toml",
                f"agent {agent!r} needs a model: set [matrix] models, or run with model=NAME",
                field="matrix.models",
            )
        for model in agent_models:
            for variant in variants or ["none"]:
                resolved = None if variant == "none" else variant
                for repeat in range(1, 1 + (1 if made.replays else repeats)):
                    out.append((agent, model, resolved, repeat))
    return out


@dataclass(frozen=True)
class _ScenarioKeys:
    """Key parts shared by every run of one scenario, hashed once per plan."""

    agent: Key
    solution: str
    evaluate: Key
    timeout_secs: float
    max_turns: int
    judge: JudgePlan | None
    triage: Key | None = None


def _judge_plan(project: Project, scenario: LoadedScenario) -> JudgePlan | None:
    settings = scenario.spec.evaluation.judge
    if not settings.enabled:
        return None
    inputs.note_env("LLMTT_JUDGE")
    model = settings.model or project.config.judge.model or os.environ.get("LLMTT_JUDGE")
    if not model:
        raise ConfigError.one(
            scenario.path,
            "the judge is enabled but no judge model is set: set evaluation.judge.model, "
            "[judge] model in llmtt.toml, or the LLMTT_JUDGE variable",
            field="evaluation.judge.model",
            line=scenario.lines.get(("evaluation", "judge", "__key__")),
        )
    if model == "scripted":
        _scripted_judge(project, scenario)
    rubric = project.rubric_path(scenario)
    assert rubric is not None  # a judge without a rubric fails validation
    when = project.config.judge.when
    samples = settings.samples or project.config.judge.samples
    attempts = project.config.judge.attempts
    guidance = project.config.judge.max_guidance_chars
    key = {
        "rubric": hash_file(rubric),
        "model": model,
        "threshold": str(settings.pass_threshold),
        "judge": f"{JUDGE_VERSION}/{project.config.judge.max_transcript_chars}"
        + (f"/{guidance}" if guidance != 20000 else ""),
        # Which runs are judged; absent at the default, so that judge keys stay as they were.
        **({"when": when} if when != "gates_pass" else {}),
        # Likewise the samples: a change asks only the samples not yet paid for.
        **({"samples": str(samples)} if samples != 1 else {}),
        # Raising it asks a judge that gave up again; absent at the default, likewise.
        **({"attempts": str(attempts)} if attempts != 3 else {}),
    }
    return JudgePlan(model, rubric, settings.pass_threshold, key, when, samples, attempts)


def _scripted_judge(project: Project, scenario: LoadedScenario) -> None:
    """The scripted model plays a scenario's solution; it cannot grade one."""
    message = (
        "the judge cannot be the scripted model (it replays a solution and cannot grade); "
        "name a real model"
    )
    if scenario.spec.evaluation.judge.model:
        loc: Loc = ("evaluation", "judge", "model")
        line = line_of(scenario.lines, loc)
        raise ConfigError.one(scenario.path, message, line=line, field=dotted(loc))
    if project.config.judge.model:
        line = line_of(project.config_lines, ("judge", "model"))
        raise ConfigError.one(project.root / "llmtt.toml", message, line=line, field="judge.model")
    raise LlmttError(f"LLMTT_JUDGE=scripted: {message}")


def _scenario_keys(
    project: Project,
    scenario: LoadedScenario,
    target: TargetSpec,
    version: str,
    fixture: str,
    code: dict[str, str],
) -> _ScenarioKeys:
    spec = scenario.spec
    config = project.config
    timeout = spec.run.timeout_secs or config.run.timeout_secs
    max_turns = spec.run.max_turns or config.run.max_turns
    composite = spec.evaluation.composite
    return _ScenarioKeys(
        agent={
            "prompt": hash_value(spec.task.prompt),
            "setup": hash_value(spec.setup.model_dump()),
            "limits": hash_value([timeout, max_turns, spec.cost.max_usd]),
            "fixture": fixture,
            "target": hash_value([target.binary, target.env, version]),
            # Where the task's absolute paths lead changes the task; no mounts keeps old keys.
            **({"mounts": hash_value(spec.mounts)} if spec.mounts else {}),
            # Likewise the workspace folders put on PATH (a scripting task's mock tools).
            **({"path": hash_value(spec.path)} if spec.path else {}),
        },
        solution=hash_value(spec.solution),
        evaluate={
            "gates": hash_value([_gate_key(g) for g in spec.evaluation.gates]),
            **_evaluators_key(project, scenario, code),
            **_scripts_key(scenario, target),
            "pattern": hash_value([target.effective_pattern(), target.env]),
            "composite": hash_value(composite.model_dump() if composite else None),
            "gate_timeout": str(config.run.gate_timeout_secs),
            "llmtt": __version__,
            **(
                {"skill_triggers": hash_value(spec.skill_triggers.model_dump())}
                if spec.skill_triggers
                else {}
            ),
        },
        timeout_secs=timeout,
        max_turns=max_turns,
        judge=_judge_plan(project, scenario),
        triage=_triage_key(project),
    )


def _triage_key(project: Project) -> Key | None:
    """The triage layer's key (None: [triage] is off): its model and prompt."""
    spec = project.config.triage
    if not spec.enabled:
        return None
    where = project.root / "llmtt.toml"
    if not spec.model or spec.model == "scripted":
        message = (
            "[triage] enabled = true needs a model that can write: set [triage] model to a "
            "[models.<name>] alias or a litellm name"
            + ("" if not spec.model else " (the scripted model replays a solution)")
        )
        loc = ("triage", "model") if spec.model else ("triage", "enabled")
        line = line_of(project.config_lines, loc)
        raise ConfigError.one(where, message, line=line, field="triage.model")
    return {"model": spec.model, "triage": f"{TRIAGE_VERSION}/{spec.max_events_chars}"}


def _gate_key(gate: Gate) -> dict[str, Any]:
    """A gate's part of the evaluate key; a default weight is left out, so that gates written
    before weights existed keep their keys."""
    return gate.model_dump(exclude={"weight"} if gate.weight == 1.0 else None)


def _evaluators_key(
    project: Project, scenario: LoadedScenario, code: dict[str, str]
) -> dict[str, str]:
    """The evaluators' part of the evaluate key: editing one, or the code of a project's own
    one (`code`), re-evaluates, never re-runs. A scenario without evaluators has none, and one
    whose evaluators have no code in the project has no `evaluator_code` (its key stays what it
    was before they, or their code, were keyed)."""
    evaluation = scenario.spec.evaluation
    if not evaluation.evaluators:
        return {}
    specs = [e.model_dump(mode="json") for e in evaluation.evaluators]
    types = {e.type for e in evaluation.evaluators}
    own = {t: v for t, v in project.config.evaluators.items() if t in types}
    truth = evaluation.model_dump(mode="json", include={"ground_truth"})
    out = {"evaluators": hash_value([specs, truth, own, _default_model_used(project, scenario)])}
    sources = {t: code[t] for t in sorted(own) if t in code}
    if sources:
        out["evaluator_code"] = hash_value(sources)
    return out


def _evaluator_code(project: Project) -> dict[str, str]:
    """Type -> a hash of the project files (`llmtt.plan.sources`) of each evaluator llmtt.toml
    names whose module is in the project folder (hashing notes them as inputs of the plan)."""
    out: dict[str, str] = {}
    for type_id, target in project.config.evaluators.items():
        files = project_sources(project.root, target.partition(":")[0])
        if files:
            rel = {path.relative_to(project.root).as_posix(): hash_file(path) for path in files}
            out[type_id] = hash_value(rel)
    return out


def _scripts_key(scenario: LoadedScenario, target: TargetSpec) -> dict[str, str]:
    """The scripts' part of the evaluate key: the scripts, the content of each script file, and
    the health check when it is also a gate. Editing one re-evaluates, never re-runs the agent;
    a scenario without any has no such part (its key stays what it was before scripts)."""
    out = {}
    scripts = scenario.spec.scripts
    files = sorted({rel for _, rel in scenario.script_files()})
    if scripts.post or scripts.evaluators or files:
        contents = {rel: hash_file(scenario.script_path(rel)) for rel in files}
        out["scripts"] = hash_value([scripts.model_dump(mode="json"), contents])
    if target.health_check_gate:
        out["health_check"] = hash_value(target.health_check)
    return out


def _default_model_used(project: Project, scenario: LoadedScenario) -> str | None:
    """The judge model, when an evaluator that calls a model names none of its own."""
    for spec in scenario.spec.evaluation.evaluators:
        cls = registry.evaluator(spec.type, project.config.evaluators, project.root)
        if cls.calls_model and not spec.config.get("model"):
            inputs.note_env("LLMTT_JUDGE")  # the plan cache is stale when it changes
            return default_judge_model(project.config)
    return None


def _make_run(
    project: Project,
    scenario: LoadedScenario,
    keys: _ScenarioKeys,
    target: TargetSpec,
    target_version: str,
    axes: tuple[str, str | None, str | None, int],
    agent_parts: tuple[str, str, str],
    variant_key: str,
    template_key: str,
) -> Run:
    agent, model, variant, repeat = axes
    if (
        keys.judge is not None
        and model == keys.judge.model
        and not project.config.judge.allow_same_model
    ):
        raise ConfigError.one(
            scenario.path,
            f"the judge model {model!r} is also the model under test; pick another judge, or set "
            "[judge] allow_same_model = true in llmtt.toml",
            field="evaluation.judge.model",
        )
    who = "-".join(folder_part(p) for p in (agent, model, variant) if p)
    run_id = f"{scenario.name}/{who}/r{repeat}"
    # The solution is what the oracle and the scripted model play; other agents never see it.
    plays_solution = agent == "oracle" or model == "scripted"
    solution = keys.solution if plays_solution else "unused"
    session = scenario.spec.scripted
    if model == "scripted" and session is not None:
        # The scripted model plays the scenario's session instead: editing it re-runs the agent.
        solution = hash_value(session.model_dump(mode="json"))
    own = _own_key(project, scenario, variant)
    agent_key = {
        **keys.agent,
        **({"own": own} if own is not None else {}),
        "solution": solution,
        "variant": variant_key,
        "agent": agent_parts[1],
        "model": _model_key(project, model, agent_parts[2]),
        "repeat": str(repeat),
    }
    return Run(
        run_id=run_id,
        scenario=scenario,
        target=target,
        target_version=target_version,
        agent=agent,
        agent_version=agent_parts[0],
        model=model,
        variant=variant,
        repeat=repeat,
        dir=project.results_dir / run_id,
        timeout_secs=keys.timeout_secs,
        max_turns=keys.max_turns,
        agent_key=agent_key,
        eval_key={**keys.evaluate, "agent_settings": _evaluation_settings(project, agent)},
        report_key={"template": template_key, "llmtt": __version__},
        tags=tuple(scenario.spec.tags),
        judge=keys.judge,
        triage=keys.triage,
    )


def _agent_parts(project: Project, name: str, versions: Versions) -> tuple[str, str, str]:
    """The agent's version, its key part (name, version, settings), and the `[models.X]`
    field that names a model for it."""
    settings = project.config.agents.get(name)
    agent = make_agent(project.config, project.root, name)
    version = agent.version(versions.probe)
    # Settings that only the evaluation reads are in the evaluate key instead: editing them
    # must not pay for the agent again (nor must a new such field when llmtt is upgraded).
    dump = None
    if settings is not None:
        unset = {name for name in KEYED_WHEN_SET if getattr(settings, name) is None}
        dump = settings.model_dump(exclude=EVALUATION_SETTINGS | unset)
    return version, hash_value([name, version, dump]), agent.model_name_field


def _model_key(project: Project, model: str | None, name_field: str) -> str:
    """The model's part of a run's agent key: its name, and the name the agent calls it by
    when `[models.X]` gives another (editing that re-runs the agent; an endpoint, a key
    variable or a price does not)."""
    if model is None:
        return "none"
    spec = project.config.models.get(model)
    own = getattr(spec, name_field, None) if spec is not None else None
    return model if own is None or own == model else f"{model}={own}"


def _evaluation_settings(project: Project, agent: str) -> str:
    settings = project.config.agents.get(agent) or AgentSettings()
    return hash_value(settings.model_dump(include=EVALUATION_SETTINGS))


def _variant_key(project: Project, variant: str | None) -> str:
    if variant is None:
        return "none"
    if variant == CONTROL_VARIANT:
        removes: dict[str, Any] = {"removes": control_removes(project.config)}
        has_guidance, names = control_places(project.config)
        if has_guidance or names:  # what the control takes out for them (unchanged without)
            removes["placed"] = {"guidance": has_guidance, "skills": names}
        return hash_value(removes)
    spec = project.config.variants[variant]
    files = {dest: hash_file(project.root / src) for dest, src in spec.files.items()}
    if spec.guidance is None and not spec.skills:
        return hash_value(files)  # the key of a variant of files only, as it always was
    skills = {
        source: {
            path.relative_to(project.root / source).as_posix(): hash_file(path)
            for path in skill_files(project.root / source)
        }
        for source in spec.skills
    }
    guidance = hash_file(project.root / spec.guidance) if spec.guidance else None
    return hash_value({"files": files, "guidance": guidance, "skills": skills})


def _own_key(project: Project, scenario: LoadedScenario, variant: str | None) -> str | None:
    """The part of a run's key for the scenario's own guidance and skills (None when it has
    none, keeping the keys of scenarios without): what the run is given of them, the
    variant's replacements left out; for the no-guidance control, only what it takes out."""
    spec = scenario.spec
    if spec.guidance is None and not spec.skills:
        return None
    names = [Path(s).name for s in spec.skills]
    if variant == CONTROL_VARIANT:
        return hash_value({"guidance": spec.guidance is not None, "skills": names})
    over = project.config.variants.get(variant or "")
    guidance = spec.guidance if over is None or over.guidance is None else None
    replaced = {Path(s).name for s in over.skills} if over is not None else set()
    folders = {Path(s).name: scenario.own_path(s) for s in spec.skills}
    skills = {
        name: {p.relative_to(folder).as_posix(): hash_file(p) for p in skill_files(folder)}
        for name, folder in folders.items()
        if name not in replaced
    }
    guidance_key = hash_file(scenario.own_path(guidance)) if guidance else None
    return hash_value({"guidance": guidance_key, "skills": skills})


def _template_key(project: Project, name: str) -> str:
    own = project.templates_dir / name
    inputs.note_file(own)
    if own.is_file():
        return hash_file(own)
    return hash_file(Path(__file__).parents[1] / "templates" / name)


def clean_run_dir(run: Run) -> None:
    """Remove a run's folder (used by `doit clean`)."""
    if run.dir.exists():
        shutil.rmtree(run.dir)
