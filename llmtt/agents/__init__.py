"""Agents: what performs a scenario's task (the oracle, the real agent CLIs, llmtt's own litellm
loop, `command` agents), one module each over one base (`base`); what the CLIs share (`cli_agent`,
`stream`, `pricing`); their pinned installs (`install`); agents by name (`registry`).

May import: `llmtt.providers`, `llmtt.process`, `llmtt.spec` and the leaves.
"""
