"""A user's project: `llmtt.toml`, its scenarios and rubrics, loaded and cross-checked."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path

from llmtt import inputs
from llmtt.config import Config, MatrixSpec, TargetSpec, load_config
from llmtt.errors import ConfigError, Problem
from llmtt.loading import Loc, dotted, line_of
from llmtt.rubric import Rubric, load_rubric
from llmtt.scenario import LoadedScenario, ScenarioMatrix, load_scenario


@dataclass(frozen=True)
class Project:
    """Everything a plan is built from."""

    root: Path
    config: Config
    scenarios: list[LoadedScenario]
    rubrics: dict[Path, Rubric]
    warnings: list[Problem] = field(default_factory=list)

    @property
    def results_dir(self) -> Path:
        """Where run folders and reports go."""
        return self.root / self.config.paths.results

    @property
    def templates_dir(self) -> Path:
        """The project's own template overrides."""
        return self.root / self.config.paths.templates

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


def load_project(root: Path) -> Project:
    """Load and cross-check a whole project, reporting every problem found, not just the first."""
    root = root.resolve()
    config, config_lines = load_config(root)
    problems: list[Problem] = []
    scenarios: list[LoadedScenario] = []
    scenario_dir = root / config.paths.scenarios
    inputs.note_file(scenario_dir)  # its times move when a scenario file comes or goes
    if not scenario_dir.is_dir():
        raise ConfigError.one(
            root / "llmtt.toml",
            f"scenario folder {scenario_dir} does not exist; create it or set [paths] scenarios",
            field="paths.scenarios",
            line=line_of(config_lines, ("paths", "scenarios")),
        )
    for path in sorted(scenario_dir.glob("*.yaml")) + sorted(scenario_dir.glob("*.yml")):
        try:
            scenarios.append(load_scenario(path))
        except ConfigError as exc:
            problems.extend(exc.problems)
    project = Project(root, config, scenarios, {})
    problems.extend(_matrix_problems(project, config_lines))
    problems.extend(_cross_check(project))
    rubric_dir = root / config.paths.rubrics
    inputs.note_file(rubric_dir)
    for path in sorted(rubric_dir.glob("*.y*ml")) if rubric_dir.is_dir() else []:
        if path not in project.rubrics:  # unused rubrics are checked too
            try:
                project.rubrics[path] = load_rubric(path)
            except ConfigError as exc:
                problems.extend(exc.problems)
    if problems:
        raise ConfigError(problems)
    warnings = [
        Problem(s.path, None, "solution", "no solution commands: the oracle agent can only fail")
        for s in scenarios
        if not s.spec.solution and "oracle" in config.matrix.agents
    ]
    return Project(root, config, scenarios, project.rubrics, warnings)


def unknown_variant(config: Config, name: str) -> str | None:
    """What to say of a variant name with no [variants.X] table (None when it has one)."""
    if name == "none" or name in config.variants:
        return None
    declared = sorted(config.variants)
    close = difflib.get_close_matches(name, declared, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return (
        f"no [variants.{name}] table in llmtt.toml{hint} "
        f"(declared: {', '.join(declared + ['none'])})"
    )


def _matrix_problems(project: Project, config_lines: dict[Loc, int]) -> list[Problem]:
    """Agents and variants, in llmtt.toml's matrix or a scenario's, that name nothing."""
    from llmtt.agents.registry import known_agents, unknown_agent

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
                    Problem(path, line_of(lines, loc), dotted(loc), unknown_agent(name))
                )
        for index, name in enumerate(matrix.variants or []):
            message = unknown_variant(config, name)
            if message is not None:
                loc = ("matrix", "variants", index)
                problems.append(Problem(path, line_of(lines, loc), dotted(loc), message))
    for name, settings in config.agents.items():
        if settings.command is None and name not in agents:
            loc = ("agents", name)
            line = line_of(config_lines, loc, key=True)
            problems.append(Problem(toml, line, dotted(loc), unknown_agent(name)))
    return problems


def _cross_check(project: Project) -> list[Problem]:
    problems: list[Problem] = []
    seen: dict[str, Path] = {}
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
        rubric = project.rubric_path(scenario)
        if rubric is not None:
            line = line_of(lines, ("evaluation", "judge", "rubric"))
            if not rubric.is_file():
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
