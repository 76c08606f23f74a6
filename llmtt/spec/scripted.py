"""The `scripted:` session a scenario may give the built-in offline model: its turns (text,
shell calls, token figures, HTTP errors, hangs) and what comes after them. How the server plays
it is `llmtt.scripted.session`."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from llmtt.spec.config import Strict


class TurnUsage(Strict):
    """Token figures of one answer. `input` is the uncached input only, as DESIGN.md counts
    it; each wire format carries the four figures in its own fields (see `wire_usage`)."""

    input: int = Field(ge=0, description="Uncached input tokens.")
    output: int = Field(ge=0, description="Output tokens.")
    cache_read: int = Field(0, ge=0, description="Input tokens read from the cache.")
    cache_write: int = Field(
        0, ge=0, description="Input tokens written to the cache (Anthropic Messages only)."
    )


class HttpError(Strict):
    """An HTTP error instead of the turn's answer, for its first `times` attempts (every
    attempt when unset); `body` replaces the wire format's own error object."""

    status: int = Field(ge=400, le=599, description="The HTTP status returned.")
    body: dict[str, Any] | str | None = Field(
        None,
        description="The response body: an object is sent as JSON, a string as text; default: "
        "the wire format's own error object.",
    )
    headers: dict[str, str] = Field(
        default_factory=dict, description="Headers added to the response (e.g. retry-after)."
    )
    times: int | None = Field(
        None, ge=1, description="How many attempts at this turn fail; unset: every attempt."
    )


class Hang(Strict):
    """A delay of `secs` before the turn's answer (`at: start`) or after its first streamed
    event (`at: stream`; a plain answer is delayed whole), for its first `times` attempts
    (every attempt when unset)."""

    secs: float = Field(gt=0, le=3600, description="How long the answer waits.")
    at: Literal["start", "stream"] = Field(
        "start",
        description="start: before the answer; stream: after its first streamed event (a "
        "plain answer is delayed whole).",
    )
    times: int | None = Field(
        None, ge=1, description="How many attempts at this turn hang; unset: every attempt."
    )
    cut: bool = Field(
        False,
        description="After the wait, end the answer there, as a provider that cut it: a stream "
        "stops after its first event, a plain answer after half its bytes.",
    )


class Turn(Strict):
    """One model answer: text (`say`), then the shell commands it calls, in this order."""

    say: str | None = Field(None, description="Text the model says before its calls.")
    run: list[str] = Field(
        default_factory=list,
        description="Shell commands called at once, in this order; none: the final answer.",
    )
    usage: TurnUsage | None = Field(
        None, description="Token figures; by default 1000 + 100 a turn in, 20 (10 for text) out."
    )
    error: HttpError | None = Field(None, description="Answer with an HTTP error instead.")
    hang: Hang | None = Field(None, description="Delay the answer, or stall its stream.")
    skill: str | None = Field(
        None,
        min_length=1,
        description="Load this skill instead of running commands: with the agent's skill tool "
        "when it offers one (claude-code's Skill, opencode's skill), else by reading its "
        "SKILL.md with the shell (codex, the litellm loop).",
    )

    @model_validator(mode="after")
    def _says_or_runs(self) -> Turn:
        if self.say is None and not self.calls:
            raise ValueError("a turn needs `say` (text), `run` (commands), `skill` or some of them")
        if self.skill is not None and self.run:
            raise ValueError("a `skill` turn loads the skill and runs nothing else")
        return self

    @property
    def calls(self) -> int:
        """The tool calls it makes: its commands, or the one that loads its skill."""
        return 1 if self.skill is not None else len(self.run)


class ScriptedSession(Strict):
    """A scripted model session: its turns, and what comes after them."""

    format: Literal[1] = Field(1, description="Version of this format.")
    turns: list[Turn] = Field(
        default_factory=list,
        description="The model's answers in order; only the last may call no command.",
    )
    endless: bool = Field(
        False,
        description="After its turns, play the last one again and again and never answer "
        "(a turn limit or the timeout must stop the agent).",
    )
    side_usage: TurnUsage | None = Field(
        None, description="Token figures of side requests (titles, summaries, compaction)."
    )

    @field_validator("turns")
    @classmethod
    def _reachable(cls, turns: list[Turn]) -> list[Turn]:
        for index, turn in enumerate(turns[:-1]):
            if not turn.calls:
                raise ValueError(
                    f"turn {index + 1} calls no command, so it ends the agent's loop and the "
                    "turns after it are never played: give it `run:` or make it the last turn"
                )
        return turns

    @model_validator(mode="after")
    def _repeatable(self) -> ScriptedSession:
        if self.endless and (not self.turns or not self.turns[-1].calls):
            raise ValueError("an endless session repeats its last turn, which must `run:` commands")
        return self

    @classmethod
    def of_solution(cls, commands: list[str]) -> ScriptedSession:
        """The default session: one solution command per turn, then the final answer."""
        return cls(turns=[Turn(run=[command]) for command in commands])
