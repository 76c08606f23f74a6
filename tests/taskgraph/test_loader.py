"""doit reaches llmtt through a task loader (llmtt/taskgraph/loader.py, dodo.py): importing
`llmtt.tasks` does nothing by itself, and the project is held when doit asks for the tasks."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import BIN, DOIT, GIT_TOML, DoitResult, Project

# Imports a module in a fresh interpreter and reports what the import changed in the process;
# then waits (its module still imported, whatever it holds still held) for a line on stdin.
PROBE = r"""
import importlib, json, os, signal, sys, threading
from pathlib import Path

SIGNALS = [s for s in signal.valid_signals() if s not in (signal.SIGKILL, signal.SIGSTOP)]


def children():
    me, found = str(os.getpid()), []
    for name in os.listdir("/proc"):
        try:
            with open(f"/proc/{name}/stat") as handle:
                if handle.read().rsplit(")", 1)[1].split()[1] == me:
                    found.append(int(name))
        except (OSError, IndexError, ValueError):
            pass
    return found


def files():
    return {str(p.relative_to(Path.cwd())) for p in Path.cwd().rglob("*")}


environ, handlers, hook = dict(os.environ), {s: signal.getsignal(s) for s in SIGNALS}, sys.excepthook
threads, native, kids, made = set(threading.enumerate()), os.listdir("/proc/self/task"), children(), files()
importlib.import_module(sys.argv[1])
print(json.dumps({
    "environ": sorted(k for k in set(environ) | set(os.environ) if environ.get(k) != os.environ.get(k)),
    "signals": sorted(signal.Signals(s).name for s in SIGNALS if signal.getsignal(s) != handlers[s]),
    "excepthook": sys.excepthook is not hook,
    "threads": sorted(t.name for t in set(threading.enumerate()) - threads),
    "native_threads": len(os.listdir("/proc/self/task")) - len(native),
    "children": sorted(set(children()) - set(kids)),
    "files": sorted(files() - made - {"__pycache__"} - {p for p in files() if "__pycache__" in p}),
}), flush=True)
sys.stdin.readline()
"""

NOTHING = {
    "environ": [],
    "signals": [],
    "excepthook": False,
    "threads": [],
    "native_threads": 0,
    "children": [],
    "files": [],
}


def probe(root: Path, module: str, lock: Path | None) -> tuple[dict[str, Any], bool | None]:
    """What importing `module` in `root` changed, and whether this process could then take
    the project's lock (None: no lock file to take)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", PROBE, module],
        cwd=root,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        line = proc.stdout.readline()
        assert line, proc.communicate(timeout=30)[1]
        free = None
        if lock is not None:
            fd = os.open(lock, os.O_RDWR)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                free = True
            except BlockingIOError:
                free = False
            finally:
                os.close(fd)
        proc.stdin.write("\n")
        proc.stdin.flush()
        assert proc.wait(30) == 0, proc.stderr.read() if proc.stderr else ""
    finally:
        proc.kill()
        proc.wait(10)
    return json.loads(line), free


def llmtt_project(root: Path) -> Project:
    project = Project(root)
    project.write("llmtt.toml", GIT_TOML)
    project.write("scenarios/a.yaml", "task: {prompt: x}\nsolution: [git init -q]\n")
    return project


def test_importing_llmtt_tasks_in_a_folder_without_a_project_changes_nothing(
    tmp_path: Path,
) -> None:
    assert probe(tmp_path, "llmtt.tasks", None) == (NOTHING, None)


@pytest.mark.parametrize("module", ["llmtt.tasks", "dodo"])
def test_importing_llmtt_tasks_or_the_dodo_file_in_a_project_holds_and_changes_nothing(
    tmp_path: Path, module: str
) -> None:
    project = llmtt_project(tmp_path / "proj")
    assert project.doit("run").code == 0  # a project with results, its lock file left behind
    lock = project.results() / ".llmtt-lock"
    assert lock.exists()
    report, free = probe(project.root, module, lock)
    assert report == NOTHING
    assert free is True  # another process takes the lock while the module is imported


MISBEHAVING = """\
import os, signal, subprocess, sys, threading, time
from pathlib import Path
from llmtt.taskgraph import lock

os.environ["LLMTT_LABEL"] = "then"
signal.signal(signal.SIGTERM, lambda *args: None)
sys.excepthook = lambda *args: None
threading.Thread(target=time.sleep, args=(30,), name="watchdog", daemon=True).start()
subprocess.Popen(["sleep", "30"])
Path("made.txt").write_text("")
FD = lock.hold(Path("llm-tool-test-results"), "run")
"""


def test_the_probe_sees_what_a_module_that_acts_on_import_does(tmp_path: Path) -> None:
    """The probe above can fail: a module doing at import what llmtt.tasks once did is caught
    on every count, its lock included."""
    project = llmtt_project(tmp_path / "proj")
    project.write("misbehaving.py", MISBEHAVING)
    lock = project.results() / ".llmtt-lock"
    lock.parent.mkdir(parents=True)
    lock.write_text("")
    report, free = probe(project.root, "misbehaving", lock)
    for pid in report["children"]:
        os.kill(pid, signal.SIGKILL)
    assert len(report.pop("children")) == 1
    assert report == {
        "environ": ["LLMTT_LABEL"],
        "signals": ["SIGTERM"],
        "excepthook": True,
        "threads": ["watchdog"],
        "native_threads": 1,
        "files": ["made.txt"],
    }
    assert free is False


