"""The `scripted` model: an offline model server on 127.0.0.1 that plays a scripted session.

It speaks the three wire formats the real agent CLIs use: Anthropic Messages (claude-code),
OpenAI Chat Completions (opencode, litellm) and OpenAI Responses (codex), streamed (SSE) or
plain. A scenario's `scripted:` session (`session.py`) chooses each turn's text, parallel tool
calls, token figures, HTTP errors and hangs; without one the server plays the scenario's
`solution`, one command a turn with fixed token counts, so a run's usage is the same on every
machine. Each answer is decided from the request alone: after a compaction, from the marker
of turns played that the server's answer to the summary request left in the conversation. A
scripted run costs nothing. The format of a session is `llmtt.spec.scripted`; the server is
`llmtt.scripted.server`.

May import: `llmtt.providers`, `llmtt.process`, `llmtt.spec` and the leaves.
"""

from __future__ import annotations

from llmtt.scripted.session import FINAL_TEXT, TITLE_TEXT, shell_arguments
from llmtt.spec.scripted import Hang, HttpError, ScriptedSession, Turn, TurnUsage

__all__ = [
    "FINAL_TEXT",
    "TITLE_TEXT",
    "Hang",
    "HttpError",
    "ScriptedSession",
    "Turn",
    "TurnUsage",
    "shell_arguments",
]
