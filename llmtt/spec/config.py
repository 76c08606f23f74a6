"""`llmtt.toml`: the project's targets, agents, matrix, paths, budget and judge settings."""

from __future__ import annotations

import os
import re
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    field_validator,
)

from llmtt.errors import ConfigError
from llmtt.spec.loading import read_toml
from llmtt.spec.validation import validate
from llmtt.spec.variables import reference_problem

CONFIG_FILE = "llmtt.toml"


class Strict(BaseModel):
    """Base for every user-written model: unknown keys are errors, values never mutate."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def check_regex(pattern: str | None) -> str | None:
    """Compile a user's regular expression now, so a bad one fails at load time."""
    if pattern is None:
        return None
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"invalid regular expression: {exc}") from None
    return pattern


def check_command(command: str) -> str:
    """A shell command that can be run: no NUL byte, which ends a program's argument (bash,
    given the command as one, would see it cut there)."""
    at = command.find("\0")
    if at >= 0:
        raise ValueError(
            f"contains a NUL byte (character {at + 1}), which no command line can hold; to "
            "make one, let the command print it (printf '\\0')"
        )
    return command


# A target's fields that describe its tool, not the project: another binary does not take them.
TOOL_FIELDS = ("command_pattern", "version_command", "health_check", "health_check_gate")

# A shell command a user writes (a setup or solution command, a gate's, a health check).
Command = Annotated[str, AfterValidator(check_command)]


class TargetSpec(Strict):
    """The CLI tool under test. Every field is optional so scenarios can override a few."""

    binary: str | None = Field(
        None,
        description="The tool's program (a name on PATH or a path); its file name finds target "
        "commands in tool calls when command_pattern is unset.",
    )
    command_pattern: str | None = Field(
        None, description="Regex finding target commands in tool calls; group 1 = subcommand."
    )
    version_command: Command | None = Field(
        None, description="Shell command whose output identifies the target's version."
    )
    env: dict[str, str] = Field(
        default_factory=dict,
        description="Variables set for the agent, the setup commands, the scripts, the gates and "
        "the version command; a named target's or a scenario's env is merged over [target]'s. "
        "A value may hold `${LLMTT_WORKSPACE}` (the process's workspace), `${LLMTT_RUN_DIR}` (the "
        "run's folder; the seed's and ax-eval's names for both work too) and `${NAME}` (a "
        "variable of llmtt's environment, which must be set); `$${` is a literal `${`.",
    )
    health_check: Command | None = Field(
        None,
        min_length=1,
        description="Shell command verifying the tool works, run in the workspace after the "
        "setup commands and before the agent: a failure means the run cannot be carried out.",
    )
    health_check_gate: bool = Field(
        False,
        description="Also run health_check after the agent, as a last command_succeeds gate.",
    )

    _pattern = field_validator("command_pattern")(check_regex)

    @field_validator("env")
    @classmethod
    def _references(cls, value: dict[str, str]) -> dict[str, str]:
        for key, text in value.items():
            problem = reference_problem(text)
            if problem:
                raise ValueError(f"{key}: {problem}")
        return value

    def merged(self, override: TargetSpec) -> TargetSpec:
        """This target with the fields `override` sets replacing its own (env is merged).

        An override naming another tool (a binary of another file name) takes none of the
        fields that describe this one's (`TOOL_FIELDS`): a `taskmgr` scenario in a project
        whose [target] is git is neither versioned, matched nor health-checked as git. (A
        target without a binary describes no tool: its fields go to every override.)"""
        data = self.model_dump()
        if (
            self.binary is not None
            and override.binary is not None
            and not self.same_tool(override.binary)
        ):
            for name in TOOL_FIELDS:
                data[name] = TargetSpec.model_fields[name].default
        for name in override.model_fields_set:
            value = getattr(override, name)
            data[name] = {**self.env, **value} if name == "env" else value
        return TargetSpec.model_validate(data)

    def same_tool(self, binary: str) -> bool:
        """Whether `binary` is this target's tool (the same file name, any folder)."""
        return self.binary is not None and Path(self.binary).name == Path(binary).name

    def effective_pattern(self) -> str | None:
        """The command pattern, or one derived from the binary's name when none is given."""
        if self.command_pattern:
            return self.command_pattern
        if self.binary:
            name = re.escape(Path(self.binary).name)
            return rf"(?<![\w./-]){name}(?![\w.-])(?:\s+([A-Za-z][\w:-]*))?"
        return None


