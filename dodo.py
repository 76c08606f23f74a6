from llmtt.tasks import *  # noqa: F403 - doit finds the task creators and DOIT_CONFIG here
