"""A user's project: `llmtt.toml`, its scenarios and rubrics, loaded and cross-checked."""

from __future__ import annotations

import difflib
import os
import re
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from pydantic import ValidationError

from llmtt import registry
from llmtt.errors import ConfigError, LlmttError, Problem
from llmtt.redaction import Redactor
from llmtt.spec.config import CONTROL_VARIANT, Config, MatrixSpec, TargetSpec, load_config
from llmtt.spec.gates import SkillTriggersGate
from llmtt.spec.loading import Loc, dotted, line_of
from llmtt.spec.rubric import Rubric, load_rubric
from llmtt.spec.scenario import LoadedScenario, ScenarioMatrix, load_scenario
from llmtt.spec.skills import read_skill, skill_files
from llmtt.spec.validation import problems_from
from llmtt.spec.variables import expand_env, referenced
from llmtt.util import signatures as inputs

# The redactors made by `Project.redactor`, by project: (project, environment, redactor).
_REDACTORS: dict[int, tuple[Project, tuple[tuple[str, str], ...], Redactor]] = {}


@dataclass(frozen=True)
class Project:
    """Everything a plan is built from."""

    root: Path
    config: Config
    scenarios: list[LoadedScenario]
    rubrics: dict[Path, Rubric]
    warnings: list[Problem] = field(default_factory=list)
    config_lines: dict[Loc, int] = field(default_factory=dict)  # llmtt.toml's key lines

    @property
    def results_dir(self) -> Path:
        """Where run folders and reports go."""
        return self.root / self.config.paths.results

    @property
    def templates_dir(self) -> Path:
        """The project's own template overrides."""
        return self.root / self.config.paths.templates

    def redactor(self) -> Redactor:
        """The redactor of this project: every env table of its llmtt.toml and scenarios, and
        the variables its models read their keys from. Made once per project and environment
        (a run asks for it about ten times), again when the process environment changed."""
        environ = tuple(sorted(os.environ.items()))
        shared = _REDACTORS.get(id(self))
        if shared is not None and shared[0] is self and shared[1] == environ:
            return shared[2]
        config = self.config
        envs = [_as_given(t.env) for t in self.target_tables()]
        envs += [a.env for a in config.agents.values()]
        names = [m.api_key_env for m in config.models.values() if m.api_key_env]
        made = Redactor(*envs, names=names)
        if len(_REDACTORS) >= 8:
            _REDACTORS.clear()
        _REDACTORS[id(self)] = (self, environ, made)
        return made

    def target_tables(self) -> list[TargetSpec]:
        """Every target it writes: [target], the [targets.X] tables, the scenarios' own."""
        config = self.config
        own = [s.spec.target for s in self.scenarios if isinstance(s.spec.target, TargetSpec)]
        return [config.target, *config.targets.values(), *own]

    def referenced_variables(self) -> list[str]:
        """The variables of llmtt's environment that its targets' env values name."""
        return sorted({name for t in self.target_tables() for _, name in referenced(t.env)})

    def scenario(self, name: str) -> LoadedScenario:
        """The scenario called `name`."""
        for scenario in self.scenarios:
            if scenario.name == name:
                return scenario
        raise KeyError(name)

    def target_for(self, scenario: LoadedScenario) -> TargetSpec:
        """[target], with the scenario's named target or overrides applied."""
        base = self.config.target
        chosen = scenario.spec.target
        if chosen is None:
            return base
        if isinstance(chosen, str):
            return base.merged(self.config.targets[chosen])
        return base.merged(chosen)

    def rubric_path(self, scenario: LoadedScenario) -> Path | None:
        """The rubric file a scenario's judge uses, if it names one."""
        name = scenario.spec.evaluation.judge.rubric
        if name is None:
            return None
        for candidate in (self.root / name, self.root / self.config.paths.rubrics / name):
            inputs.note_file(candidate)
            if candidate.is_file():
                return candidate
        return self.root / name


