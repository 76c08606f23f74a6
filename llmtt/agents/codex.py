"""codex: `codex exec --json`, normalised into llmtt events with the help of codex's rollout.

`exec --json` reports usage only for the whole turn (`turn.completed`) and its commands in the
order they finish. codex also writes its session as it goes to a "rollout" file under
CODEX_HOME, `sessions/YYYY/MM/DD/rollout-<time>-<thread id>.jsonl`: the model's tool calls in
the order it issued them (with the model's call ids), a `token_usage_record` for each model
response, and each command's end with its exit code; a compaction (a side request) writes its
summary, marked `compaction_output`, before its usage record. The adapter reads that file while
codex runs, and once more when it has ended (a killed run too), for the tool calls and the
usage of each request; the stream gives the messages, the errors and the total. Without a
rollout (a `command` agent whose codex writes elsewhere, another codex) the stream's commands
are emitted when the run ends, in the order they finished, and only the total usage is known.
"""

from __future__ import annotations

import glob
import json
import re
import shlex
import time
from pathlib import Path
from typing import Any

from pydantic_core import from_json

from llmtt.agents.base import RunContext
from llmtt.agents.cli_agent import CliAgent
from llmtt.agents.install import pinned
from llmtt.agents.pricing import Pricing, Tokens
from llmtt.agents.stream import StreamParser, figure, json_text, mapping, unwrap_shell, whole
from llmtt.events import EventWriter, tool_name

PROVIDER = "llmtt"
KEY_VARIABLE = "LLMTT_SCRIPTED_KEY"  # the scripted server's key, for codex's provider
SHELL_TOOLS = ("exec_command", "shell", "shell_command", "local_shell")
CALL_ITEMS = ("function_call", "custom_tool_call", "local_shell_call")
OUTPUT_ITEMS = ("function_call_output", "custom_tool_call_output", "local_shell_call_output")
_EXITED = re.compile(r"^Process exited with code (-?\d{1,10})$", re.MULTILINE)
_OUTPUT = "\nOutput:\n"
LOOK_SECS = 0.02  # how often to look for a rollout not found yet (a glob: cheap)


