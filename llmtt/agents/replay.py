"""An agent that replays imported ATIF trajectories (`llmtt import atif`): it starts no process
and calls no model, so a run of another harness (Harbor, SkillEvaluator, ...) is graded by the
scenario's gates, metrics and judge like any run.

    [agents.atif-claude-code]
    trajectories = "trajectories/atif-claude-code"   # <scenario>.json, <scenario>.workspace/

The trajectory of the run's scenario becomes its events: each agent step's message, tool calls
(the agent's own tool names, named as llmtt names them) and what they gave back, and its tokens
and cost as `usage`; user and system steps are the task, not the agent's doing, and are left
out. A step of N model requests (`llm_call_count`) is N turns. An exit code travels under the
step's `extra.llmtt.exit_codes` (llmtt's own export writes it); without one it is unknown,
never guessed. The workspace the trajectory left, when it was imported with one, replaces the
prepared workspace's content; else the gates see the workspace as the setup left it.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from llmtt.agents.base import Agent, AgentExit, RunContext, VersionProbe
from llmtt.events import SHELL, tool_name
from llmtt.spec.config import AgentSettings
from llmtt.trajectories.atif import Step, Trajectory, text_of
from llmtt.util.hashing import hash_file, hash_value
from llmtt.util.signatures import note_file

WORKSPACE_SUFFIX = ".workspace"


class ReplayAgent(Agent):
    """Replays `<trajectories>/<scenario>.json` of the project."""

    needs_model = False
    free = True  # a replay spends nothing; the trajectory's own costs are reported as usage
    replays = True

    def __init__(self, name: str, settings: AgentSettings, project_root: Path) -> None:
        super().__init__(settings, project_root)
        self.name = name
        self.folder = project_root / (settings.trajectories or "")

    def version(self, probe: VersionProbe) -> str:
        """The trajectories' contents (each import writes its trajectory anew, with the hash of
        its workspace): importing another one replays the runs again; importing the same one
        again does not. The folders and files read are noted for the plan cache. Workspaces
        are not walked, so loading the plan stays quick (a workspace edited by hand is not
        seen: import it again)."""
        seen = []
        note_file(self.folder)
        for folder, dirs, files in os.walk(self.folder):  # a scenario's name may hold a "/"
            note_file(folder)
            # not a workspace, nor one an import left half-copied (".<name>.workspace.new-")
            dirs[:] = sorted(
                d for d in dirs if not d.endswith(WORKSPACE_SUFFIX) and not d.startswith(".")
            )
            for name in sorted(f for f in files if f.endswith(".json")):
                path = os.path.join(folder, name)
                seen.append((os.path.relpath(path, self.folder), hash_file(Path(path))))
        return "atif-replay-2:" + hash_value(seen)[:16]

    def unavailable(self, model: str | None) -> str | None:
        """Nothing to install; a missing trajectory is said by the run itself."""
        return None

    def run(self, ctx: RunContext) -> AgentExit:
        """The trajectory's steps as events; its workspace laid in."""
        started = time.monotonic()
        scenario = ctx.run_id.rsplit("/", 2)[0]
        path = self.folder / f"{scenario}.json"
        try:
            trajectory = Trajectory.model_validate(json.loads(path.read_text(encoding="utf-8")))
        except FileNotFoundError:
            return _failed(
                f"no trajectory of scenario {scenario} for agent {self.name}: {path} is missing "
                f"(llmtt import atif FILE --scenario {scenario} --agent {self.name})"
            )
        except (OSError, ValueError, ValidationError) as exc:
            return _failed(f"{path}: not an ATIF trajectory llmtt reads: {exc}")
        ctx.events.emit("spawn", command="replay", args=[str(path)])
        saved = self.folder / f"{scenario}{WORKSPACE_SUFFIX}"
        if saved.is_dir():
            _lay(saved, ctx.workspace)
        for step in trajectory.steps:
            if step.source == "agent":
                _replay(ctx, step)
        own = trajectory.extra.llmtt if trajectory.extra else None
        ended = own.ended if own else None
        duration = ended.duration_secs if ended else None
        if duration is None:
            duration = _span(trajectory) or round(time.monotonic() - started, 3)
        last = trajectory.steps[-1]
        natural = last.source == "agent" and not last.tool_calls
        if ended and ended.natural_stop is not None:
            natural = ended.natural_stop
        timed_out = bool(ended and ended.timed_out)
        exit_code = ended.exit_code if ended else None
        reason = ended.reason if ended else "imported trajectory: exit unknown"
        ctx.events.emit(
            "complete",
            exit_code=exit_code,
            duration_secs=duration,
            timed_out=timed_out,
            natural_stop=natural,
            **({"reason": reason} if reason else {}),
        )
        return AgentExit(exit_code, timed_out, duration, natural_stop=natural, reason=reason)


