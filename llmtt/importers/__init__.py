"""Importers: other tools' datasets and scenarios (bashkit-eval, llm-tool-test) as llmtt
scenarios.

May import: `llmtt.report` and every layer below it.
"""
