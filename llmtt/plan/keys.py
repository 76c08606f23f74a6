"""The judge prompt's version: part of the judge layer's key (kept apart so the task list can
import it without the judge's own imports)."""

JUDGE_VERSION = "judge-1"
