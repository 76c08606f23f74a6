"""llmtt: can an LLM coding agent use your command-line tool, given your docs and a task?"""

__version__ = "0.1.0"
