"""llmtt as installed: its modules compiled to bytecode once, as pip does for a package it
installs. This machine sets PYTHONDONTWRITEBYTECODE, so an editable install's modules would
otherwise be compiled from source again by every process a benchmark starts (~0.1 s each of a
`doit run` and of its warm-up): a cost no installed copy pays."""

from __future__ import annotations

import compileall
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def compile_llmtt() -> None:
    """Write the bytecode of every llmtt module whose source is newer than it."""
    if not compileall.compile_dir(str(ROOT / "llmtt"), quiet=1):
        raise SystemExit("llmtt's modules could not be compiled; see the errors above")
