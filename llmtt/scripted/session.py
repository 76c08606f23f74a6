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
from typing import Any

from llmtt.spec.scripted import Hang, HttpError, ScriptedSession, Turn, TurnUsage

FINAL_TEXT = "Done: every step of the task has been carried out."
TITLE_TEXT = "Scripted session"
# The marker of a side answer; a count of more than 9 digits is no marker of the server's.
PLAYED = re.compile(r"\[llmtt scripted: (\d{1,9}) turns? played\]")
SHELL_TOOLS = ("Bash", "bash", "exec_command", "shell", "local_shell")
INPUT_TOKENS_BASE = 1000
INPUT_TOKENS_PER_TURN = 100
OUTPUT_TOKENS_TOOL = 20
OUTPUT_TOKENS_TEXT = 10


def answer(
    session: ScriptedSession, tools: list[tuple[str, dict[str, Any]]], results: int, played: int = 0
) -> Reply:
    """The answer to a request offering `tools` whose conversation holds `results` tool
    results after a marker of `played` turns (0: no marker)."""
    turn, first_call = _position(session, _calls_before(session, played) + results)
    before = _turn(session, turn - 1) if turn else None
    final = Reply(
        turn=turn,
        side=False,
        text=FINAL_TEXT,
        commands=(),
        tool=None,
        arguments=(),
        usage=default_usage(turn, calls=False),
        first_call=first_call,
        previous_calls=before.calls if before else 0,
    )
    shell = next(((n, s) for n, s in tools if n in SHELL_TOOLS), None)
    if shell is None:
        text = f"{TITLE_TEXT} {played_marker(turn)}" if turn else TITLE_TEXT
        return replace(final, side=True, text=text, usage=session.side_usage or final.usage)
    scripted = _turn(session, turn)
    if scripted is None:
        return final
    name, schema = shell
    commands = tuple(scripted.run)
    arguments = tuple(shell_arguments(name, schema, c) for c in scripted.run)
    if scripted.skill is not None:
        name, commands, arguments = _skill_call(scripted.skill, tools, shell)
    return replace(
        final,
        text=scripted.say,
        commands=commands,
        tool=name,
        arguments=arguments,
        usage=scripted.usage or default_usage(turn, calls=bool(scripted.calls)),
        error=scripted.error,
        hang=scripted.hang,
    )


SKILL_TOOLS = {"Skill": "skill", "skill": "name"}  # an agent's skill tool -> its argument
# Where the agents keep a run's skills (llmtt.agents: each agent's `skills_dir`).
SKILL_DIRS = (".claude/skills", ".agents/skills", ".opencode/skills", ".codex/skills")


def _skill_call(
    skill: str, tools: list[tuple[str, dict[str, Any]]], shell: tuple[str, dict[str, Any]]
) -> tuple[str, tuple[str, ...], tuple[dict[str, Any], ...]]:
    """The call that loads `skill`: the agent's skill tool, else a shell read of SKILL.md."""
    tool = next((n for n, _ in tools if n in SKILL_TOOLS), None)
    if tool is not None:
        return tool, (f"skill {skill}",), ({SKILL_TOOLS[tool]: skill},)
    files = " ".join(f"{d}/{skill}/SKILL.md" for d in SKILL_DIRS)
    command = f"cat $(ls {files} 2>/dev/null | head -n 1)"
    name, schema = shell
    return name, (command,), (shell_arguments(name, schema, command),)


def _position(session: ScriptedSession, results: int) -> tuple[int, int]:
    """(turn, number of calls before it) once `results` tool results are in."""
    turn = calls = 0
    while turn < len(session.turns) and session.turns[turn].calls and calls < results:
        calls += session.turns[turn].calls
        turn += 1
    if session.endless and calls < results:
        width = session.turns[-1].calls
        again = -(-(results - calls) // width)  # ceiling: a partial turn counts as played
        turn, calls = turn + again, calls + again * width
    return turn, calls


def _calls_before(session: ScriptedSession, turn: int) -> int:
    """The calls of the turns before position `turn`: the results that lead to it."""
    calls = sum(t.calls for t in session.turns[:turn])
    if session.endless and turn > len(session.turns):
        calls += (turn - len(session.turns)) * session.turns[-1].calls
    return calls


def _turn(session: ScriptedSession, turn: int) -> Turn | None:
    """The turn played at position `turn`; None for the final answer."""
    if turn < len(session.turns):
        return session.turns[turn]
    return session.turns[-1] if session.endless else None


def played_marker(turns: int) -> str:
    """The marker a side answer ends with: how many turns of the session have been played."""
    return f"[llmtt scripted: {turns} turn{'' if turns == 1 else 's'} played]"


def played_in(text: str) -> int:
    """The highest number of turns played that a marker in `text` states; 0 without one."""
    return max((int(m) for m in PLAYED.findall(text)), default=0)


def default_usage(turn: int, *, calls: bool) -> TurnUsage:
    """The fixed figures of a turn that chooses none: the same on every machine."""
    output = OUTPUT_TOKENS_TOOL if calls else OUTPUT_TOKENS_TEXT
    return TurnUsage(input=INPUT_TOKENS_BASE + INPUT_TOKENS_PER_TURN * turn, output=output)


@dataclass(frozen=True)
class Reply:
    """What the session answers to one request, before a wire format shapes it."""

    turn: int  # 0-based position in the session; the final answer is len(turns)
    side: bool  # a side request: plain text, the script does not move
    text: str | None
    commands: tuple[str, ...]
    tool: str | None
    arguments: tuple[dict[str, Any], ...]
    usage: TurnUsage
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
