"""The `tool_usage` evaluator (AgentDock's ToolUsage, with the call counts AgentDock left as a
TODO): per rule, how often the agent called a tool (optionally: a tool call that ran the
target command with a given subcommand), whether that count is within bounds, and whether the
first such call's command matches a pattern.

Tools are matched by llmtt's name for them (`llmtt.events.tool_name`: claude-code's `Bash`,
codex's `exec_command` and opencode's `bash` are all `shell`), on the rule's side too: a rule
may name the tool as llmtt does or as one agent does, and it means the same tool under every
agent (docs/metrics.md, "Tool names").

As in AgentDock, a tool that was not called fails the rule only when the rule requires it
(`required`, or `min_calls` of 1 or more); an optional tool not called passes. (AgentDock scores
that case 0 on a numeric scale; here a pass is a pass on every scale.)

`target_subcommand` relies on `input.context["target_commands"]`, which the runner provides:
the run's invocations of the target command, each a mapping with `command` (the invocation as
written), `subcommand` and `exit_code`. A tool call counts when its command contains one of
the invocations with that subcommand; when an invocation also carries `line` (the whole
tool-call command it stands in), the call's command must equal it instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import Field, model_validator

from llmtt.evaluation.evaluators.base import (
    EvaluationInput,
    EvaluationResult,
    Evaluator,
    EvaluatorConfig,
    ToolUse,
    pass_fail,
)
from llmtt.evaluation.evaluators.rule_based import (
    CriterionRule,
    check_pattern,
    score_by_rule,
    search,
)
from llmtt.events import SHELL, tool_name
from llmtt.spec.evaluation import Criterion


class ToolRule(CriterionRule):
    """One check of the run's tool calls, scoring one criterion."""

    tool: str = Field(
        SHELL,
        min_length=1,
        description="The tool: llmtt's name for it (`shell`, `read`, `write`, `edit`, `patch`, "
        "`glob`, `grep`, `list`, `web_fetch`, `web_search`, `todo`, `task`), or an agent's "
        "own name, which means the same tool under every agent (`Bash`, `exec_command` and "
        "`bash` are all `shell`); another name is matched as it is.",
    )
    target_subcommand: str | None = Field(
        None,
        min_length=1,
        description="Count only the calls that ran the target command with this subcommand "
        "(from the run's target-command invocations).",
    )
    min_calls: int | None = Field(None, ge=0, description="The fewest calls that pass.")
    max_calls: int | None = Field(None, ge=0, description="The most calls that pass.")
    required: bool = Field(
        False, description="Fail when the tool was not called (otherwise not calling it passes)."
    )
    argument_pattern: str | None = Field(
        None,
        min_length=1,
        description="A regular expression (Python syntax) that the first counted call's "
        "command must contain a match of.",
    )

    @model_validator(mode="after")
    def _consistent(self) -> ToolRule:
        if self.min_calls is not None and self.max_calls is not None:
            if self.min_calls > self.max_calls:
                raise ValueError(
                    f"min_calls ({self.min_calls}) must not be greater than max_calls "
                    f"({self.max_calls})"
                )
        if self.required and self.max_calls == 0:
            raise ValueError("required contradicts max_calls 0: the rule could never pass")
        if self.argument_pattern is not None:
            check_pattern(self.argument_pattern)
        return self


class ToolUsageConfig(EvaluatorConfig):
    """Rules about the run's tool calls."""

    rules: list[ToolRule] = Field(
        min_length=1,
        description="Each {criterion, tool?, target_subcommand?, min_calls?, max_calls?, "
        "required?, argument_pattern?}.",
    )


class ToolUsageEvaluator(Evaluator):
    """Whether, how often and how the agent called a tool."""

    type = "tool_usage"
    Config = ToolUsageConfig

    def evaluate(
        self, input: EvaluationInput, criteria: Sequence[Criterion]
    ) -> list[EvaluationResult]:
        config = self.config
        assert isinstance(config, ToolUsageConfig)
        return score_by_rule(config.rules, criteria, lambda rule, c: self._score(rule, input, c))

    def _score(
        self, rule: ToolRule, input: EvaluationInput, criterion: Criterion
    ) -> EvaluationResult:
        wanted_tool = tool_name(rule.tool)
        calls = [c for c in input.tool_calls if tool_name(c.tool) == wanted_tool]
        named = f"tool '{rule.tool}'"
        if rule.target_subcommand is not None:
            targets = input.context.get("target_commands")
            if not isinstance(targets, Sequence) or isinstance(targets, str):
                why = (
                    "target_subcommand needs the run's target-command invocations "
                    "(context['target_commands']), which this input does not have"
                )
                return EvaluationResult(
                    criterion.name,
                    pass_fail(False, criterion.scale),
                    self.type,
                    reasoning=f"Cannot evaluate: {why}.",
                    error=why,
                )
            wanted = [
                t
                for t in targets
                if isinstance(t, Mapping) and t.get("subcommand") == rule.target_subcommand
            ]
            calls = [c for c in calls if any(_runs(c, t) for t in wanted)]
            named += f" (running subcommand '{rule.target_subcommand}')"
        passed, reasoning, error = _judge(rule, calls, named)
        return EvaluationResult(
            criterion.name,
            pass_fail(passed, criterion.scale),
            self.type,
            reasoning=reasoning,
            error=error or None,
            metadata={"calls": len(calls)},
        )


def _runs(call: ToolUse, target: Mapping[str, Any]) -> bool:
    """Whether tool call `call` is the one that ran target invocation `target`."""
    line = target.get("line")
    if isinstance(line, str):
        return call.command == line
    command = target.get("command")
    return isinstance(command, str) and bool(command) and command in call.command


def _judge(rule: ToolRule, calls: list[ToolUse], named: str) -> tuple[bool, str, str]:
    """Whether the rule passes on the counted `calls`, its reasoning, and an error ("" when
    none: there is one when the argument pattern could not be searched)."""
    least = rule.min_calls or 0
    if not calls:
        said = f"Expected {named} was not called."
        if rule.required:
            return False, said + " (Tool was required).", ""
        if least > 0:
            return False, said + f" Expected at least {least} call(s).", ""
        return True, said + " (Tool was optional).", ""
    said = f"{named[0].upper()}{named[1:]} was called {len(calls)} time(s)."
    passed = True
    if len(calls) < least:
        passed = False
        said += f" Expected at least {least} call(s)."
    if rule.max_calls is not None and len(calls) > rule.max_calls:
        passed = False
        said += f" Expected at most {rule.max_calls} call(s)."
    if rule.argument_pattern is not None:
        first = calls[0].command
        found = search(rule.argument_pattern, "", first)
        if isinstance(found, str):
            return False, said + f" Argument check could not be made: {found}.", found
        if found:
            said += " Argument check passed for the first call."
        else:
            passed = False
            said += (
                f" Argument check failed for the first call: {first!r} does not match "
                f"/{rule.argument_pattern}/."
            )
    return passed, said, ""
