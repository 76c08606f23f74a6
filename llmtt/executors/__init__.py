"""Where a run's layers are carried out besides the local doit worker: a job shipped to another
process or node (`remote`) and a Ray cluster (`ray`, which imports Ray only when used).

May import: `llmtt.report` and every layer below it.
"""
