"""What a project's `dodo.py` imports: `from llmtt.tasks import *` gives doit llmtt's task
creators and `DOIT_CONFIG`. The task graph itself lives in `llmtt.taskgraph`."""

from llmtt.taskgraph.tasks import DOIT_CONFIG, task_llmtt

__all__ = ["DOIT_CONFIG", "task_llmtt"]