class Rollout:
    """The complete JSON lines appended to a file since the last read."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0
        self._partial = b""
        self.unread: list[bytes] = []  # complete lines of the last read that are no record

    def read(self) -> list[dict[str, Any]]:
        """The records written since the last call (a line still being written waits)."""
        try:
            with open(self.path, "rb") as handle:
                handle.seek(self._offset)
                data = handle.read()
        except OSError:
            return []
        self._offset += len(data)
        *lines, self._partial = (self._partial + data).split(b"\n")
        records = []
        self.unread = []
        for line in lines:
            try:
                record = from_json(line)  # as StreamParser.take reads the stream
            except ValueError:
                try:  # what pydantic's parser refuses and Python's json takes (a lone surrogate)
                    record = json.loads(line)
                except (ValueError, RecursionError):
                    record = None
            if isinstance(record, dict):
                records.append(record)
            elif line.strip():
                self.unread.append(line)
        return records


class CodexStream(StreamParser):
    """Reads codex's JSONL events and its rollout: tool calls in the model's order, usage per
    model response, the turn's total."""

    def __init__(self, events: EventWriter, pricing: Pricing, *, home: Path | None) -> None:
        super().__init__(events, pricing)
        self.home = home  # CODEX_HOME, where codex writes its rollout
        self._thread: str | None = None
        self._rollout: Rollout | None = None
        self._next_look = 0.0  # when to look for the rollout again
        self._compacting = False  # the next usage record is a compaction's
        self._side = Tokens()  # what the compactions used, inside codex's total
        self._calls: list[tuple[str, str, str]] = []  # (id, tool, command) awaiting their usage
        self._begun = False  # the response of the held calls has been counted as a request
        self._tools: set[str] = set()  # call ids emitted
        self._shell: set[str] = set()  # those of them that run a command
        self._commands = 0  # how many such calls were emitted
        self._ended: set[str] = set()  # the stream's ids of the commands that ended
        self._done: set[str] = set()  # call ids with a result
        self._stream: list[tuple[str, dict[str, Any]]] = []  # the stream's commands (fallback)
        self._totals: list[Tokens] = []

    def handle(self, obj: dict[str, Any]) -> None:
        """thread.started -> the rollout; agent_message -> message; turn.completed -> the
        total (emitted at the end, after the last request); failures -> the reason."""
        kind = obj.get("type")
        item = obj.get("item") or {}
        what = item.get("type") if isinstance(item, dict) else None
        if kind == "thread.started":
            self._thread = str(obj.get("thread_id") or "") or None
            self.poll()
        elif what == "command_execution" and kind in ("item.started", "item.completed"):
            self._stream.append((kind, item))
            if kind == "item.completed":
                self._ended.add(str(item.get("id")))
        elif what == "agent_message" and kind == "item.completed":
            self.events.emit("message", role="assistant", text=str(item.get("text", "")))
        elif what == "error" and kind == "item.completed":
            # e.g. "Model metadata for `scripted` not found": said, not counted.
            self.events.emit("output", text=f"codex: {item.get('message', '')}")
        elif kind == "turn.completed":
            self._totals.append(_tokens(obj.get("usage")))
            self.natural_stop = True
        elif kind in ("turn.failed", "error"):
            self.natural_stop = False
            self.reason = f"codex {kind}: {json_text(obj.get('error') or obj.get('message'))}"
            self.events.emit("output", text=self.reason)

    @property
    def settled(self) -> bool:
        """Every call of the latest response has its result. codex prints a command's end on
        its stream a moment before its rollout records it, and makes its next request right
        after: the stream's count of ended commands tells as soon as it can."""
        waiting = self.open_calls
        if not waiting or not waiting <= self._shell:
            return super().settled
        return len(self._ended) >= self._commands

    def poll(self) -> None:
        """Read what codex has added to its rollout."""
        if self._rollout is None:
            self._rollout = self._find()
            if self._rollout is None:
                return
        for record in self._rollout.read():
            self.safely(self._record, record, None, "a record of codex's rollout")
        for line in self._rollout.unread:
            self.unread("a line of codex's rollout", "not a JSON object", line)

    def finish(self) -> None:
        """Calls recorded without their usage; without a rollout, the stream's commands; then
        the totals, after every request they cover."""
        self._next_look = 0.0
        self.poll()
        if self._calls:
            self._emit_calls()
        if self._rollout is None:
            self.per_request = False
            self.events.emit(
                "output",
                text="llmtt: codex's rollout was not found under CODEX_HOME: the usage of each "
                "request and the order of parallel calls are unknown",
            )
            self._stream_commands()
        for tokens in self._totals:
            # codex's total counts its compactions too, which are side requests here.
            self.total(tokens.minus(self._side))
            self._side = Tokens()

    def _find(self) -> Rollout | None:
        if self.home is None or self._thread is None or time.monotonic() < self._next_look:
            return None
        self._next_look = time.monotonic() + LOOK_SECS  # polls come after every read
        pattern = f"sessions/*/*/*/rollout-*-{glob.escape(self._thread)}.jsonl"
        found = sorted(self.home.glob(pattern))
        return Rollout(found[0]) if found else None

    def _record(self, record: dict[str, Any]) -> None:
        kind = record.get("type")
        payload = mapping(record.get("payload"))
        inner = payload.get("type")
        if kind == "response_item" and inner in CALL_ITEMS:
            self._calls.append(_call(payload))
        elif kind == "response_item" and mapping(record.get("metadata")).get("compaction_output"):
            self._compacting = True  # the summary of a compaction: its usage record follows
        elif kind == "token_usage_record" and self._compacting:
            self._compacting = False
            tokens = _tokens(payload.get("usage"))
            self._side = self._side.plus(tokens)
            self.usage(tokens, side=True)
        elif kind == "token_usage_record":
            tokens = _tokens(payload.get("usage"))
            if not self._begun:
                self.request()
            self._begun = True
            self.usage(tokens)
            self._emit_calls()
        elif kind == "event_msg" and inner == "item_completed":
            item = mapping(payload.get("item"))
            if item.get("type") == "CommandExecution":
                code = item.get("exit_code")
                output = str(item.get("aggregated_output", ""))
                self._result(str(item.get("id")), output, whole(code))
        elif kind == "response_item" and inner in OUTPUT_ITEMS:
            self._output(payload)

    def _output(self, payload: dict[str, Any]) -> None:
        """A call's output as the model got it: the result of a call that has no other (a
        tool other than a command, or a command refused before it ran)."""
        output = payload.get("output")
        text = output if isinstance(output, str) else json_text(output)
        exited = _EXITED.search(text)
        shown = text.split(_OUTPUT, 1)[1] if exited and _OUTPUT in text else text
        code = int(exited.group(1)) if exited else None
        self._result(str(payload.get("call_id")), shown, code)

    def _emit_calls(self) -> None:
        if not self._begun:
            self.request()
        for call_id, tool, command in self._calls:
            self._tools.add(call_id)
            self._done.discard(call_id)  # an id used again (a session replayed) awaits anew
            if tool in SHELL_TOOLS:
                self._shell.add(call_id)
                self._commands += 1
            self.called(call_id)
            self.events.emit(
                "tool_call", id=call_id, tool=tool_name(tool), agent_tool=tool, command=command
            )
        self._calls = []
        self._begun = False

    def _result(self, call_id: str, output: str, exit_code: int | None) -> None:
        if call_id in self._done:
            return
        if call_id not in self._tools and any(c[0] == call_id for c in self._calls):
            self._emit_calls()  # its output came before its response's usage record
            self._begun = True  # that record, still to come, belongs to the same request
        if call_id not in self._tools:
            return
        self._done.add(call_id)
        self.answered(call_id)
        self.events.emit("tool_result", id=call_id, output=output, exit_code=exit_code)

    def _stream_commands(self) -> None:
        started: set[str] = set()
        for kind, item in self._stream:
            call_id = str(item.get("id"))
            if call_id not in started:
                started.add(call_id)
                command = unwrap_shell(str(item.get("command", "")))
                self.events.emit(
                    "tool_call",
                    id=call_id,
                    tool=tool_name("exec_command"),
                    agent_tool="exec_command",
                    command=command,
                )
            if kind == "item.completed":
                code = item.get("exit_code")
                self.events.emit(
                    "tool_result",
                    id=call_id,
                    output=str(item.get("aggregated_output", "")),
                    exit_code=whole(code),
                )


