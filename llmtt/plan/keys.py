"""The judge prompt's version: part of the judge layer's key (kept apart so the task list can
import it without the judge's own imports); likewise the triage layer's."""

JUDGE_VERSION = "judge-1"

# A failed run's paid triage (the triage layer), in its folder, and its prompt's version.
TRIAGE_FILE = "triage.json"
TRIAGE_VERSION = "triage-1"

# Every attempt at a run's agent, in its folder: what each paid, and how it ended.
ATTEMPTS = "attempts.jsonl"
