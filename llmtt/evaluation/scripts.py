"""The scripts protocol (specs/llm-tool-test/scripts.md): post scripts, the verdict of a `script`
gate, script evaluators, and what every script is told through its environment.

Order in the evaluate layer: post scripts, then the gates (a `script` gate among them), then
the script evaluators. A post script or a script evaluator that fails is a warning, never a
failed run: the spec makes them data capture and diagnostics, not pass/fail.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError

from llmtt.execution.isolation import confined
from llmtt.execution.workspace import Workspace, home_env, make_home
from llmtt.process.sandbox.bwrap import Sandbox, View, mounted
from llmtt.process.shell import ShellResult, run_shell
from llmtt.spec.evaluation import PostScript
from llmtt.spec.gates import ScriptSource
from llmtt.spec.scenario import LoadedScenario
from llmtt.spec.variables import expand_env

if TYPE_CHECKING:
    from llmtt.plan.runs import Run

POST_DIR = "post-scripts"  # in the run folder: the copy post scripts work on, kept for reading
OUTPUT_LIMIT = 2000  # characters of a failed script's output kept in metrics.json


def script_command(source: ScriptSource, scenario: LoadedScenario) -> str:
    """The shell command that runs a script: its `command` as written, else its file's
    absolute path (resolved against the scenario file's folder), quoted."""
    if source.command is not None:
        return source.command
    assert source.path is not None  # one of the two, checked when the scenario loaded
    return shlex.quote(str(scenario.script_path(source.path)))


def script_label(source: ScriptSource) -> str:
    """How reports name a script: its command or its path, as the scenario writes it."""
    return source.command if source.command is not None else str(source.path)


def script_env(run: Run, ws: Workspace) -> dict[str, str]:
    """The run's isolated environment with the target's variables and what every script is
    told, under llmtt's names and the seed spec's (`LLM_TOOL_TEST_*`)."""
    told = {
        "RUN_DIR": str(run.dir),
        "SCENARIO": run.scenario.name,
        "AGENT": run.agent,
        "MODEL": run.model or "",
        "TRANSCRIPT": str(run.dir / "transcript.raw.txt"),
        "EVENTS": str(run.dir / "events.jsonl"),
    }
    env = ws.env(expand_env(run.target.env, workspace=str(ws.workspace), run_dir=str(run.dir)))
    env.update({f"LLMTT_{name}": value for name, value in told.items()})
    seed = {"RUN_DIR": "RESULTS_DIR"}
    env.update({f"LLM_TOOL_TEST_{seed.get(n, n)}": value for n, value in told.items()})
    return {**env, **workspace_vars(ws.workspace)}


def at_workspace(env: Mapping[str, str], work: Path) -> dict[str, str]:
    """`env` (a `script_env`) for a check working on the copy `work`: every variable that names
    the run's workspace or a path in it (the told ones, a target.env value made from
    `${LLMTT_WORKSPACE}`) names the same place in the copy."""
    out = dict(env)
    old = env.get("LLMTT_WORKSPACE")
    if old:
        for name, value in env.items():
            if value == old or value.startswith(old + os.sep):
                out[name] = str(work) + value[len(old) :]
    return {**out, **workspace_vars(work)}


def workspace_vars(workspace: Path) -> dict[str, str]:
    """The variables naming the workspace a script runs in."""
    return {
        "LLMTT_WORKSPACE": str(workspace),
        "LLM_TOOL_TEST_FIXTURE_DIR": str(workspace),
        "PWD": str(workspace),
    }


@dataclass(frozen=True)
class Checks:
    """How a run's checks (gates, post scripts, script evaluators) are confined: the
    project's sandbox (None: unconfined), what they may reach, and what they see read-only
    besides their scratch folders: the run's folder (its event log and transcript, which
    scripts are told of) and the scenario's script files."""

    sandbox: Sandbox | None = None
    hosts: tuple[tuple[str, int], ...] = ()
    readable: tuple[Path, ...] = ()
    mounts: tuple[tuple[str, str], ...] = ()  # the scenario's: (inside, workspace folder)
    # Where scratch folders are made (None: the system's temporary folder). Confined, not in
    # /tmp: a check's own /tmp must not hold the folders shown below it.
    scratch: Path | None = None

    def view(self, work: Path, writable: tuple[Path, ...], tmp: Path) -> View:
        """What one check working on the copy `work` (one of its `writable` folders) sees."""
        view = View(cwd=work, writable=writable, readable=self.readable, tmp=tmp)
        return mounted(view, work, dict(self.mounts))

    def run(
        self, command: str, *, work: Path, writable: tuple[Path, ...], tmp: Path, **kwargs: Any
    ) -> ShellResult:
        """`run_shell(command, cwd=work, ...)` in this confinement."""
        with confined(self.sandbox, self.view(work, writable, tmp), self.hosts) as confine:
            return run_shell(command, cwd=work, confine=confine, **kwargs)


UNCONFINED = Checks()


def run_in_scratch(
    command: str,
    workspace: Path,
    env: Mapping[str, str],
    timeout: float,
    checks: Checks = UNCONFINED,
) -> ShellResult:
    """Run a command in scratch folders of its own, removed when it is done.

    A copy of the workspace, an empty HOME with its XDG folders and a TMPDIR, all outside the
    run folder: nothing one gate or evaluator writes is seen by the next one or kept with the run.
    """
    if checks.scratch is not None:
        checks.scratch.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="llmtt-gate-", dir=checks.scratch) as scratch:
        work = Path(scratch) / "workspace"
        _copy(workspace, work)
        tmp = Path(scratch) / "tmp"
        tmp.mkdir()
        home = Path(scratch) / "home"
        full = {**at_workspace(env, work), **make_home(home), "TMPDIR": str(tmp)}
        # The copy and the HOME are shown, not the scratch folder: its tmp is the /tmp, and
        # /tmp must not hold itself.
        return checks.run(
            command, work=work, writable=(work, home), tmp=tmp, env=full, timeout_secs=timeout
        )