def _as_given(env: dict[str, str]) -> dict[str, str]:
    """A target's values as its processes get them (`${NAME}`: the variable's value); those
    naming a variable that is not set are left out (no process gets them)."""
    unset = {key for key, name in referenced(env) if name not in os.environ}
    made = expand_env(env, workspace="", run_dir="", strict=False)
    return {key: value for key, value in made.items() if key not in unset}


def load_project(root: Path, only: Path | None = None) -> Project:
    """Load and cross-check a whole project, reporting every problem found, not just the first.

    `only`: the project with that one scenario file (what a task that carries out one of its
    runs needs, in a large project a fraction of the whole); checks that span scenarios and
    the rubrics no scenario uses are left to the whole load that made the plan.
    """
    root = root.resolve()
    config, config_lines = load_config(root)
    problems: list[Problem] = []
    scenarios: list[LoadedScenario] = []
    scenario_dir = root / config.paths.scenarios
    inputs.note_file(scenario_dir)  # its times move when a scenario file comes or goes
    folders = _folder_problems(root, config, config_lines)
    if not scenario_dir.is_dir():
        folders.append(
            Problem(
                root / "llmtt.toml",
                line_of(config_lines, ("paths", "scenarios")),
                "paths.scenarios",
                f"scenario folder {scenario_dir} does not exist; create it or set [paths] "
                "scenarios",
            )
        )
    if folders:
        raise ConfigError(folders)
    if only is None:
        paths = sorted(scenario_dir.glob("*.yaml")) + sorted(scenario_dir.glob("*.yml"))
    else:
        paths = [only]  # not the folder's listing: a run's task in a large project lists none
    for path in paths:
        try:
            if _leads_out(root, config, path):
                raise ConfigError.one(path, _OUT.format(where=os.path.realpath(path)))
            scenarios.append(load_scenario(path))
        except ConfigError as exc:
            problems.extend(exc.problems)
    project = Project(root, config, scenarios, {}, config_lines=config_lines)
    problems.extend(_matrix_problems(project, config_lines))
    problems.extend(_variant_problems(project, config_lines))
    problems.extend(_scenario_placed_problems(project))
    problems.extend(_compare_problems(project, config_lines))
    problems.extend(_cross_check(project))
    problems.extend(_trigger_problems(project))
    rubric_dir = root / config.paths.rubrics
    inputs.note_file(rubric_dir)
    unused = sorted(rubric_dir.glob("*.y*ml")) if rubric_dir.is_dir() and only is None else []
    for path in unused:
        if path not in project.rubrics:  # unused rubrics are checked too
            try:
                project.rubrics[path] = _rubric(project, path)
            except ConfigError as exc:
                problems.extend(exc.problems)
    if problems:
        raise ConfigError(problems)
    warnings = [
        Problem(s.path, None, "solution", "no solution commands: the oracle agent can only fail")
        for s in scenarios
        if not s.spec.solution and "oracle" in config.matrix.agents
    ]
    warnings += _unset_variables(project)
    return Project(root, config, scenarios, project.rubrics, warnings, config_lines)


# Files llmtt reads for a run (fixtures, variant files, rubrics, templates) are given to agents
# and judges, which may send them to a model provider: a project checked out from elsewhere
# must not reach ~/.ssh through `../` or a link.
_OUT = (
    "leads outside the project folder (to {where}); move it into the project, or set "
    "[paths] allow_outside = true in llmtt.toml"
)


def _leads_out(root: Path, config: Config, path: Path) -> bool:
    """Whether `path`, its links followed, is outside `root` (and that is not allowed)."""
    if config.paths.allow_outside:
        return False
    return not Path(os.path.realpath(path)).is_relative_to(root)


