"""Carrying out a run's agent layer: its workspace (a fresh copy of the fixture, its own HOME,
setup commands: `workspace`), the agent launched in it with its model (`agent_layer`), and the
money it may spend (`budget`).

May import: `llmtt.plan`, `llmtt.agents`, `llmtt.scripted`, `llmtt.providers`, `llmtt.process`,
`llmtt.spec` and the leaves.
"""
