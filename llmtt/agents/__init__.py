"""Agents: what performs a scenario's task (oracle, real agent CLIs, llmtt's own loop)."""