DODO_WITH_ITS_OWN_TASK = """\
from llmtt.tasks import *  # noqa: F403


def task_hello():
    return {"actions": ["echo hi > hello.txt"], "targets": ["hello.txt"]}
"""

# The three ways doit reaches llmtt's loader: an unchanged dodo.py under a plain `doit`,
# `llmtt doit`, and doit's own configuration naming the loader.
WAYS = {
    "dodo.py": ([DOIT], {}),
    "llmtt doit": ([str(BIN / "llmtt"), "doit"], {}),
    "pyproject.toml": (
        [DOIT],
        # The name alone: doit finds it through llmtt's `doit.LOADER` entry point.
        {"pyproject.toml": '[tool.doit]\nloader = "llmtt"\n'},
    ),
}


@pytest.mark.parametrize("way", list(WAYS))
def test_doit_reaches_the_loader_every_way_with_the_options_it_parsed(
    tmp_path: Path, way: str
) -> None:
    command, files = WAYS[way]
    project = llmtt_project(tmp_path / "proj")
    project.write("scenarios/b.yaml", "task: {prompt: y}\nsolution: [git init -q]\n")
    project.write("dodo.py", DODO_WITH_ITS_OWN_TASK)
    for name, text in files.items():
        project.write(name, text)

    def doit(*args: str) -> DoitResult:
        env = {k: v for k, v in os.environ.items() if not k.startswith("LLMTT_")}
        proc = subprocess.run(
            [*command, *args],
            cwd=project.root,
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
        )
        return DoitResult(proc.returncode, proc.stdout, proc.stderr)

    listed = doit("list", "--status")
    assert listed.code == 0, listed
    assert listed.out.split() == ["R", "a/oracle/r1", "a:", "oracle,", "repeat", "1"] + [
        "R", "aggregate", *"report.md and report.json over every selected run".split(),
        "R", "b/oracle/r1", "b:", "oracle,", "repeat", "1",
        "R", "hello",
    ]  # fmt: skip
    ran = doit("run", "-v", "0", "-n", "2")  # doit's parse: quiet, two forked workers
    assert ran.code == 0, ran
    assert {".  a/oracle/r1:agent", ".  b/oracle/r1:agent", ".  aggregate"} <= set(
        ran.out.splitlines()
    ), ran
    assert "llmtt:" not in ran.out, ran.out
    assert (project.results() / "report.md").exists()
    assert not (project.root / "hello.txt").exists()  # not one of llmtt's default tasks
    assert doit("run", "hello").code == 0 and (project.root / "hello.txt").exists()
    again = doit("run")
    assert again.code == 0 and "llmtt: 2 runs up to date; nothing to do" in again.out, again
    assert doit("info", "a/oracle/r2").err.strip() == (
        "llmtt: doit info a/oracle/r2: not a task of this project's runs; did you mean "
        "'a/oracle/r1'? (`doit list --all` shows them)"
    )


def test_a_dodo_file_that_replaces_doit_config_is_one_line_naming_it_and_the_fix(
    tmp_path: Path,
) -> None:
    """A dodo file that assigns a DOIT_CONFIG of its own hides llmtt's configuration from a
    plain `doit`: the runs would be carried out without it and without the project's lock."""
    project = llmtt_project(tmp_path / "proj")
    project.write(
        "dodo.py", 'from llmtt.tasks import *  # noqa: F403\nDOIT_CONFIG = {"verbosity": 2}\n'
    )
    done = project.doit("run")
    assert done.code == 2, done
    (line,) = done.err.splitlines()
    assert line.startswith("llmtt: dodo.py: doit asked for llmtt's tasks without reading llmtt's")
    assert 'DOIT_CONFIG["name"] = value' in line and "llmtt doit" in line
    assert not (project.results() / "a").exists()
    # llmtt's own loader reads the dodo file's dict as what it sets over llmtt's configuration.
    proc = subprocess.run(
        [str(BIN / "llmtt"), "doit", "run"],
        cwd=project.root,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (project.results() / "a/oracle/r1/evaluation.md").exists()


def test_a_parallel_run_forks_its_workers_whatever_the_default_start_method(
    tmp_path: Path,
) -> None:
    """Python 3.14 starts multiprocessing's workers with forkserver: doit's would then start
    without what their parent holds for the invocation (here: fail to pickle the reporter).
    The loader has them forked."""
    project = llmtt_project(tmp_path / "proj")
    project.write("scenarios/b.yaml", "task: {prompt: y}\nsolution: [git init -q]\n")
    project.write(
        "dodo.py",
        "import multiprocessing\n"
        'multiprocessing.set_start_method("forkserver")\n'
        "from llmtt.tasks import *  # noqa: F403, E402\n",
    )
    done = project.doit("run", "-n", "2")
    assert done.code == 0, done
    assert "Traceback" not in done.err, done.err
    assert sorted(json.loads(line)["run_id"] for line in _results(project)) == [
        "a/oracle/r1",
        "b/oracle/r1",
    ]


def _results(project: Project) -> list[str]:
    return (project.results() / "results.jsonl").read_text().splitlines()
