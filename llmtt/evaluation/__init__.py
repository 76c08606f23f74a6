"""Evaluation of a finished run: interaction metrics (layer 1: `interaction`, `shell/`), gates
and scripts (layer 2: `gates`, `scripts`), evaluators (`evaluators/`), the judge (layer 3:
`judge`), the outcome and result record (`outcome`), all driven by `evaluate`, which hands its
records to the store its caller gives it.

May import: `llmtt.execution` and every layer below it.
"""
