"""Evaluators by type id: the entry-point group `llmtt.evaluators` (the built-ins register
there too) and `[evaluators]` in llmtt.toml (`type = "module:Class"`), which wins."""

from __future__ import annotations

import difflib
import importlib
import sys
from collections.abc import Mapping
from importlib.metadata import entry_points
from pathlib import Path

from llmtt.errors import LlmttError
from llmtt.evaluation.evaluators.base import Evaluator

GROUP = "llmtt.evaluators"


def installed() -> dict[str, str]:
    """Type id -> `module:Class` of every evaluator installed through entry points."""
    return {ep.name: ep.value for ep in entry_points(group=GROUP)}


def evaluator_class(
    type_id: str, own: Mapping[str, str], project_root: Path | None = None
) -> type[Evaluator]:
    """The class of evaluator `type_id`: the project's own (`own`, from llmtt.toml; a module in
    the project folder can be imported) before an installed one. LlmttError says what is
    wrong: an unknown type (with the known ones), a target that cannot be imported, or a
    class that is not an Evaluator."""
    target = own.get(type_id) or installed().get(type_id)
    if target is None:
        known = sorted({*installed(), *own})
        close = difflib.get_close_matches(type_id, known, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise LlmttError(
            f"unknown evaluator type {type_id!r}{hint} (known: {', '.join(known) or 'none'}; "
            f'a third-party one needs [evaluators] {type_id} = "module:Class" in llmtt.toml '
            f"or an entry point in the group {GROUP!r})"
        )
    return _load(type_id, target, project_root)


def _load(type_id: str, target: str, project_root: Path | None) -> type[Evaluator]:
    module_name, _, attr = target.partition(":")
    if not module_name or not attr:
        raise LlmttError(f"evaluator {type_id!r}: {target!r} is not of the form module:Class")
    if project_root is not None and str(project_root) not in sys.path:
        sys.path.append(str(project_root))  # after installed packages: it cannot shadow them
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - any import failure is the user's to see
        raise LlmttError(
            f"evaluator {type_id!r}: cannot import {module_name!r}: {type(exc).__name__}: {exc}"
        ) from None
    cls = getattr(module, attr, None)
    if not (isinstance(cls, type) and issubclass(cls, Evaluator)):
        raise LlmttError(
            f"evaluator {type_id!r}: {target} is not a subclass of "
            "llmtt.evaluation.evaluators.base.Evaluator"
        )
    return cls
