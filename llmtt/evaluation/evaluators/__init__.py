"""Pluggable evaluators (AgentDock's framework): the interface (`base`), the registry that finds
built-in and third-party ones alike (`registry`), and the built-ins."""
