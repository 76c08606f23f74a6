"""What runs came to, kept and compared: the results store (results.jsonl, results.db:
`store`), statistics (`stats`), the summary of a plan (`summary`), the committed baseline
(`baseline`), A/B comparisons (`compare`) and trends over invocations (`trends`).

May import: `llmtt.evaluation` and every layer below it.
"""
