"""doit reaches llmtt through a task loader (llmtt/taskgraph/loader.py, dodo.py): importing
`llmtt.tasks` does nothing by itself, and the project is held when doit asks for the tasks."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from conftest import BIN, DOIT, GIT_TOML, DoitResult, Project


def llmtt_project(root: Path) -> Project:
    project = Project(root)
    project.write("llmtt.toml", GIT_TOML)
    project.write("scenarios/a.yaml", "task: {prompt: x}\nsolution: [git init -q]\n")
    return project


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
        {
            "pyproject.toml": '[tool.doit]\nloader = "llmtt"\n\n[tool.doit.plugins.loader]\n'
            'llmtt = "llmtt.taskgraph.loader:LlmttLoader"\n'
        },
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
