"""Evaluators by type id, through the one registry (`llmtt.registry`): the entry-point group
`llmtt.evaluators` (the built-ins register there too) and `[evaluators]` in llmtt.toml
(`type = "module:Class"`), which wins."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import cast

from llmtt import registry
from llmtt.evaluation.evaluators.base import Evaluator


def installed() -> dict[str, str]:
    """Type id -> `module:Class` of every evaluator installed through entry points."""
    return registry.installed("evaluator")


def evaluator_class(
    type_id: str, own: Mapping[str, str], project_root: Path | None = None
) -> type[Evaluator]:
    """The class of evaluator `type_id`: the project's own (`own`, from llmtt.toml; a module in
    the project folder can be imported) before an installed one. LlmttError says what is
    wrong: an unknown type (with the known ones), a target that cannot be imported, or a
    class that is not an Evaluator."""
    return cast(type[Evaluator], registry.load("evaluator", type_id, own, project_root))
