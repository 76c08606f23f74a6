"""Rendering: evaluation.md of a run (`render`), the plan's reports (`aggregate`), junit.xml
(`junit`), SVG charts (`charts`) and the cache of rendered rows (`cache`).

May import: `llmtt.results` and every layer below it.
"""
