"""The workers of `doit run -n N` are forked by llmtt's forker (llmtt/taskgraph/forker.py),
itself forked before the task graph is made: a worker holds the task it is sent, not the graph."""

from __future__ import annotations

from conftest import TOOL_TOML, Project

# A task of the dodo file's own that counts, in the worker carrying it out, doit's tasks that
# process holds (those frozen out of the garbage collector's sight included); and one that
# cannot be sent to a worker (a lambda cannot be pickled), carried out all the same.
COUNTING_DODO = """\
from pathlib import Path

from llmtt.tasks import *  # noqa: F403


def count_tasks(path):
    import gc

    from doit.task import Task

    gc.unfreeze()
    Path(path).write_text(str(sum(isinstance(o, Task) for o in gc.get_objects())))


def task_count():
    return {"actions": [(count_tasks, ["held.txt"])], "verbosity": 2}


def task_hello():
    return {"actions": [lambda: Path("hello.txt").touch()], "verbosity": 2}
"""


def test_a_worker_holds_the_task_it_carries_out_not_the_graph(project: Project) -> None:
    project.write("llmtt.toml", TOOL_TOML + "\n[matrix]\nrepeats = 20\n")
    project.write("scenarios/a.yaml", "task: {prompt: x}\nsolution: ['true']\n")
    project.write("dodo.py", COUNTING_DODO)
    done = project.doit("run", "-n", "2", "count", "hello")
    assert done.code == 0, done
    assert (project.root / "hello.txt").exists()
    # Forked from doit's main process once the graph was made, it held all 63 (each run's 3
    # layers, the aggregate, these two).
    assert (project.root / "held.txt").read_text() == "1"
