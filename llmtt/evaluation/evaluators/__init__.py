"""Pluggable evaluators (AgentDock's framework): the interface (`base`), the evaluators by type
through the one registry (`registry`), the runner (`runner`), and the built-ins."""