def _copy(source: Path, dest: Path) -> None:
    """Copy a folder, links as links; an absent one becomes an empty folder."""
    if not source.is_dir():
        dest.mkdir(parents=True)
        return
    try:
        # The kernel copies the data (sendfile), not Python, whatever the files' size.
        shutil.copytree(source, dest, symlinks=True)
    except shutil.Error:
        pass  # named pipes and sockets are not copied; the rest is


def run_post_scripts(
    run: Run, ws: Workspace, env: Mapping[str, str], checks: Checks = UNCONFINED
) -> tuple[Path, list[dict[str, Any]]]:
    """Run `scripts.post` in order; return the workspace the gates and evaluators then read,
    and one record per script.

    The scripts work on a fresh copy of the post-run workspace and HOME (`<run>/post-scripts/`),
    never on the workspace itself: that stays what the agent left, so evaluating again after a
    post script was edited starts from the same state and gets the same result (a script that
    appends or moves files would otherwise see its own earlier work). The copy is kept with the
    run, so what the scripts wrote can be read; the next evaluation replaces it. HOME is the
    agent's, copied, as a tool may keep its state there for an export to read.
    """
    posts = run.scenario.spec.scripts.post
    if not posts:
        return ws.workspace, []
    root = run.dir / POST_DIR
    if root.exists():
        shutil.rmtree(root)
    work, home = root / "workspace", root / "home"
    _copy(ws.workspace, work)
    _copy(ws.home, home)
    records = []
    with tempfile.TemporaryDirectory(prefix="llmtt-post-") as tmp:
        full = {**at_workspace(env, work), **home_env(home), "TMPDIR": tmp}
        for index, spec in enumerate(posts, start=1):
            command = script_command(spec, run.scenario)
            result = checks.run(
                command,
                work=work,
                writable=(root,),
                tmp=Path(tmp),
                env=full,
                timeout_secs=spec.timeout_secs,
            )
            records.append(_post_record(index, spec, result))
    return work, records


def _post_record(index: int, spec: PostScript, result: ShellResult) -> dict[str, Any]:
    label = script_label(spec)
    record: dict[str, Any] = {
        "index": index,
        "script": label,
        "description": spec.description,
        "ok": result.ok,
        "exit_code": result.exit_code,
        "timed_out": result.timed_out,
        "duration_secs": round(result.duration_secs, 3),
    }
    if result.ok:
        record["message"] = f"`{label}` exited 0"
    else:
        said = last_line(result.stderr or result.stdout)
        record["message"] = f"`{label}` {result.describe()}" + (f": {said}" if said else "")
        record["output"] = tail((result.stdout + result.stderr).strip(), OUTPUT_LIMIT)
    return record


