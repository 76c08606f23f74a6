"""The `llmtt` commands, one module per family; `llmtt.commands.main` parses and dispatches.

May import: every layer.
"""
