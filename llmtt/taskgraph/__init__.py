"""The only importer of doit: the task graph built from the plan (`tasks`), doit's dependency
file read in one query (`depfile`), the project lock (`lock`), signals (`signals`) and the
progress reporter (`progress`).

May import: every layer below `llmtt.commands`.
"""