def _folder_problems(root: Path, config: Config, lines: dict[Loc, int]) -> list[Problem]:
    """[paths] folders, and the templates in them, that lead out of the project."""
    problems = []
    for name in ("scenarios", "rubrics", "templates"):
        folder = root / getattr(config.paths, name)
        if _leads_out(root, config, folder):
            loc = ("paths", name)
            where = os.path.realpath(folder)
            problems.append(
                Problem(
                    root / "llmtt.toml", line_of(lines, loc), dotted(loc), _OUT.format(where=where)
                )
            )
        elif name == "templates" and folder.is_dir():
            inputs.note_file(folder)  # a template coming or going moves its times
            for template in sorted(folder.glob("*.j2")):
                inputs.note_file(template, follow=False)
                if _leads_out(root, config, template):
                    where = os.path.realpath(template)
                    problems.append(Problem(template, None, None, _OUT.format(where=where)))
    return problems


def _rubric(project: Project, path: Path) -> Rubric:
    if _leads_out(project.root, project.config, path):
        raise ConfigError.one(path, _OUT.format(where=os.path.realpath(path)))
    return load_rubric(path)


def _variant_problems(project: Project, lines: dict[Loc, int]) -> list[Problem]:
    """Variant files: each destination a file path inside the workspace, each source a
    readable file of the project."""
    problems = []
    toml = project.root / "llmtt.toml"
    for name, variant in project.config.variants.items():
        for dest, source in variant.files.items():
            loc = ("variants", name, "files", dest)
            where = (toml, line_of(lines, loc, key=True), dotted(loc))
            pure = PurePosixPath(dest)
            if not dest.strip() or pure.is_absolute() or ".." in pure.parts or not pure.name:
                problems.append(
                    Problem(
                        *where,
                        f"destination {dest!r} must be a file path inside the workspace: "
                        "relative, without '..'",
                    )
                )
            path = project.root / source
            inputs.note_file(path)
            if _leads_out(project.root, project.config, path):
                problems.append(
                    Problem(
                        *where, f"source {source!r} " + _OUT.format(where=os.path.realpath(path))
                    )
                )
                continue
            why = _not_a_file(path)
            if why:
                problems.append(
                    Problem(*where, f"source {path} {why} (paths are relative to the project)")
                )
        problems += _guidance_problems(project, name, lines)
    return problems


GUIDANCE_PLACES = frozenset({"AGENTS.md", "CLAUDE.md"})  # where agents read `guidance`


def _guidance_problems(project: Project, name: str, lines: dict[Loc, int]) -> list[Problem]:
    """A variant's `guidance` and `skills` (see `_placed_problems`), and no `files` written
    where guidance goes."""
    toml = project.root / "llmtt.toml"
    variant = project.config.variants[name]
    at: Loc = ("variants", name)
    problems = _placed_problems(
        project, (toml, lines, at), project.root, variant.guidance, variant.skills
    )
    clash = sorted(set(variant.files) & GUIDANCE_PLACES)
    if variant.guidance is not None and clash:
        loc: Loc = (*at, "guidance")
        problems.append(
            Problem(
                toml,
                line_of(lines, loc),
                dotted(loc),
                f"files also writes {clash[0]}, where guidance goes for some agents: give "
                "the text once, as guidance",
            )
        )
    return problems


