"""Shared fixtures: real temporary llmtt projects driven by the real `doit`."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
import textwrap
import threading
import types
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

BIN = Path(sys.executable).parent

# llmtt finds agent CLIs in the user's agents folder too (llmtt/agents/install.py): the tests
# see only those they name or install, not what this machine's user installed.
os.environ.pop("LLMTT_AGENTS_DIR", None)
os.environ["XDG_DATA_HOME"] = tempfile.mkdtemp(prefix="llmtt-tests-data-")
DOIT = str(BIN / "doit")

GIT_TOML = """\
[target]
binary = "git"
command_pattern = '(?<![\\w./-])git(?![\\w./-])(?:\\s+([a-z][\\w-]*))?'
version_command = "git --version"
env.GIT_AUTHOR_NAME = "t"
env.GIT_AUTHOR_EMAIL = "t@example.invalid"
env.GIT_COMMITTER_NAME = "t"
env.GIT_COMMITTER_EMAIL = "t@example.invalid"
"""

# A project's smallest target: a tool no test's commands run, so a run measures no command.
TOOL_TOML = '[target]\nbinary = "mytool"\n'


# The pinned agent CLIs (`./scripts/setup test` installs them) and llmtt's own loop, driven alike.
CLI_AGENTS = ("claude-code", "opencode", "codex", "litellm")
# LLMTT_TEST_CLI_BIN points the suite at other builds (a folder holding `claude`, `opencode`
# and `codex`), to learn whether they keep llmtt's contract before pinning them.
_CLI_BIN = Path(
    os.environ.get("LLMTT_TEST_CLI_BIN")
    or Path(__file__).resolve().parents[1] / "node_modules" / ".bin"
)
_CLI_EXECUTABLES = {"claude-code": "claude", "opencode": "opencode", "codex": "codex"}


def cli_project(root: Path, toml: str = "") -> Project:
    """A project whose llmtt.toml (GIT_TOML, then `toml`) points each agent CLI at its pinned
    binary; missing binaries fail the test with what to run."""
    for name in _CLI_EXECUTABLES.values():
        path = _CLI_BIN / name
        assert path.exists(), f"{path} missing: run ./scripts/setup test (npm install)"
    project = Project(root)
    tables = "".join(
        f'\n[agents.{a}]\nexecutable = "{_CLI_BIN / e}"\n' for a, e in _CLI_EXECUTABLES.items()
    )
    project.write("llmtt.toml", GIT_TOML + tables + toml)
    return project


@dataclass
class DoitResult:
    """One `doit` invocation."""

    code: int
    out: str
    err: str

    def executed(self) -> list[str]:
        """Tasks doit executed (`.  name` lines)."""
        return [line[3:].strip() for line in self.out.splitlines() if line.startswith(".  ")]


class Project:
    """A temporary llmtt project on disk."""

    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "scenarios").mkdir(parents=True, exist_ok=True)
        (root / "dodo.py").write_text("from llmtt.tasks import *  # noqa: F403\n")

    def write(self, rel: str, text: str) -> Path:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
        return path

    def doit(
        self, *args: str, timeout: float = 300, env: dict[str, str] | None = None
    ) -> DoitResult:
        base = {k: v for k, v in os.environ.items() if not k.startswith("LLMTT_")}
        env = {**base, **(env or {})}
        proc = subprocess.run(
            [DOIT, *args], cwd=self.root, capture_output=True, text=True, timeout=timeout, env=env
        )
        return DoitResult(proc.returncode, proc.stdout, proc.stderr)

    def results(self) -> Path:
        return self.root / "llm-tool-test-results"

    def json(self, rel: str) -> Any:
        return json.loads((self.results() / rel).read_text())

    def report_html(self) -> str:
        """report.html's text, with every run's panel (from report-runs/) after it, as the page
        shows them once each run is opened."""
        page = (self.results() / "report.html").read_text()
        return page + "".join(run_panels(self.results()).values())


def run_panels(results: Path) -> dict[str, str]:
    """Each run's panel HTML by run id, read from the files of `results`/report-runs/."""
    panels: dict[str, str] = {}
    for chunk in sorted((results / "report-runs").glob("*.js")):
        call = chunk.read_text().splitlines()[1]
        head = re.match(r'llmttPanels\(\d+, "[0-9a-f]+", ', call)
        assert head and call.endswith(");"), call[:200]
        panels.update(json.loads(call[head.end() : -2]))
    return panels


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return Project(tmp_path / "proj")


