"""What the scripted model plays: a session of turns, and how a request finds its turn.

A session is a list of turns. A turn says some text, calls the shell tool zero or more times
(several calls are parallel tool calls, issued in the order given) and reports chosen token
figures; it may fail with an HTTP error or hang for its first attempts. A turn without calls is
the final answer: every agent ends its loop there, so it can only be the last turn. After the
last turn the server gives the final answer, unless the session is `endless`.

Which turn answers a request is decided from the request alone, never from a counter of the
server's: the number of tool results in its conversation (`results`). With one call a turn
that number is the turn; with several, turn k is played once the conversation holds a result
for every call of the turns before it (their `run` lengths summed). A request holding only
some of a turn's results moves on to the next turn rather than replaying calls. Call ids are
numbered across the session (`toolu_0001`, `call_0002`, ...) from the same sum, so a retried
request gets the same answer, ids included. Side requests (titles, summaries, compaction:
requests that offer no shell tool) get plain text and leave the script where it is. Only
errors and hangs `times` count attempts, per turn, on the server; side requests count none.

A compaction replaces an agent's conversation with a summary: the tool results are gone. So a
side request's text ends with a marker of how far the session is (`Scripted session [llmtt
scripted: 3 turns played]`; none before the first turn is played), and the agent's summary,
the answer it was given, carries it on. A conversation's turn is then counted from the highest
marker in its text (`played`), plus its tool results after that marker: turn `played` is played
once they are in, and the results on from there as above. Tool results' own text is never
searched for a marker (a command's output is not the model's). An agent may write its
conversation out as text for the summary request (opencode: `[Tool result]: ...` lines, its
prior summary after them); such results count too (wire.py), after that text's marker.

Usage: `input` is the uncached input. Anthropic gets the four figures in its own fields;
the OpenAI formats count cached tokens inside `prompt_tokens` / `input_tokens` and have no field
for cache writes, so there `input + cache_read` is sent with `cached_tokens = cache_read` and
`cache_write` is left out: total minus cached is `input` on every wire.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from llmtt.spec.config import Strict

FINAL_TEXT = "Done: every step of the task has been carried out."
TITLE_TEXT = "Scripted session"
# The marker of a side answer; a count of more than 9 digits is no marker of the server's.
PLAYED = re.compile(r"\[llmtt scripted: (\d{1,9}) turns? played\]")
SHELL_TOOLS = ("Bash", "bash", "exec_command", "shell", "local_shell")
INPUT_TOKENS_BASE = 1000
INPUT_TOKENS_PER_TURN = 100
OUTPUT_TOKENS_TOOL = 20
OUTPUT_TOKENS_TEXT = 10


class Usage(Strict):
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


class Turn(Strict):
    """One model answer: text (`say`), then the shell commands it calls, in this order."""

    say: str | None = Field(None, description="Text the model says before its calls.")
    run: list[str] = Field(
        default_factory=list,
        description="Shell commands called at once, in this order; none: the final answer.",
    )
    usage: Usage | None = Field(
        None, description="Token figures; by default 1000 + 100 a turn in, 20 (10 for text) out."
    )
    error: HttpError | None = Field(None, description="Answer with an HTTP error instead.")
    hang: Hang | None = Field(None, description="Delay the answer, or stall its stream.")

    @model_validator(mode="after")
    def _says_or_runs(self) -> Turn:
        if self.say is None and not self.run:
            raise ValueError("a turn needs `say` (text), `run` (commands) or both")
        return self


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
    side_usage: Usage | None = Field(
        None, description="Token figures of side requests (titles, summaries, compaction)."
    )

    @field_validator("turns")
    @classmethod
    def _reachable(cls, turns: list[Turn]) -> list[Turn]:
        for index, turn in enumerate(turns[:-1]):
            if not turn.run:
                raise ValueError(
                    f"turn {index + 1} calls no command, so it ends the agent's loop and the "
                    "turns after it are never played: give it `run:` or make it the last turn"
                )
        return turns

    @model_validator(mode="after")
    def _repeatable(self) -> ScriptedSession:
        if self.endless and (not self.turns or not self.turns[-1].run):
            raise ValueError("an endless session repeats its last turn, which must `run:` commands")
        return self

    @classmethod
    def of_solution(cls, commands: list[str]) -> ScriptedSession:
        """The default session: one solution command per turn, then the final answer."""
        return cls(turns=[Turn(run=[command]) for command in commands])

    def reply(
        self, tools: list[tuple[str, dict[str, Any]]], results: int, played: int = 0
    ) -> Reply:
        """The answer to a request offering `tools` whose conversation holds `results` tool
        results after a marker of `played` turns (0: no marker)."""
        turn, first_call = self._position(self._calls_before(played) + results)
        before = self._turn(turn - 1) if turn else None
        final = Reply(
            turn=turn,
            side=False,
            text=FINAL_TEXT,
            commands=(),
            tool=None,
            arguments=(),
            usage=default_usage(turn, calls=False),
            first_call=first_call,
            previous_calls=len(before.run) if before else 0,
        )
        shell = next(((n, s) for n, s in tools if n in SHELL_TOOLS), None)
        if shell is None:
            text = f"{TITLE_TEXT} {played_marker(turn)}" if turn else TITLE_TEXT
            return replace(final, side=True, text=text, usage=self.side_usage or final.usage)
        scripted = self._turn(turn)
        if scripted is None:
            return final
        name, schema = shell
        return replace(
            final,
            text=scripted.say,
            commands=tuple(scripted.run),
            tool=name,
            arguments=tuple(shell_arguments(name, schema, c) for c in scripted.run),
            usage=scripted.usage or default_usage(turn, calls=bool(scripted.run)),
            error=scripted.error,
            hang=scripted.hang,
        )

    def _position(self, results: int) -> tuple[int, int]:
        """(turn, number of calls before it) once `results` tool results are in."""
        turn = calls = 0
        while turn < len(self.turns) and self.turns[turn].run and calls < results:
            calls += len(self.turns[turn].run)
            turn += 1
        if self.endless and calls < results:
            width = len(self.turns[-1].run)
            again = -(-(results - calls) // width)  # ceiling: a partial turn counts as played
            turn, calls = turn + again, calls + again * width
        return turn, calls

    def _calls_before(self, turn: int) -> int:
        """The calls of the turns before position `turn`: the results that lead to it."""
        calls = sum(len(t.run) for t in self.turns[:turn])
        if self.endless and turn > len(self.turns):
            calls += (turn - len(self.turns)) * len(self.turns[-1].run)
        return calls

    def _turn(self, turn: int) -> Turn | None:
        """The turn played at position `turn`; None for the final answer."""
        if turn < len(self.turns):
            return self.turns[turn]
        return self.turns[-1] if self.endless else None


def played_marker(turns: int) -> str:
    """The marker a side answer ends with: how many turns of the session have been played."""
    return f"[llmtt scripted: {turns} turn{'' if turns == 1 else 's'} played]"


def played_in(text: str) -> int:
    """The highest number of turns played that a marker in `text` states; 0 without one."""
    return max((int(m) for m in PLAYED.findall(text)), default=0)


def default_usage(turn: int, *, calls: bool) -> Usage:
    """The fixed figures of a turn that chooses none: the same on every machine."""
    output = OUTPUT_TOKENS_TOOL if calls else OUTPUT_TOKENS_TEXT
    return Usage(input=INPUT_TOKENS_BASE + INPUT_TOKENS_PER_TURN * turn, output=output)


@dataclass(frozen=True)
class Reply:
    """What the session answers to one request, before a wire format shapes it."""

    turn: int  # 0-based position in the session; the final answer is len(turns)
    side: bool  # a side request: plain text, the script does not move
    text: str | None
    commands: tuple[str, ...]
    tool: str | None
    arguments: tuple[dict[str, Any], ...]
    usage: Usage
    first_call: int  # calls played before this turn: call ids number on from it
    error: HttpError | None = None
    hang: Hang | None = None
    previous_calls: int = 0  # calls of the turn before this one, whose results it follows

    def call_ids(self, prefix: str) -> list[str]:
        """Ids of this turn's calls, numbered across the session from 1."""
        return [f"{prefix}{self.first_call + i + 1:04d}" for i in range(len(self.commands))]


def shell_arguments(name: str, schema: dict[str, Any], command: str) -> dict[str, Any]:
    """Arguments shaped from the tool's schema: `{command}`, `{cmd}` or an argv array."""
    props = schema.get("properties", {}) if isinstance(schema, dict) else {}
    if "cmd" in props or (name == "exec_command" and "command" not in props):
        return {"cmd": command}
    if props.get("command", {}).get("type") == "array" or name in ("shell", "local_shell"):
        return {"command": ["bash", "-lc", command]}
    return {"command": command}
