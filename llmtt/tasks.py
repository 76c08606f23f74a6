"""What a project's `dodo.py` imports: `from llmtt.tasks import *` gives doit llmtt's task
creator and `DOIT_CONFIG`, and does nothing else (llmtt.taskgraph.dodo says how doit goes on
from there). The task graph itself lives in `llmtt.taskgraph`."""

from llmtt.taskgraph.dodo import DOIT_CONFIG, task_llmtt

__all__ = ["DOIT_CONFIG", "task_llmtt"]