class FakeProvider(BaseHTTPRequestHandler):
    """A paid provider stood in for at the wire: answers from a queue of (status, body).

    The last entry repeats once the queue is down to it; `hits` counts requests and `bodies`
    keeps what was asked.
    """

    queue: list[tuple[int, dict[str, Any]]] = []
    hits: list[int] = []
    bodies: list[dict[str, Any]] = []

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.hits.append(1)
        self.bodies.append(json.loads(raw or b"{}"))
        status, body = self.queue.pop(0) if len(self.queue) > 1 else self.queue[0]
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def chat_answer(text: str, tokens_in: int = 10, tokens_out: int = 5) -> dict[str, Any]:
    """An OpenAI chat completion whose message is `text`."""
    return {
        "id": "x",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        ],
        "usage": {
            "prompt_tokens": tokens_in,
            "completion_tokens": tokens_out,
            "total_tokens": tokens_in + tokens_out,
        },
    }


def chat_call(command: str, call_id: str = "call-1") -> dict[str, Any]:
    """An OpenAI chat completion that calls the bash tool with `command`."""
    answer = chat_answer("")
    call = {"name": "bash", "arguments": json.dumps({"command": command})}
    answer["choices"][0]["message"] = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": call_id, "type": "function", "function": call}],
    }
    answer["choices"][0]["finish_reason"] = "tool_calls"
    return answer