class AgentSettings(Strict):
    """Settings of one agent (`[agents.<name>]`).

    For a built-in agent all are optional. A table with `command` describes another agent CLI
    (the `command` agent): its argv template may use {prompt}, {model} and {workspace}.
    """

    executable: str | None = Field(
        None, description="Path of the agent's binary (relative to the project), else PATH."
    )
    env: dict[str, str] = Field(default_factory=dict, description="Variables set for the agent.")
    pass_env: list[str] = Field(
        default_factory=list,
        description="Names of variables passed through from your environment (e.g. API keys).",
    )
    args: list[str] = Field(default_factory=list, description="Extra arguments for the agent.")
    command: list[str] | None = Field(
        None, description="argv template of a `command` agent: {prompt}, {model}, {workspace}."
    )

    @field_validator("command")
    @classmethod
    def _program_first(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and (not value or not value[0].strip()):
            raise ValueError(
                "must start with the agent's program, e.g. ['my-agent', '--prompt', '{prompt}']"
            )
        return value

    parser: Literal["claude-code", "opencode", "codex"] | None = Field(
        None,
        description="How to read a `command` agent's JSON lines; none: transcript only. A codex "
        "of your own run this way keeps the flags you give it: add `-c analytics.enabled=false`, "
        "as llmtt's own codex has, or each confined run waits 5 s at its end for host names the "
        "sandbox cannot look up.",
    )
    command_marker: str = Field(
        "$ ",
        min_length=1,
        description="A `command` agent without a parser: the prompt that starts each command "
        "line of its transcript (what follows is the command; no other line is counted).",
    )
    version_command: Command | None = Field(
        None, description="How to ask a `command` agent's version."
    )
    trajectories: str | None = Field(
        None,
        description="Folder (relative to the project) of ATIF trajectories this agent replays "
        "instead of running: <scenario>.json, and <scenario>.workspace/ if given (llmtt import "
        "atif writes them). Such an agent starts no process and calls no model.",
    )
    free: bool = Field(
        False,
        description="A `command` agent that cannot spend money (e.g. a local model): it then "
        "runs without LLMTT_ENABLED=1.",
    )
    model_url_env: str | None = Field(
        None,
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        description="A `command` agent: the variable its program takes its model's base URL "
        "from (e.g. OPENAI_BASE_URL). llmtt sets it to the model gateway's URL (ending in "
        "/v1), so its requests are counted, limited and given the real key by llmtt.",
    )
    model_key_env: str | None = Field(
        None,
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        description="A `command` agent with model_url_env: the variable its program takes its "
        "API key from; llmtt sets it to a placeholder (the gateway adds the real key).",
    )
    tool_timeout_secs: float = Field(60, gt=0, description="litellm agent: limit of one command.")
    max_output_chars: int = Field(
        8000, gt=0, description="litellm agent: a command's output is cut past this size."
    )
    max_retries: int = Field(3, ge=0, description="litellm agent: retries of a provider error.")
    retry_backoff_secs: float = Field(2.0, ge=0, description="litellm agent: first retry delay.")


# Agent settings read only by the evaluation: part of the evaluate key, not the agent's.
EVALUATION_SETTINGS: set[str] = {"command_marker"}
# Agent settings added since runs were first keyed: part of the agent's key only when set, so
# an upgrade of llmtt does not re-run (and re-pay) every run of an agent with a table.
KEYED_WHEN_SET: tuple[str, ...] = ("model_url_env", "model_key_env")


class ModelSpec(Strict):
    """How the agents reach a model (`[models.<name>]`), and its price when litellm has none."""

    litellm: str | None = Field(
        None,
        description="litellm's model name (the litellm agent, the judge); default: the "
        "table's name.",
    )
    id: str | None = Field(
        None,
        min_length=1,
        description="The model's name as the agent CLIs pass it (claude-code's and codex's "
        "`--model`, opencode's `-m`; a gateway's own name for it); default: the table's name.",
    )
    api_base: str | None = Field(
        None,
        min_length=1,
        description="A gateway or proxy every agent sends this model's requests to, as OpenAI "
        "clients take it (usually ending in /v1): litellm's api_base, opencode's provider "
        "baseURL, codex's model_provider base_url; claude-code gets it without the /v1 as "
        "ANTHROPIC_BASE_URL.",
    )
    api_key_env: str | None = Field(
        None,
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        description="Variable holding the model's API key, handed to each agent in its own way "
        "(claude-code: ANTHROPIC_API_KEY; codex: its provider's env_key; opencode: its "
        "provider's apiKey). Only this variable is then required and passed.",
    )
    input_usd_per_mtok: float | None = Field(
        None, ge=0, description="Price of a million uncached input tokens (with the output's)."
    )
    output_usd_per_mtok: float | None = Field(
        None, ge=0, description="Price of a million output tokens (with the input's)."
    )
    cache_read_usd_per_mtok: float | None = Field(
        None, ge=0, description="Price of a million cache-read tokens; default: the input's."
    )
    cache_write_usd_per_mtok: float | None = Field(
        None, ge=0, description="Price of a million cache-write tokens; default: the input's."
    )


class MatrixSpec(Strict):
    """The axes a plan expands: every scenario runs with each agent x model x variant x repeat."""

    agents: list[str] = Field(
        default_factory=lambda: ["oracle"],
        min_length=1,
        description="Agents every scenario runs with (built-in names or [agents.<name>] tables).",
    )
    models: list[str] = Field(
        default_factory=list,
        description="Models for the agents that need one ([models.<name>] aliases or the "
        "agents' own names); agents that need none (oracle) ignore them.",
    )
    variants: list[str] = Field(
        default_factory=list,
        description='[variants.<name>] tables to run with; "none" lays no files. Empty: no '
        "variant.",
    )
    repeats: int = Field(
        1, ge=1, le=1000, description="Runs of each combination (the repeat index is in the key)."
    )


class VariantSpec(Strict):
    """A named set of guidance laid into the workspace (`[variants.<name>]`): files at fixed
    paths, and guidance and skills placed where each agent reads them."""

    files: dict[str, str] = Field(
        default_factory=dict, description="Workspace path -> file in the project to copy there."
    )
    guidance: str | None = Field(
        None,
        min_length=1,
        description="A file in the project, written where each agent reads its guidance: "
        "CLAUDE.md for claude-code; AGENTS.md for codex, opencode, command agents and the "
        "litellm loop (whose system prompt holds it).",
    )
    skills: list[str] = Field(
        default_factory=list,
        description="Skill folders in the project (each holding a SKILL.md), installed where "
        "each agent discovers skills: .claude/skills/ (claude-code), .agents/skills/ (codex, "
        "command agents, the litellm loop, which lists them in its system prompt), "
        ".opencode/skills/ (opencode).",
    )


class PathsSpec(Strict):
    """Where scenarios, rubrics, templates and results live, relative to the project."""

    scenarios: str = Field("scenarios", description="Folder of the scenario files (*.yaml).")
    rubrics: str = Field(
        "rubrics", description="Folder of the rubric files, every one checked when loading."
    )
    templates: str = Field(
        "templates",
        description="Folder of overrides of evaluation.md.j2, report.md.j2, report.html.j2 "
        "and report-run.html.j2 (one run's panel in report.html).",
    )
    results: str = Field(
        "llm-tool-test-results", description="Folder of the run folders and the reports."
    )
    baseline: str = Field("llmtt-baseline.json", description="Written by `llmtt bless`; commit it.")
    allow_outside: bool = Field(
        False,
        description="Let scenarios, fixtures, variant files, rubrics and templates live outside "
        "the project folder (else a path that leads out of it is a load error).",
    )


class RegressionSpec(Strict):
    """When an aggregate flags a regression against the blessed baseline (beyond noise)."""

    score_drop: float = Field(0.15, ge=0, le=1, description="Pass-rate drop, as a fraction.")
    cost_increase: float = Field(0.5, ge=0, description="Mean cost increase, as a fraction.")


# The built-in no-guidance control: a variant that removes the files the variants lay.
CONTROL_VARIANT = "no-guidance"


class CompareSpec(Strict):
    """How variants are compared (`[compare]`): against which, how small an effect matters,
    and how far `doit run repeats=auto` may go."""

    baseline: str | None = Field(
        None,
        description='The variant every other one is compared with ("none": no variant files). '
        "Unset: the first variant of each scenario's variants, said so in the reports.",
    )
    min_effect: float = Field(
        0.1,
        gt=0,
        lt=1,
        description="The smallest pass-rate difference that matters: a comparison whose interval "
        "lies inside +-min_effect is `no_difference`.",
    )
    control: bool = Field(
        False,
        description=f'Also run the no-guidance control (variant "{CONTROL_VARIANT}": the files '
        "every variant lays are removed from the workspace) and compare each variant with it.",
    )
    max_repeats: int = Field(
        20,
        ge=2,
        le=1000,
        description="repeats=auto: the most repeats a comparison may take before it stops "
        "undecided.",
    )
    round_repeats: int = Field(
        5,
        ge=1,
        le=1000,
        description="repeats=auto: repeats added per round; the verdicts are looked at after "
        "each round.",
    )


class BudgetSpec(Strict):
    """Money limits for one invocation."""

    max_usd: float | None = Field(
        None,
        ge=0,
        description="What one invocation may spend, shared by its runs; the doit variable "
        "budget= and LLMTT_BUDGET_USD come first. Unset: no limit.",
    )


class JudgeSpec(Strict):
    """Defaults for the LLM judge (layer 3)."""

    model: str | None = Field(
        None,
        description="The judge's model ([models.<name>] alias or litellm name) when a scenario's "
        "evaluation.judge.model names none, else LLMTT_JUDGE; also the model of evaluators "
        "that call one and name none.",
    )
    allow_same_model: bool = Field(
        False, description="Allow a judge model equal to the model under test."
    )
    when: Literal["gates_pass", "always"] = Field(
        "gates_pass",
        description='Which runs the judge is asked about: "gates_pass" (the seed\'s rule) only '
        "those whose gates all passed, a run with a failed gate failing without the judge "
        '(its evaluation.md says it was not asked); "always" every run carried out. Changing '
        "it asks only about the runs not asked yet (a verdict given stands) and runs no agent "
        "again.",
    )
    max_transcript_chars: int = Field(
        20000, gt=0, description="The run's events shown to the judge are cut past this size."
    )
    max_guidance_chars: int = Field(
        20000,
        gt=0,
        description="The guidance and skills the agent was given, shown to the judge, are cut "
        "past this size.",
    )
    samples: int = Field(
        1,
        ge=1,
        le=10,
        description="How many times the judge is asked about each run (1 to 10), each within "
        "the budget; the run's score is their mean, their spread is kept. Raising it asks only "
        "the new samples, lowering it keeps the first ones.",
    )
    attempts: int = Field(
        3,
        ge=1,
        description="A judge that could not answer (a malformed answer twice, a provider "
        "error) leaves the run's outcome `error` and is asked again by the next `doit run`, "
        "until it has failed this many attempts at the same question: then it gives up (the "
        "run stays an error saying so, and `doit run` no longer fails for it). It is asked "
        "again when the rubric, the judge model or its prompt changes, when this is raised, "
        "or after `doit forget <run>:judge`.",
    )


class TriageSpec(Strict):
    """The optional paid triage of failed runs (a free rule-based one is always made)."""

    enabled: bool = Field(
        False,
        description="Ask `model` once per failed run why it failed, from its redacted events "
        "(one short call, within the budget; a paid model needs LLMTT_ENABLED=1); its line "
        "replaces the rule-based one in the reports. Off: the rule-based triage alone.",
    )
    model: str | None = Field(
        None,
        description="The triage's model ([models.<name>] alias or litellm name); needed when "
        "enabled.",
    )
    max_events_chars: int = Field(
        12000, gt=0, description="The failed run's events shown to the triage are cut past this."
    )


class RunDefaults(Strict):
    """Defaults for every scenario's `run:` section."""

    timeout_secs: float = Field(
        600, gt=0, description="An agent is stopped after this long (the run fails)."
    )
    max_turns: int = Field(10, ge=1, description="An agent is stopped after this many turns.")
    setup_timeout_secs: float = Field(
        120,
        gt=0,
        description="Limit of the setup commands (and the health check) when setup.timeout_secs "
        "is unset.",
    )
    gate_timeout_secs: float = Field(
        60, gt=0, description="Limit of each gate whose own timeout_secs is unset."
    )
    provider_attempts: int = Field(
        3,
        ge=1,
        description="A run that the model provider failed (429, 5xx, a cut answer, no "
        "connection) stays pending and is tried again by the next `doit run`, at most this "
        "many times in a row; every attempt is kept in the run's attempts.jsonl.",
    )


class ExecutorSpec(Strict):
    """Where the agent and evaluate layers of runs are carried out (`doit run executor=NAME`
    overrides `kind`). Where a run is carried out is not part of its keys."""

    kind: Literal["local", "ray"] = Field(
        "local",
        description='"local": in this machine\'s doit process and its workers; "ray": on the '
        "nodes of a Ray cluster, planned, keyed and recorded here (pip install 'llmtt[ray]').",
    )
    address: str | None = Field(
        None,
        description='ray: the cluster to join ("host:port" of its head, as ray.init takes it); '
        "unset: RAY_ADDRESS, else a cluster started on this machine, else a new local one.",
    )
    max_in_flight: int = Field(
        8, ge=1, description="ray: runs under way at once (doit's -n, in threads, overrides it)."
    )
    num_cpus: float = Field(1, ge=0, description="ray: the CPUs one run's layer holds on a node.")
    resources: dict[str, float] = Field(
        default_factory=dict,
        description="ray: other resources one run's layer holds (custom node resources).",
    )
    runtime_env: dict[str, Any] = Field(
        default_factory=dict,
        description="ray: the job's runtime_env (e.g. pip, env_vars) as ray.init takes it.",
    )
    max_in_flight_per_model: dict[str, Annotated[int, Field(ge=1)]] = Field(
        default_factory=dict,
        description="ray: at most this many runs of a model under way at once (a provider's "
        "rate limit), by the model's name in the matrix.",
    )
    exclude: list[str] = Field(
        default_factory=list,
        description="ray: more names (glob patterns) of files and folders of the project folder "
        "not to send to the nodes, besides the results folder, .git, node_modules, virtualenvs "
        "and caches.",
    )


NetworkPolicy = Literal["none", "model"] | list[Annotated[str, StringConstraints(min_length=1)]]


class NetworkSpec(Strict):
    """What a confined process may reach, by phase: `"none"`, `"model"` (the run's model
    endpoint alone) or a list of hosts (`"pypi.org"`, `"host:port"`; port 443 unless given;
    `"model"` in the list adds the model endpoint)."""

    setup: NetworkPolicy = Field(
        "none", description="The setup commands and the health check before the agent."
    )
    agent: NetworkPolicy = Field(
        "model",
        description="The agent CLI and the commands it runs (the litellm loop's commands: its "
        "model is called by llmtt itself, so `model` gives them nothing).",
    )
    checks: NetworkPolicy = Field(
        "none",
        description="Gates, post scripts, script evaluators and the health check run as a gate.",
    )


class IsolationSpec(Strict):
    """How runs are confined (README: "What a run can reach")."""

    mode: Literal["bwrap", "none"] = Field(
        "bwrap",
        description='"bwrap": every process of a run in a bubblewrap sandbox that sees its '
        'workspace, its own HOME and /tmp, and the system\'s programs read-only; "none": '
        "unconfined, on purpose (every report says so). LLMTT_ISOLATION=none does the same.",
    )
    read_only: list[Annotated[str, StringConstraints(min_length=1)]] = Field(
        default_factory=list,
        description="More files and folders every confined process sees read-only, at their "
        "own paths (relative: to the project folder; ~ is the user's HOME).",
    )
    read_write: list[Annotated[str, StringConstraints(min_length=1)]] = Field(
        default_factory=list,
        description="More folders every confined process sees read-write (shared by all runs).",
    )
    network: NetworkSpec = Field(
        default_factory=NetworkSpec, description="What each phase may reach on the network."
    )


class Config(Strict):
    """The whole of `llmtt.toml`."""

    target: TargetSpec = Field(
        default_factory=TargetSpec, description="The CLI tool under test, for every scenario."
    )
    targets: dict[str, TargetSpec] = Field(
        default_factory=dict, description="Named targets that scenarios pick with `target: NAME`."
    )
    agents: dict[str, AgentSettings] = Field(
        default_factory=dict, description="Settings of each agent, or another agent CLI."
    )
    models: dict[str, ModelSpec] = Field(
        default_factory=dict, description="How the agents reach each model, and its prices."
    )
    matrix: MatrixSpec = Field(
        default_factory=MatrixSpec, description="The agents, models, variants and repeats."
    )
    variants: dict[str, VariantSpec] = Field(
        default_factory=dict, description="Named sets of guidance files to compare."
    )
    paths: PathsSpec = Field(default_factory=PathsSpec, description="Where the files live.")
    budget: BudgetSpec = Field(
        default_factory=BudgetSpec, description="Money limit of one invocation."
    )
    judge: JudgeSpec = Field(default_factory=JudgeSpec, description="The LLM judge's settings.")
    triage: TriageSpec = Field(
        default_factory=TriageSpec, description="The optional paid triage of failed runs."
    )
    compare: CompareSpec = Field(
        default_factory=CompareSpec, description="How variants are compared, and with which."
    )
    regressions: RegressionSpec = Field(
        default_factory=RegressionSpec, description="When a change is flagged as a regression."
    )
    run: RunDefaults = Field(
        default_factory=RunDefaults, description="Defaults of the scenarios' limits."
    )
    executor: ExecutorSpec = Field(
        default_factory=ExecutorSpec, description="Where runs are carried out (local or Ray)."
    )
    isolation: IsolationSpec = Field(
        default_factory=IsolationSpec,
        description="How runs are confined: sandbox, extra paths, network by phase.",
    )
    evaluators: dict[str, Annotated[str, StringConstraints(pattern=r"^[\w.]+:[\w.]+$")]] = Field(
        default_factory=dict,
        description='Third-party evaluators by type id: `my_check = "package.module:Class"` '
        "(a module in the project folder can be imported).",
    )


def control_removes(config: Config) -> list[str]:
    """What the no-guidance control takes out of the workspace: every file a variant lays."""
    return sorted({dest for variant in config.variants.values() for dest in variant.files})


def control_places(config: Config) -> tuple[bool, list[str]]:
    """What the no-guidance control stands against: whether any variant has guidance, and the
    names of the skills any variant places (a skill's name is its folder's, checked at load).
    The control's key is made of these alone."""
    guidance = any(spec.guidance is not None for spec in config.variants.values())
    skills = sorted(
        {PurePosixPath(s).name for spec in config.variants.values() for s in spec.skills}
    )
    return guidance, skills


def default_judge_model(config: Config) -> str | None:
    """The model an evaluator that calls one uses when its config names none."""
    return config.judge.model or os.environ.get("LLMTT_JUDGE") or None


def load_config(root: Path) -> tuple[Config, dict[Any, int]]:
    """Load `<root>/llmtt.toml`; a project without one uses the defaults."""
    path = root / CONFIG_FILE
    if not path.exists():
        raise ConfigError.one(
            path, "no llmtt.toml here; create one (an empty file uses the defaults)"
        )
    data, lines = read_toml(path)
    return validate(Config, data, path, lines), lines
