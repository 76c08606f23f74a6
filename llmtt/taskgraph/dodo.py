"""What a project's unchanged `dodo.py` (`from llmtt.tasks import *`) gives doit, and how a plain
`doit` reaches llmtt's loader through it. Importing it reads no file and changes nothing.

doit picks its task loader before it reads a dodo file (from its configuration, or from the
program that runs `DoitMain`), and it hands a dodo module nothing of its command line. So a
plain `doit` imports dodo.py with its own DodoTaskLoader, and the two names the star import
brings do their work only when doit uses them:

- `DOIT_CONFIG` holds what the dodo file sets in it itself (usually nothing). Right after the
  import, doit's command merges it into the options it parsed (`DoitCmdBase.execute(params,
  args)`, in doit 0.37). At that read, the command's loader is replaced with an `LlmttLoader`
  over the same module and options, which answers with llmtt's configuration; doit then asks
  that loader for the tasks, naming the command (`load_tasks(cmd, pos_args)`).
- `task_llmtt`, called by a script, makes the tasks of the project in the working folder and
  holds nothing. Called once doit has read a command line in this process, it is doit's own
  loader that asks (llmtt's calls no dodo file's `task_llmtt`): the dodo file replaced
  DOIT_CONFIG, or doit did not read it. It stops with what to do, since doit would carry out
  the runs without llmtt's configuration and lock.

The command is found among the callers' frames, the one place llmtt looks past doit's API; a
doit that no longer merges a dodo file's configuration in `DoitCmdBase.execute` leaves
DOIT_CONFIG unadopted, and every llmtt command stops with the second message.
"""

from __future__ import annotations

import sys
from collections.abc import ItemsView, Iterator, Mapping
from pathlib import Path
from types import FrameType
from typing import Any

__all__ = ["DOIT_CONFIG", "DodoConfig", "task_llmtt"]


class DodoConfig(dict[str, Any]):
    """A dodo file's DOIT_CONFIG: what the file sets in it, and, when a doit command reads it,
    llmtt's configuration beneath (see the module)."""

    def items(self) -> ItemsView[str, Any]:  # type: ignore[override]
        """Read by doit's command: hand the command to llmtt's loader, which answers."""
        asking = doit_command()
        if asking is not None:
            command, options = asking
            from llmtt.taskgraph.loader import LlmttLoader

            loader = getattr(command, "loader", None)
            if not isinstance(loader, LlmttLoader) and isinstance(
                getattr(loader, "namespace", None), dict
            ):
                command.loader = LlmttLoader.adopt(loader, options)
                return command.loader.load_doit_config().items()  # type: ignore[no-any-return]
        return super().items()


DOIT_CONFIG = DodoConfig()


def task_llmtt() -> Iterator[Any]:
    """Every run's layers and the aggregate (llmtt's loader makes them; see the module)."""
    doit_cmd = sys.modules.get("doit.doit_cmd")
    if doit_cmd is not None and doit_cmd._CMDLINE_VARS is not None:
        # doit is carrying out a command line, and a loader other than llmtt's asks.
        from llmtt.errors import LlmttError
        from llmtt.taskgraph.loader import fail

        fail(LlmttError(_unread(doit_command())))
    from llmtt.taskgraph.session import Session
    from llmtt.taskgraph.tasks import make_tasks

    yield from make_tasks(Session.load(Path.cwd().resolve(), {}))


def doit_command() -> tuple[Any, Mapping[str, Any]] | None:
    """The doit command loading tasks in this call and the options it parsed: the arguments
    of the `DoitCmdBase.execute(self, params, args)` among the callers (None: there is none)."""
    if "doit.cmd_base" not in sys.modules:
        return None  # no doit command in this process: no need to import doit to know it
    from doit.cmd_base import DoitCmdBase

    code = DoitCmdBase.execute.__code__
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        if frame.f_code is code:
            return frame.f_locals["self"], frame.f_locals["params"]
        frame = frame.f_back
    return None


def _unread(asking: tuple[Any, Mapping[str, Any]] | None) -> str:
    if asking is None:  # doit's tabcompletion --hardcode-tasks loads without a configuration
        return (
            "dodo.py: this doit command loads llmtt's tasks without llmtt's configuration: "
            "run it as `llmtt doit ...`, which loads them with llmtt's loader"
        )
    dodo = asking[1].get("dodoFile") or "dodo.py"
    return (
        f"{dodo}: doit asked for llmtt's tasks without reading llmtt's DOIT_CONFIG, so it "
        "would carry out the runs without llmtt's configuration or the project's lock: import "
        "both (`from llmtt.tasks import *`) and change DOIT_CONFIG in place "
        '(DOIT_CONFIG["name"] = value) rather than assigning a new dict, or have doit load '
        'with llmtt\'s loader (`loader = "llmtt"` under [tool.doit] in pyproject.toml, or '
        "run `llmtt doit`)"
    )