def _placed_problems(
    project: Project,
    declared: tuple[Path, dict[Loc, int], Loc],
    base: Path,
    guidance: str | None,
    skills: list[str],
) -> list[Problem]:
    """A `guidance` (a readable file of the project) and `skills` (folders of the project,
    each a valid skill, no two of one name), relative to `base`, declared in a file at a place:
    `declared` is (file, its lines, the key holding them)."""
    problems = []
    file, lines, at = declared
    if guidance is not None:
        loc: Loc = (*at, "guidance")
        path = base / guidance
        inputs.note_file(path)
        why = (
            _OUT.format(where=os.path.realpath(path))
            if _leads_out(project.root, project.config, path)
            else _not_a_file(path)
        )
        if why:
            problems.append(Problem(file, line_of(lines, loc), dotted(loc), f"{guidance!r} {why}"))
    seen: dict[str, str] = {}
    for index, source in enumerate(skills):
        loc = (*at, "skills", index)
        where = (file, line_of(lines, loc[:-1]), dotted(loc))
        folder = base / source
        inputs.note_file(folder)
        if _leads_out(project.root, project.config, folder):
            problems.append(Problem(*where, f"{source!r} " + _OUT.format(where=folder)))
            continue
        skill, found = read_skill(folder, dotted(loc))
        problems += [
            Problem(p.file or file, p.line if p.file else where[1], p.field, p.message)
            for p in found
        ]
        if skill is None:
            continue
        for top, _, _ in os.walk(folder):
            inputs.note_file(Path(top))  # a file added to a subfolder moves only its time
        for path in skill_files(folder):
            inputs.note_file(path)
        if skill.name in seen:
            problems.append(
                Problem(
                    *where,
                    f"skill {skill.name!r} is also {seen[skill.name]!r}: an agent finds one "
                    "skill of a name",
                )
            )
        seen[skill.name] = source
    return problems


def _scenario_placed_problems(project: Project) -> list[Problem]:
    """Each scenario's own `guidance` and `skills`, relative to its file."""
    problems = []
    for scenario in project.scenarios:
        spec = scenario.spec
        if spec.guidance is None and not spec.skills:
            continue
        declared = (scenario.path, scenario.lines, ())
        problems += _placed_problems(
            project, declared, scenario.path.parent, spec.guidance, spec.skills
        )
    return problems


def _not_a_file(path: Path) -> str | None:
    """Why `path` cannot be read as a file, or None."""
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        return (
            "does not exist"
            if isinstance(exc, FileNotFoundError)
            else f"cannot be read: {exc.strerror}"
        )
    if stat.S_ISDIR(mode):
        return "is a folder; name each file of a variant"
    if not stat.S_ISREG(mode):
        return "is not a regular file (a named pipe, socket or device)"
    if not os.access(path, os.R_OK):
        return "cannot be read (permission denied)"
    return None


def fixture_problem(fixture: Path) -> str | None:
    """What in a fixture folder cannot be copied into a workspace, or None.

    Links are copied as links and never followed; anything else must be a folder or a file
    that can be read (a named pipe would block the read that hashes it)."""
    errors: list[OSError] = []
    for dirpath, dirnames, filenames in os.walk(fixture, onerror=errors.append):
        for name in filenames + dirnames:
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, fixture)
            try:
                mode = os.lstat(full).st_mode
            except OSError as exc:
                return f"{rel} cannot be read: {exc.strerror}"
            if stat.S_ISLNK(mode):
                continue
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                return f"{rel} is not a regular file (a named pipe, socket or device); remove it"
            if not os.access(full, os.R_OK | (os.X_OK if stat.S_ISDIR(mode) else 0)):
                return f"{rel} cannot be read (permission denied)"
    if errors:
        return f"{errors[0].filename} cannot be read: {errors[0].strerror}"
    return None


