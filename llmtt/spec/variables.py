"""Environment variables a project is written with: the seed's names for llmtt's own settings
(`LLM_TOOL_TEST_*`), and the `${...}` references a target's `env` values may hold.

**Seed names.** The seed spec (specs/llm-user-validation.md) reads `LLM_TOOL_TEST_ENABLED`,
`LLM_TOOL_TEST_BUDGET_USD`, `LLM_TOOL_TEST_TOOL` and `LLM_TOOL_TEST_JUDGE`; each stands for
llmtt's own variable (`SEED_NAMES`) when that is unset. Where both are set and differ, llmtt's
own is used and a warning says so. They are applied once, where a command begins (the `llmtt`
command, doit's loader), so everything after reads llmtt's own names only.

**References in `target.env`.** A value may name other values as `${NAME}`:

- `${LLMTT_WORKSPACE}` (or the seed's `${LLM_TOOL_TEST_FIXTURE_DIR}`, ax-eval's
  `${AX_EVAL_FIXTURE_DIR}`): the absolute path of the workspace of the process it is set for
  (the agent's and the setup's; a gate's or a script's copy of it);
- `${LLMTT_RUN_DIR}` (`${LLM_TOOL_TEST_RESULTS_DIR}`, `${AX_EVAL_RESULTS_DIR}`): the run's folder;
- any other `${NAME}` (or ax-eval's `${env:NAME}`): that variable of the environment llmtt runs
  in, as the seed's `MYTOOL_AUTH_TOKEN: "${MYTOOL_AUTH_TOKEN}"` has it. One that is not set is
  an error naming it when the run starts (and a warning of `llmtt validate`);
- `$${` is a literal `${`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, MutableMapping

from llmtt.errors import LlmttError

# llmtt's own variable -> the seed spec's name for it.
SEED_NAMES = {
    "LLMTT_ENABLED": "LLM_TOOL_TEST_ENABLED",
    "LLMTT_BUDGET_USD": "LLM_TOOL_TEST_BUDGET_USD",
    "LLMTT_AGENTS": "LLM_TOOL_TEST_TOOL",
    "LLMTT_JUDGE": "LLM_TOOL_TEST_JUDGE",
}


def apply_seed_names(environ: MutableMapping[str, str] = os.environ) -> list[str]:
    """Set each of llmtt's variables that is unset from its seed name; return a warning for
    each pair set to different values (llmtt's own is kept)."""
    warnings = []
    for own, seed in SEED_NAMES.items():
        alias = environ.get(seed)
        if alias is None:
            continue
        mine = environ.get(own)
        if mine is None:
            environ[own] = alias
        elif mine != alias:
            warnings.append(
                f"{seed}={alias!r} and {own}={mine!r} differ: llmtt's own {own} is used"
            )
    return warnings


WORKSPACE_NAMES = ("LLMTT_WORKSPACE", "LLM_TOOL_TEST_FIXTURE_DIR", "AX_EVAL_FIXTURE_DIR")
RUN_DIR_NAMES = ("LLMTT_RUN_DIR", "LLM_TOOL_TEST_RESULTS_DIR", "AX_EVAL_RESULTS_DIR")
_REFERENCE = re.compile(r"\$\$\{|\$\{([^}]*)\}|\$\{")
_NAME = re.compile(r"(?:env:)?([A-Za-z_][A-Za-z0-9_]*)")


def reference_problem(value: str) -> str | None:
    """What is wrong with the `${...}` references of an env value, or None."""
    for match in _REFERENCE.finditer(value):
        if match.group(0) == "$${":
            continue
        body = match.group(1)
        if body is None:
            at = match.start() + 1
            return f"`${{` at character {at} is not closed; write $${{ for a literal ${{"
        if not _NAME.fullmatch(body):
            return (
                f"`${{{body}}}` is not a variable reference (`${{NAME}}` or `${{env:NAME}}`); "
                "write $${ for a literal ${"
            )
    return None


def referenced(env: Mapping[str, str]) -> list[tuple[str, str]]:
    """(key, variable) for each environment variable the values of `env` name (the workspace
    and run folder placeholders left out)."""
    found = []
    for key, value in env.items():
        for match in _REFERENCE.finditer(value):
            name = _variable(match.group(1))
            if name is not None and name not in WORKSPACE_NAMES + RUN_DIR_NAMES:
                found.append((key, name))
    return found


def expand_env(
    env: Mapping[str, str],
    *,
    workspace: str,
    run_dir: str,
    environ: Mapping[str, str] = os.environ,
    strict: bool = True,
) -> dict[str, str]:
    """`env` with the references of its values replaced (see the module). `strict`: a variable
    that is not set is an LlmttError naming it; else the reference is kept as written."""
    places = dict.fromkeys(WORKSPACE_NAMES, workspace) | dict.fromkeys(RUN_DIR_NAMES, run_dir)
    known = {**environ, **places}
    out = {}
    for key, value in env.items():
        missing = [
            name
            for name in (_variable(m.group(1)) for m in _REFERENCE.finditer(value))
            if name is not None and name not in known
        ]
        if missing and strict:
            raise LlmttError(
                f"target.env {key}: {value!r} names the variable {missing[0]}, which is not "
                f"set; set {missing[0]} where llmtt runs, or write $${{ for a literal ${{"
            )
        out[key] = _REFERENCE.sub(lambda m: _replacement(m, known), value)
    return out


def _replacement(match: re.Match[str], known: Mapping[str, str]) -> str:
    """What one reference stands for (itself when its variable is not known)."""
    if match.group(0) == "$${":
        return "${"
    name = _variable(match.group(1))
    return known[name] if name is not None and name in known else match.group(0)


def _variable(body: str | None) -> str | None:
    """The variable a reference's body names, or None."""
    if body is None:
        return None
    match = _NAME.fullmatch(body)
    return match.group(1) if match else None