@contextlib.contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """`handler` served on 127.0.0.1 from a thread, for as long as the block lasts; yields
    the server's /v1 base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    ).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def provider() -> Iterator[tuple[str, type[FakeProvider]]]:
    handler = type("Provider", (FakeProvider,), {"queue": [], "hits": [], "bodies": []})
    with serving(handler) as url:
        yield url, handler


def letters(text: str) -> list[float]:
    """A toy embedding: how often each letter a-z occurs."""
    return [float(text.lower().count(chr(c))) for c in range(ord("a"), ord("z") + 1)]


class Embeddings(BaseHTTPRequestHandler):
    """An OpenAI-format embeddings endpoint: each input's letter counts."""

    asked: list[dict[str, Any]] = []

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        self.asked.append({"path": self.path, **body})
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        data = json.dumps(
            {
                "object": "list",
                "model": body["model"],
                "data": [
                    {"object": "embedding", "index": i, "embedding": letters(t)}
                    for i, t in enumerate(texts)
                ],
                "usage": {"prompt_tokens": 40, "total_tokens": 40},
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def embeddings() -> Iterator[tuple[str, type[Embeddings]]]:
    handler = type("Handler", (Embeddings,), {"asked": []})
    with serving(handler) as url:
        yield url, handler


# The test tiers. `system` marks a test that starts real things or waits for them: `doit`
# processes, the agent CLIs, Ray, Chromium, pip, other processes, time limits running out. The
# rest run in this process, all of them in well under a minute: `scripts/test --fast` runs only
# those. A test is `system` when its code uses one of SYSTEM_NAMES, or a fixture it uses or a
# function of its own module it calls does (read from their bytecode, so helpers count); or when
# its module or its name is listed below, for what the names cannot show. A test that is not
# `system` and runs `Project.doit` all the same fails, saying where to list it.
SYSTEM_NAMES = frozenset(
    {
        "doit",  # Project.doit, and the modules' own `doit(...)` helpers
        "DOIT",  # the `doit` executable, started directly
        "LLMTT",  # the `llmtt` executable
        "cli_project",  # a project that drives the pinned agent CLIs
        "chromium",
        "subprocess",  # any other process
        "executable",  # sys.executable: a Python process
        "sleep",  # a test that waits for something to happen
        "run_loop",  # test_litellm_agent's loop in this process: importing litellm takes seconds
    }
)
SYSTEM_MODULES = frozenset(
    {
        "test_ray.py",  # a Ray cluster of its own
        "test_faults.py",  # bench/faults.py: doit processes killed and started again
    }
)
# Tests (by function, every parametrisation) that wait for a time limit or a stalled stream, or
# grind, in this process: each takes half a second or more.
SYSTEM_TESTS = frozenset(
    {
        "test_fields_of_other_types_never_fail_the_run",  # agents/test_hostile_streams.py
        "test_timeout_kills_and_keeps_partial_output",  # process/test_pty.py
        "test_term_ignoring_child_is_killed_after_the_grace",
        "test_left_behind_descendants_do_not_survive",
        "test_stop_callback_ends_the_run_early",
        "test_a_json_path_gate_on_output_just_readable_never_fails_the_layer",  # .../test_deep_json.py
        "test_gate_timeout_fails_with_reason_and_runs_the_rest",  # evaluation/test_gates.py
        "test_without_a_json_verdict_the_exit_code_decides_with_a_note",  # .../test_scripts_protocol.py
        "test_records_to_many_dependency_files_in_one_process_keep_few_files_open",  # taskgraph/test_depfile.py
        "test_only_the_newest_plans_are_kept",  # plan/test_plancache.py
        "test_a_large_text_is_redacted_quickly",  # test_redaction.py
        "test_hang_before_the_answer_then_a_retry_is_answered",  # scripted/test_scripted.py
        "test_hang_mid_stream_after_the_first_event",
        "test_run_shell_captures_and_times_out",  # process/test_shell_and_workspace.py
        "test_run_shell_has_no_terminal_and_reports_a_signal_death",
        "test_the_cost_is_litellms_over_every_chat_model_of_its_table",  # providers/test_prices.py: ~10 s
        "test_paid_layers_print_with_capture_off_under_ray",  # evaluation/test_triage.py: probes the target
    }
)


def _names(code: types.CodeType) -> set[str]:
    """The global and attribute names `code` uses, its nested functions' and lambdas' too."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names(const)
    return names


def _reaches(func: object, seen: set[object]) -> set[str]:
    """The names `func` uses, and those of the functions of its own module that it calls."""
    code = getattr(func, "__code__", None)
    if not isinstance(code, types.CodeType) or func in seen:
        return set()
    seen.add(func)
    names = _names(code)
    where = getattr(func, "__module__", "")
    module = sys.modules.get(where)
    for name in list(names):
        helper = getattr(module, name, None)
        if isinstance(helper, types.FunctionType) and helper.__module__ == where:
            names |= _reaches(helper, seen)
    return names


def _is_system(item: pytest.Item) -> bool:
    if item.path.name in SYSTEM_MODULES or getattr(item, "originalname", None) in SYSTEM_TESTS:
        return True
    seen: set[object] = set()
    names = _reaches(getattr(item, "function", None), seen)
    info = getattr(item, "_fixtureinfo", None)
    for defs in info.name2fixturedefs.values() if info is not None else ():
        for fixture in defs:
            names |= _reaches(fixture.func, seen)
    return not names.isdisjoint(SYSTEM_NAMES)


# The slowest test files (over a minute each, measured), started first: scripts/test gives
# each of its processes a file at a time, and a long file begun last would leave the other
# process idle while it finishes.
SLOWEST_FIRST = (
    "test_litellm_agent.py",
    "test_ray.py",
    "test_example_suite.py",
    "test_provider_faults.py",
    "test_faults.py",
    "test_agent_contract.py",
    "test_setup_stock_python.py",
    "test_judge.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _is_system(item):
            item.add_marker(pytest.mark.system)
    rank = {name: index for index, name in enumerate(SLOWEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(
    item: pytest.Item, nextitem: pytest.Item | None
) -> Generator[None, object, object]:
    """An in-process test that runs `doit` all the same fails, naming the fix."""
    if item.get_closest_marker("system") is not None:
        return (yield)

    def refused(self: Project, *args: str, **kwargs: object) -> DoitResult:
        raise AssertionError(
            f"{item.nodeid} runs `doit` but is not marked `system`: add its name to "
            "SYSTEM_TESTS in tests/conftest.py"
        )

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Project, "doit", refused)
        return (yield)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Name the in-process tests that took over a second: they may belong in SYSTEM_TESTS."""
    slow = [
        report
        for report in terminalreporter.stats.get("passed", [])
        if report.when == "call" and report.duration > 1 and "system" not in report.keywords
    ]
    if slow:
        terminalreporter.write_sep("-", "in-process tests over 1 s (not marked `system`)")
        for report in slow:
            terminalreporter.write_line(f"{report.duration:5.1f} s {report.nodeid}")


def without_litellm(tmp_path: Path) -> dict[str, str]:
    """The variable (PYTHONPATH) that makes a Python, and the doit or llmtt it starts, one where
    litellm cannot be imported, as if it were not installed: a sitecustomize puts a finder
    first on sys.meta_path that refuses it."""
    shim = tmp_path / "no-litellm"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(
        "import sys\n\n\n"
        "class NoLitellm:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] == 'litellm':\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "        return None\n\n\n"
        "sys.meta_path.insert(0, NoLitellm())\n"
    )
    paths = [str(shim), os.environ.get("PYTHONPATH", "")]
    return {"PYTHONPATH": os.pathsep.join(p for p in paths if p)}
