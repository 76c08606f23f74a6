"""Plugins by name: the one registry of agents and evaluators.

Each kind is an entry-point group (`llmtt.agents`, `llmtt.evaluators`); llmtt's built-ins
register there in its own pyproject.toml, through the same path as a third party's package. A
project may also name an evaluator in llmtt.toml (`[evaluators] x = "module:Class"`), which wins.

This module is a leaf: it imports no family's base class. A family's base says which kind it is
(`plugin_kind`), and a class is accepted as a plugin of a kind only when it says the same, so
`llmtt.spec` can check a name without importing the agents or evaluators above it.
"""

from __future__ import annotations

import difflib
import importlib
import sys
from collections.abc import Mapping
from functools import cache
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Literal, Protocol, cast

from pydantic import BaseModel

from llmtt.errors import LlmttError

Kind = Literal["agent", "evaluator"]

GROUPS: dict[Kind, str] = {"agent": "llmtt.agents", "evaluator": "llmtt.evaluators"}

# How each kind's base class is named in an error (the class a plugin must subclass).
BASES: dict[Kind, str] = {
    "agent": "llmtt Agent class",
    "evaluator": "subclass of llmtt.evaluation.evaluators.base.Evaluator",
}


@cache
def installed(kind: Kind) -> dict[str, str]:
    """Name -> `module:attr` of every plugin of `kind` installed through entry points (they do
    not change within a process)."""
    return {ep.name: ep.value for ep in entry_points(group=GROUPS[kind])}


def names(kind: Kind) -> list[str]:
    """The names of every installed plugin of `kind`, sorted."""
    return sorted(installed(kind))


def did_you_mean(name: str, known: list[str]) -> str:
    """ "; did you mean 'x'?" for the closest known name, or nothing."""
    close = difflib.get_close_matches(name, known, n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def unknown(kind: Kind, name: str, own: Mapping[str, str] | None = None) -> str:
    """What to say of a name that is neither installed nor the project's own."""
    if kind == "agent":
        known = names("agent")
        return (
            f"unknown agent {name!r}{did_you_mean(name, known)} (installed agents: "
            f"{', '.join(known)}; any other agent CLI needs an [agents.{name}] table with "
            "command = [...])"
        )
    known = sorted({*installed(kind), *(own or {})})
    return (
        f"unknown evaluator type {name!r}{did_you_mean(name, known)} (known: "
        f"{', '.join(known) or 'none'}; a third-party one needs [evaluators] {name} = "
        f'"module:Class" in llmtt.toml or an entry point in the group {GROUPS[kind]!r})'
    )


class EvaluatorShape(Protocol):
    """What `spec` and `plan` read of an evaluator class without importing its base: the config
    model it takes and whether it calls a model (`llmtt.evaluation.evaluators.base.Evaluator`
    declares both)."""

    Config: type[BaseModel]
    calls_model: bool


def evaluator(
    name: str, own: Mapping[str, str] | None = None, root: Path | None = None
) -> EvaluatorShape:
    """The evaluator class registered as `name` (see `load`), as `spec` and `plan` see it."""
    return cast(EvaluatorShape, load("evaluator", name, own, root))


def load(
    kind: Kind, name: str, own: Mapping[str, str] | None = None, root: Path | None = None
) -> type[Any]:
    """The class registered as `name` for `kind`: the project's own (`own`, from llmtt.toml;
    a module in the project folder `root` can be imported) before an installed one.
    LlmttError says what is wrong: an unknown name (with the known ones), a target that cannot
    be imported, or a class that is not a plugin of this kind."""
    target = (own or {}).get(name) or installed(kind).get(name)
    if target is None:
        raise LlmttError(unknown(kind, name, own))
    return _load(kind, name, target, root)


def _load(kind: Kind, name: str, target: str, root: Path | None) -> type[Any]:
    label = f"agent {name!r}" if kind == "agent" else f"evaluator {name!r}"
    module_name, _, attr = target.partition(":")
    if not module_name or not attr:
        raise LlmttError(f"{label}: {target!r} is not of the form module:Class")
    if root is not None and str(root) not in sys.path:
        sys.path.append(str(root))  # after installed packages: it cannot shadow them
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - any import failure is the user's to see
        raise LlmttError(
            f"{label}: cannot import {module_name!r}: {type(exc).__name__}: {exc}"
        ) from None
    cls = getattr(module, attr, None)
    if not (isinstance(cls, type) and getattr(cls, "plugin_kind", None) == kind):
        if kind == "agent":
            raise LlmttError(f"entry point {name} = {target} is not an {BASES[kind]}")
        raise LlmttError(f"{label}: {target} is not a {BASES[kind]}")
    return cls
