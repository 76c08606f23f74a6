"""The only importer of doit: llmtt's task loader (`loader`, and `dodo` for an unchanged
dodo.py), one invocation's `session`, the task graph built from the plan (`tasks`), the
layers' `actions`, their `uptodate` checks and the workers' `warm` start, doit's dependency
file read in one query (`depfile`), the project lock (`lock`), signals (`signals`) and the
progress reporter (`progress`).

May import: every layer below `llmtt.commands`.
"""