def _replay(ctx: RunContext, step: Step) -> None:
    """One agent step as events, and as lines of the transcript (and so of the recording)."""
    text = text_of(step.message)
    if text:
        ctx.events.emit("message", role="assistant", text=text)
        ctx.transcript.write(text.encode() + b"\n")
    own = step.extra.llmtt if step.extra else None
    codes = (own.exit_codes if own else None) or {}
    for call in step.tool_calls or []:
        llmtt_name = tool_name(call.function_name)
        command = call.arguments.get("command")
        if llmtt_name != SHELL or not isinstance(command, str):
            command = json.dumps(call.arguments, ensure_ascii=False)
        ctx.events.emit(
            "tool_call",
            id=call.tool_call_id,
            tool=llmtt_name,
            agent_tool=call.function_name,
            command=command,
        )
        ctx.transcript.write(f"$ {command}\n".encode())
    for result in step.observation.results if step.observation else []:
        output = text_of(result.content)
        ctx.transcript.write(output.encode() + (b"" if output.endswith("\n") else b"\n"))
        if result.source_call_id is None:
            ctx.events.emit("output", text=output)
            continue
        ctx.events.emit(
            "tool_result",
            id=result.source_call_id,
            output=output,
            exit_code=codes.get(result.source_call_id),
        )
    ctx.transcript.flush()
    if step.metrics is not None:
        ctx.events.emit("usage", **_usage(step))
        # A step standing for several model requests is as many turns; its figures, summed,
        # are all on the first.
        for _ in range((step.llm_call_count or 1) - 1):
            ctx.events.emit("usage")


def _usage(step: Step) -> dict[str, Any]:
    """A step's metrics as llmtt counts them: input tokens without the cached ones."""
    metrics = step.metrics
    assert metrics is not None
    own = metrics.extra.llmtt if metrics.extra else None
    written = (own.cache_write_tokens if own else None) or 0
    cached = metrics.cached_tokens or 0
    out: dict[str, Any] = {
        "input_tokens": max(0, (metrics.prompt_tokens or 0) - cached - written),
        "output_tokens": metrics.completion_tokens or 0,
        "cache_read_tokens": cached,
        "cache_write_tokens": written,
    }
    if metrics.cost_usd is not None:
        out.update(cost_usd=metrics.cost_usd, cost_source="trajectory")
    return out


def _span(trajectory: Trajectory) -> float | None:
    """Seconds from the first step's time to the last's, where both are given, and both with
    a time zone or both without (a time without one is no instant to compare with one)."""
    import datetime as dt

    stamps = [s.timestamp for s in trajectory.steps if s.timestamp]
    if len(stamps) < 2:
        return None
    first, last = (
        dt.datetime.fromisoformat(t.replace("Z", "+00:00")) for t in (stamps[0], stamps[-1])
    )
    if (first.tzinfo is None) != (last.tzinfo is None):
        return None
    return round((last - first).total_seconds(), 3)


def _lay(saved: Path, workspace: Path) -> None:
    """The workspace the trajectory left, in place of the prepared one's content."""
    for entry in os.scandir(workspace):
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path)
        else:
            os.unlink(entry.path)
    shutil.copytree(saved, workspace, symlinks=True, dirs_exist_ok=True)


def _failed(message: str) -> AgentExit:
    return AgentExit(exit_code=None, timed_out=False, duration_secs=0.0, error=message)