class EvaluatorOutput(BaseModel):
    """What a script evaluator prints: every field optional, others ignored."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    metrics: dict[str, JsonValue] = Field(default_factory=dict)
    score: float | None = Field(None, ge=0, le=1, strict=True, allow_inf_nan=False)
    summary: str | None = Field(None, strict=True)


def run_script_evaluators(
    run: Run, workspace: Path, env: Mapping[str, str], checks: Checks = UNCONFINED
) -> dict[str, dict[str, Any]]:
    """Each of `scripts.evaluators` on a scratch copy of `workspace`, as metrics.json holds them
    under `script_evaluators`: its metrics, score and summary, or an `error` with its `output`
    (its results left out, as the spec has it)."""
    out: dict[str, dict[str, Any]] = {}
    for spec in run.scenario.spec.scripts.evaluators:
        command = script_command(spec, run.scenario)
        result = run_in_scratch(command, workspace, env, spec.timeout_secs, checks)
        record: dict[str, Any] = {
            "script": script_label(spec),
            "exit_code": result.exit_code,
            "duration_secs": round(result.duration_secs, 3),
        }
        found, error = _evaluator_output(result)
        if found is not None:
            record.update(found.model_dump(exclude_none=True))
        else:
            record["error"] = error
            record["output"] = tail(result.stdout.strip(), OUTPUT_LIMIT)
        out[spec.name] = record
    return out


def _evaluator_output(result: ShellResult) -> tuple[EvaluatorOutput | None, str]:
    """What a script evaluator printed, or why there is nothing to keep."""
    if not result.ok:
        said = last_line(result.stderr)
        return None, result.describe() + (f": {said}" if said else "")
    data, problem = json_object(result.stdout)
    if problem is not None:
        return None, problem
    try:
        return EvaluatorOutput.model_validate(data), ""
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in err["loc"])
        return None, f"its JSON's {where}: {err['msg']}"


def script_warnings(
    post: Sequence[Mapping[str, Any]], evaluators: Mapping[str, Mapping[str, Any]]
) -> list[str]:
    """What went wrong with the scripts that do not decide the outcome, one line each."""
    warnings = [f"post script {p['index']} {p['message']}" for p in post if not p["ok"]]
    warnings += [
        f"script evaluator {name} failed: {e['error']}"
        for name, e in evaluators.items()
        if "error" in e
    ]
    return warnings


def json_object(stdout: str) -> tuple[dict[str, Any] | None, str | None]:
    """The JSON object a script printed (its whole stdout, else its last line, so that it may
    log first), or why there is none."""
    text = stdout.strip()
    if not text:
        return None, "stdout is empty"
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:  # RecursionError: nested too deep to read
        last = text.splitlines()[-1]
        try:
            data = json.loads(last)
        except (ValueError, RecursionError):
            return None, f"stdout is not JSON ({exc})"
    if not isinstance(data, dict):
        return None, f"stdout is JSON but not an object ({type(data).__name__})"
    return data, None


def script_verdict(result: ShellResult, label: str) -> tuple[bool, str, dict[str, Any]]:
    """A `script` gate's pass or fail, its message, and what its record keeps (`data`: the
    JSON object it printed; `detail`: that object's `detail`).

    A JSON object on stdout with a boolean `passed` decides, whatever the exit code; otherwise
    the exit code does, with a note saying why the output gave no verdict (none for an empty
    stdout, or an object that holds data but no `passed`). A timeout always fails.
    """
    if result.timed_out:
        return False, f"`{label}` {result.describe()}", {}
    data, problem = json_object(result.stdout)
    if data is not None:
        passed = data.get("passed")
        if isinstance(passed, bool):
            return _json_verdict(data, passed, result, label)
        problem = None  # an object of data without a verdict: the spec's plain fallback
        if "passed" in data:
            problem = f"`passed` is {json.dumps(passed)[:40]}, not true or false"
    elif not result.stdout.strip():
        problem = None
    if result.ok:
        text = f"`{label}` exited 0"
    else:
        said = last_line(result.stderr or result.stdout)
        text = f"`{label}` {result.describe()}" + (f": {said}" if said else "")
    if problem is not None:
        text += f" ({problem}; the exit code decides)"
    return result.ok, text, {} if data is None else {"data": data}


def _json_verdict(
    data: dict[str, Any], passed: bool, result: ShellResult, label: str
) -> tuple[bool, str, dict[str, Any]]:
    message = data.get("message")
    said = "passed" if passed else "failed"
    text = str(message)[:500] if message is not None else f"`{label}` says it {said}"
    if passed != result.ok:
        text += f" (its JSON verdict decides over its {result.describe()})"
    kept = {"data": data}
    if "detail" in data:
        kept["detail"] = data["detail"]
    return passed, text, kept


def last_line(text: str) -> str:
    """The last line of `text` that is not blank, cut at 200 characters."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:200] if lines else ""


def tail(text: str, limit: int = 4000) -> str:
    """The end of `text`, at most `limit` characters, marked when cut."""
    return text if len(text) <= limit else "[...]\n" + text[-limit:]
