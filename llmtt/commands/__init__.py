"""The `llmtt` commands, one module per family; `llmtt.cli` parses and dispatches."""
