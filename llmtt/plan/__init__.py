"""The plan: which runs a selection makes (scenario x agent x model x variant x repeat), the keys
each layer is cached by (`runs`, `keys`), the versions of targets and agents and the project's own
evaluator code that go into them (`versions`, `sources`), and the plan cache that lets doit's task
list skip loading the project (`cache`).

May import: `llmtt.agents` (an agent's version and whether it needs a model are part of its
runs' keys), `llmtt.scripted`, `llmtt.providers`, `llmtt.process`, `llmtt.spec` and the leaves.
"""