def unknown_variant(config: Config, name: str) -> str | None:
    """What to say of a variant name with no [variants.X] table (None when it has one)."""
    if name == "none" or name in config.variants:
        return None
    if name == CONTROL_VARIANT:
        if config.compare.control:
            return None
        return (
            f"{name!r} is the no-guidance control, which runs only with [compare] control = "
            "true in llmtt.toml"
        )
    declared = sorted(config.variants)
    close = difflib.get_close_matches(name, declared, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return (
        f"no [variants.{name}] table in llmtt.toml{hint} "
        f"(declared: {', '.join(declared + ['none'])})"
    )


def _compare_problems(project: Project, config_lines: dict[Loc, int]) -> list[Problem]:
    """A baseline that names no variant; a [variants.X] table that takes the control's name."""
    config = project.config
    toml = project.root / "llmtt.toml"
    problems = []
    if CONTROL_VARIANT in config.variants:
        loc: Loc = ("variants", CONTROL_VARIANT)
        problems.append(
            Problem(
                toml,
                line_of(config_lines, loc, key=True),
                dotted(loc),
                f"{CONTROL_VARIANT!r} is the name of llmtt's no-guidance control "
                "([compare] control); give this variant another name",
            )
        )
    places = [(toml, config_lines, config.compare.baseline)]
    places += [
        (s.path, s.lines, s.spec.compare.baseline) for s in project.scenarios if s.spec.compare
    ]
    for path, lines, baseline in places:
        if baseline is None:
            continue
        message = unknown_variant(config, baseline)
        if message is None and baseline == CONTROL_VARIANT:
            message = (
                f"{baseline!r}, the no-guidance control, cannot be the baseline: with [compare] "
                "control = true every variant is compared with it besides the baseline"
            )
        if message is not None:
            loc = ("compare", "baseline")
            problems.append(Problem(path, line_of(lines, loc), dotted(loc), message))
    if not problems:
        problems += _baselines_among_variants(project, config_lines)
    return problems


def _baselines_among_variants(project: Project, config_lines: dict[Loc, int]) -> list[Problem]:
    """A scenario with variants to compare whose baseline is not one of them."""
    config = project.config
    problems = []
    for scenario in project.scenarios:
        spec = scenario.spec
        own = spec.matrix.variants if spec.matrix and spec.matrix.variants else None
        variants = own or config.matrix.variants
        if len(set(variants)) + bool(config.compare.control and variants) < 2:
            continue
        named = spec.compare.baseline if spec.compare else None
        baseline = named or config.compare.baseline
        if baseline is None or baseline in variants:
            continue
        where = "this scenario's compare.baseline" if named else "[compare] baseline"
        message = (
            f"the baseline {baseline!r} ({where}) is not among the scenario's variants "
            f"({', '.join(variants)}): name one of them with compare: {{baseline: NAME}}"
        )
        if named:
            loc: Loc = ("compare", "baseline")
            problems.append(
                Problem(scenario.path, line_of(scenario.lines, loc), dotted(loc), message)
            )
        elif own:
            loc = ("matrix", "variants")
            problems.append(
                Problem(scenario.path, line_of(scenario.lines, loc), dotted(loc), message)
            )
        else:
            loc = ("matrix", "variants")
            toml = project.root / "llmtt.toml"
            problems.append(Problem(toml, line_of(config_lines, loc), dotted(loc), message))
    return problems


def known_agents(config: Config) -> set[str]:
    """Every agent name a project can use: the installed ones, its `command` agents and those
    that replay imported trajectories."""
    own = {
        name
        for name, settings in config.agents.items()
        if settings.command is not None or settings.trajectories is not None
    }
    return set(registry.names("agent")) | own


def _matrix_problems(project: Project, config_lines: dict[Loc, int]) -> list[Problem]:
    """Agents and variants, in llmtt.toml's matrix or a scenario's, that name nothing."""
    config = project.config
    agents = known_agents(config)
    toml = project.root / "llmtt.toml"
    places: list[tuple[Path, dict[Loc, int], MatrixSpec | ScenarioMatrix]]
    places = [(toml, config_lines, config.matrix)]
    places += [(s.path, s.lines, s.spec.matrix) for s in project.scenarios if s.spec.matrix]
    problems = []
    for path, lines, matrix in places:
        for index, name in enumerate(matrix.agents or []):
            if name not in agents:
                loc: Loc = ("matrix", "agents", index)
                problems.append(
                    Problem(path, line_of(lines, loc), dotted(loc), registry.unknown("agent", name))
                )
        for index, name in enumerate(matrix.variants or []):
            message = unknown_variant(config, name)
            if message is not None:
                loc = ("matrix", "variants", index)
                problems.append(Problem(path, line_of(lines, loc), dotted(loc), message))
        for axis in ("agents", "models", "variants"):
            clash = folder_clash(getattr(matrix, axis) or [])
            if clash is not None:
                loc = ("matrix", axis, clash[0])
                problems.append(Problem(path, line_of(lines, loc), dotted(loc), clash[1]))
    for name in config.agents:
        if name not in agents:
            loc = ("agents", name)
            line = line_of(config_lines, loc, key=True)
            problems.append(Problem(toml, line, dotted(loc), registry.unknown("agent", name)))
    return problems


def _trigger_problems(project: Project) -> list[Problem]:
    """A scenario's skill_triggers naming a skill no variant places (a skill's name is its
    folder's, which load checks)."""
    placed = {Path(s).name for v in project.config.variants.values() for s in v.skills}
    problems = []
    for scenario in project.scenarios:
        triggers = scenario.spec.skill_triggers
        problems += _trigger_gate_problems(scenario)
        if triggers is None:
            continue
        known = placed | {Path(s).name for s in scenario.spec.skills}
        for kind in ("should_trigger", "should_not_trigger"):
            for index, name in enumerate(getattr(triggers, kind)):
                if name in known:
                    continue
                loc: Loc = ("skill_triggers", kind, index)
                problems.append(
                    Problem(
                        scenario.path,
                        line_of(scenario.lines, loc),
                        dotted(loc),
                        f"neither a variant nor the scenario places a skill named {name!r}"
                        + (f" (skills: {', '.join(sorted(known))})" if known else ""),
                    )
                )
    return problems


def _trigger_gate_problems(scenario: LoadedScenario) -> list[Problem]:
    """A skill_triggers gate in a scenario that declares no skill_triggers, or naming a skill
    they do not."""
    triggers = scenario.spec.skill_triggers
    named = set(triggers.should_trigger + triggers.should_not_trigger) if triggers else set()
    problems = []
    for index, gate in enumerate(scenario.spec.evaluation.gates):
        if not isinstance(gate, SkillTriggersGate):
            continue
        found: list[tuple[Loc, str]] = []
        if triggers is None:
            found.append(
                (
                    ("evaluation", "gates", index, "type"),
                    "a skill_triggers gate needs the scenario's skill_triggers "
                    "(should_trigger: [...], should_not_trigger: [...])",
                )
            )
        for at, name in enumerate(gate.skills):
            if triggers is not None and name not in named:
                found.append(
                    (
                        ("evaluation", "gates", index, "skills", at),
                        f"{name!r} is in neither skill_triggers.should_trigger nor "
                        f"should_not_trigger ({', '.join(sorted(named))})",
                    )
                )
        problems += [
            Problem(scenario.path, line_of(scenario.lines, loc), dotted(loc), message)
            for loc, message in found
        ]
    return problems


def _cross_check(project: Project) -> list[Problem]:
    problems: list[Problem] = []
    seen: dict[str, Path] = {}
    fixtures: dict[Path, str | None] = {}  # a fixture shared by many scenarios is walked once
    for scenario in project.scenarios:
        spec = scenario.spec
        lines = scenario.lines
        if scenario.name in seen:
            problems.append(
                Problem(
                    scenario.path,
                    line_of(lines, ("name",)) or 1,
                    "name",
                    f"scenario name {scenario.name!r} is also used by {seen[scenario.name]}",
                )
            )
        seen.setdefault(scenario.name, scenario.path)
        if isinstance(spec.target, str) and spec.target not in project.config.targets:
            known = sorted(project.config.targets)
            close = difflib.get_close_matches(spec.target, known, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            problems.append(
                Problem(
                    scenario.path,
                    line_of(lines, ("target",)),
                    "target",
                    f"no [targets.{spec.target}] in llmtt.toml{hint} "
                    f"(declared: {', '.join(known) or 'none'})",
                )
            )
        else:
            problems.extend(_no_target(project, scenario))
        problems.extend(_fixture_problems(project, scenario, fixtures))
        problems.extend(_script_problems(project, scenario))
        problems.extend(_evaluator_problems(project, scenario))
        rubric = project.rubric_path(scenario)
        if rubric is not None:
            line = line_of(lines, ("evaluation", "judge", "rubric"))
            if _leads_out(project.root, project.config, rubric):
                where = os.path.realpath(rubric)
                message = _OUT.format(where=where)
                problems.append(Problem(scenario.path, line, "evaluation.judge.rubric", message))
            elif not rubric.is_file():
                problems.append(
                    Problem(
                        scenario.path,
                        line,
                        "evaluation.judge.rubric",
                        f"rubric file {rubric} does not exist",
                    )
                )
            elif rubric not in project.rubrics:
                try:
                    project.rubrics[rubric] = load_rubric(rubric)
                except ConfigError as exc:
                    problems.extend(exc.problems)
    return problems


def _no_target(project: Project, scenario: LoadedScenario) -> list[Problem]:
    """A scenario whose target names no tool: its runs would measure nothing (the seed asks
    for a clear error)."""
    target = project.target_for(scenario)
    if target.binary or target.command_pattern:
        return []
    own = scenario.spec.target
    if isinstance(own, str):
        why = f"[targets.{own}] in llmtt.toml names no binary"
    elif own is not None:
        why = "neither this scenario's target nor llmtt.toml's [target] names a binary"
    else:
        why = "this scenario has no target and llmtt.toml's [target] names no binary"
    return [
        Problem(
            scenario.path,
            line_of(scenario.lines, ("target",), key=True),
            "target",
            f"no target tool: {why} (nor a command_pattern), so none of the agent's commands "
            "would be measured; set [target] binary in llmtt.toml, or give this scenario "
            "`target: {binary: mytool}` (or the name of a [targets.NAME] table)",
        )
    ]


def _unset_variables(project: Project) -> list[Problem]:
    """A warning for each variable a target's env names that is not set here: a run of it
    cannot start until it is."""
    toml = project.root / "llmtt.toml"
    tables: list[tuple[Path, dict[Loc, int], Loc, TargetSpec]] = [
        (toml, project.config_lines, ("target",), project.config.target)
    ]
    tables += [
        (toml, project.config_lines, ("targets", n), t) for n, t in project.config.targets.items()
    ]
    tables += [
        (s.path, s.lines, ("target",), s.spec.target)
        for s in project.scenarios
        if isinstance(s.spec.target, TargetSpec)
    ]
    found = []
    for path, lines, loc, target in tables:
        for key, name in referenced(target.env):
            if name not in os.environ:
                where = (*loc, "env", key)
                found.append(
                    Problem(
                        path,
                        line_of(lines, where),
                        dotted(where),
                        f"names the variable {name}, which is not set here; a run of this "
                        "target cannot start until it is",
                    )
                )
    return found


def _evaluator_problems(project: Project, scenario: LoadedScenario) -> list[Problem]:
    """Each evaluator's type is known and its config is what that evaluator takes."""
    problems: list[Problem] = []
    for i, spec in enumerate(scenario.spec.evaluation.evaluators):
        where: Loc = ("evaluation", "evaluators", i)
        try:
            cls = registry.evaluator(spec.type, project.config.evaluators, project.root)
        except LlmttError as exc:
            line = line_of(scenario.lines, (*where, "type"))
            problems.append(Problem(scenario.path, line, dotted((*where, "type")), str(exc)))
            continue
        try:
            config = cls.Config.model_validate(spec.config)
        except ValidationError as exc:
            inner = {
                loc[len(where) + 1 :]: n
                for loc, n in scenario.lines.items()
                if loc[: len(where) + 1] == (*where, "config")
            }
            for problem in problems_from(exc, cls.Config, scenario.path, inner, spec.config):
                field_name = dotted((*where, "config")) + (
                    "." + problem.field if problem.field else ""
                )
                line = problem.line or line_of(scenario.lines, (*where, "config"), key=True)
                problems.append(Problem(scenario.path, line, field_name, problem.message))
            continue
        own = [c.name for c in spec.criteria]
        for loc, name in _criteria_named(config):
            if name not in own:
                at = (*where, "config", *loc)
                problems.append(
                    Problem(
                        scenario.path,
                        line_of(scenario.lines, at),
                        dotted(at),
                        f"names criterion {name!r}, which is not among this evaluator's "
                        f"criteria ({', '.join(own)}): an evaluator is handed only the criteria "
                        "listed under it; list it there, or name one of those",
                    )
                )
    return problems


def _criteria_named(config: Any) -> list[tuple[Loc, str]]:
    """The criteria an evaluator's config names, with where: its `criterion`, and each of
    its `rules`' (the built-ins' two ways; a plugin's config may do the same)."""
    out: list[tuple[Loc, str]] = []
    named = getattr(config, "criterion", None)
    if isinstance(named, str):
        out.append((("criterion",), named))
    rules = getattr(config, "rules", None)
    if isinstance(rules, list):
        for index, rule in enumerate(rules):
            named = getattr(rule, "criterion", None)
            if isinstance(named, str):
                out.append((("rules", index, "criterion"), named))
    return out


def _fixture_problems(
    project: Project, scenario: LoadedScenario, checked: dict[Path, str | None]
) -> list[Problem]:
    fixture = scenario.fixture_dir
    if fixture is None:
        return []
    line = line_of(scenario.lines, ("fixture",))
    if _leads_out(project.root, project.config, fixture):
        return [Problem(scenario.path, line, "fixture", _OUT.format(where=fixture))]
    if fixture not in checked:
        checked[fixture] = fixture_problem(fixture)
    why = checked[fixture]
    return [Problem(scenario.path, line, "fixture", f"in {fixture}: {why}")] if why else []


def _script_problems(project: Project, scenario: LoadedScenario) -> list[Problem]:
    """Script files (`path:`) inside the project and runnable; a health check gate that has
    a health check."""
    problems = []
    for loc, rel in scenario.script_files():
        line = line_of(scenario.lines, loc)
        path = scenario.script_path(rel)
        inputs.note_file(scenario.path.parent / rel)
        if _leads_out(project.root, project.config, path):
            problems.append(Problem(scenario.path, line, dotted(loc), _OUT.format(where=path)))
            continue
        why = _not_runnable(path)
        if why:
            message = f"script {path} {why} (paths are relative to the scenario file)"
            problems.append(Problem(scenario.path, line, dotted(loc), message))
    named = scenario.spec.target
    if isinstance(named, str) and named not in project.config.targets:
        return problems  # reported as an unknown target
    target = project.target_for(scenario)
    if target.health_check_gate and not target.health_check:
        problems.append(
            Problem(
                scenario.path,
                line_of(scenario.lines, ("target",), key=True),
                "target",
                "the target has health_check_gate = true but no health_check; set health_check "
                "beside it (in llmtt.toml or this scenario's target)",
            )
        )
    return problems


def _not_runnable(path: Path) -> str | None:
    """Why the script file `path` cannot be run, or None."""
    if not path.exists():
        return "does not exist"
    if not path.is_file():
        return "is not a file"
    if not os.access(path, os.R_OK | os.X_OK):
        return "is not executable (chmod +x it) or cannot be read"
    return None


SAFE = re.compile(r"[^A-Za-z0-9_.+-]+")  # doit task names may not hold "="


def folder_part(name: str) -> str:
    """An agent, model or variant name as it appears in run ids and run folders."""
    return SAFE.sub("_", name).strip("_") or "_"


def folder_clash(names: Sequence[str]) -> tuple[int, str] | None:
    """The first name of `names` whose run folder another one already makes, with what to say."""
    seen: dict[str, str] = {}
    for index, name in enumerate(names):
        folder = folder_part(name)
        if folder in seen:
            if seen[folder] == name:
                return index, f"{name!r} is listed twice"
            return index, (
                f"{seen[folder]!r} and {name!r} make the same run folder name {folder!r}; "
                "rename one"
            )
        seen[folder] = name
    return None