def _tokens(usage: Any) -> Tokens:
    """OpenAI's usage counts the cached input inside `input_tokens`: it is taken out."""
    cached = figure(usage, "cached_input_tokens")
    return Tokens(
        max(0, figure(usage, "input_tokens") - cached),
        figure(usage, "output_tokens"),  # reasoning included
        cached,
        figure(usage, "cache_write_input_tokens"),
    )


def _call(payload: dict[str, Any]) -> tuple[str, str, str]:
    """(call id, tool, command) of a tool call item: a shell tool's command line as the model
    wrote it, any other tool's arguments as JSON (never read as a shell line)."""
    call_id = str(payload.get("call_id") or payload.get("id"))
    if payload.get("type") == "local_shell_call":
        action = mapping(payload.get("action"))
        return call_id, "local_shell", _line(action.get("command"))
    name = str(payload.get("name", ""))
    raw = payload.get("arguments", payload.get("input", ""))
    try:
        arguments = json.loads(raw) if isinstance(raw, str) else raw
    except (ValueError, RecursionError):
        arguments = raw
    if name in SHELL_TOOLS and isinstance(arguments, dict):
        command = arguments.get("cmd", arguments.get("command"))
        if command is not None:
            return call_id, name, _line(command)
    return call_id, name, json_text(arguments)


def _line(command: Any) -> str:
    """A command line from a string or an argv (`["bash", "-lc", LINE]` gives LINE)."""
    if isinstance(command, list):
        return unwrap_shell(shlex.join(str(part) for part in command))
    return str(command)


class CodexAgent(CliAgent):
    """OpenAI's codex CLI, `exec` mode, with its JSONL stream and its rollout."""

    name = "codex"
    executable_name = "codex"
    package = pinned("codex")
    key_env = ("OPENAI_API_KEY", "CODEX_API_KEY")
    provider_hosts = ("api.openai.com",)
    provider_base = "https://api.openai.com/v1"
    provider_base_env = "OPENAI_BASE_URL"
    provider_key_env = ("OPENAI_API_KEY", "CODEX_API_KEY")
    skills_reads = (".agents/skills", ".codex/skills")

    def command(self, ctx: RunContext, exe: str) -> tuple[list[str], dict[str, str]]:
        """`codex exec --json ...` with its home inside the run and no approvals."""
        endpoint = self.endpoint(ctx)
        argv = [
            exe,
            "exec",
            "--json",
            "--skip-git-repo-check",
            "--dangerously-bypass-approvals-and-sandbox",
            "-c",
            'approval_policy="never"',
            # No usage analytics: a run is no user's session, and in the sandbox their name
            # look-ups cannot succeed, which held each run 5 s before codex exited.
            "-c",
            "analytics.enabled=false",
        ]
        env = {"CODEX_HOME": str(ctx.home / ".codex")}
        if endpoint.base_url:
            # A gateway, a proxy or the scripted server: a model provider of llmtt's own.
            fields = {
                "name": "llmtt endpoint",
                "base_url": endpoint.base_url,
                "wire_api": "responses",  # codex speaks nothing else
            }
            if endpoint.key is not None:
                # codex reads the key from the variable the provider names.
                fields["env_key"] = endpoint.key_env or KEY_VARIABLE
                env[fields["env_key"]] = endpoint.key
            provider = ", ".join(f"{k} = {json.dumps(v)}" for k, v in fields.items())
            if endpoint.scripted:
                # The scripted server's errors are the session's: a retry would replay them.
                provider += ", request_max_retries = 0, stream_max_retries = 0"
            argv += [
                "-c",
                f'model_provider="{PROVIDER}"',
                "-c",
                f"model_providers.{PROVIDER}={{ {provider} }}",
            ]
        elif endpoint.key:
            env.update(dict.fromkeys(self.key_env, endpoint.key))
        argv += ["-m", endpoint.model, ctx.prompt]
        (ctx.home / ".codex").mkdir(parents=True, exist_ok=True)
        return argv, env

    def parser(self, ctx: RunContext) -> StreamParser:
        """A codex reader: its stream, and its rollout in the run's CODEX_HOME."""
        return CodexStream(ctx.events, self.pricing(ctx), home=ctx.home / ".codex")
