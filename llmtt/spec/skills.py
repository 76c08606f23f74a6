"""Skills: a folder holding a SKILL.md, as the Agent Skills format defines it (agentskills.io),
which claude-code, codex and opencode discover in a folder of their own and load when its
description matches the task.

SKILL.md opens with YAML front matter between two `---` lines: `name` (1-64 characters of
lowercase letters, digits and single hyphens, not at either end, equal to the folder's name)
and `description` (1-1024 characters, what the skill does and when to use it); `compatibility`
at most 500 characters. The body after it is what an agent reads when it uses the skill.
Anything else is the agents' own business and is left alone.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from llmtt.errors import Problem

SKILL_FILE = "SKILL.md"
NAME_RE = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
MAX_NAME = 64
MAX_DESCRIPTION = 1024
MAX_COMPATIBILITY = 500
MAX_SKILL_BYTES = 1_000_000  # a SKILL.md past this is no set of instructions an agent reads
MAX_FILES = 1000  # files in one skill folder (scripts, references, assets)


@dataclass(frozen=True)
class Skill:
    """One skill folder, read and checked."""

    name: str
    description: str
    folder: Path
    body: str  # SKILL.md after its front matter


def read_skill(folder: Path, field: str | None = None) -> tuple[Skill | None, list[Problem]]:
    """The skill in `folder`, or None with what is wrong, each problem naming SKILL.md (or the
    folder) and its line; `field` is where the folder was named (e.g. `variants.x.skills`)."""
    path = folder / SKILL_FILE
    if not folder.is_dir():
        why = "does not exist" if not folder.exists() else "is not a folder"
        return None, [Problem(None, None, field, f"skill folder {folder} {why}")]
    try:
        size = path.stat().st_size
        if size > MAX_SKILL_BYTES:
            return None, [
                Problem(path, None, None, f"is {size:,} bytes; at most {MAX_SKILL_BYTES:,}")
            ]
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None, [Problem(None, None, field, f"skill folder {folder} holds no {SKILL_FILE}")]
    except (OSError, UnicodeDecodeError) as exc:
        return None, [Problem(path, None, None, f"cannot be read: {exc}")]
    problems = _folder_problems(folder, path)
    meta, body, problems_of_text = _front_matter(path, text)
    problems += problems_of_text
    if meta is None:
        return None, problems
    name, description = meta.get("name"), meta.get("description")
    line = _line_of_key(text, "name")
    if not isinstance(name, str) or not name:
        problems.append(Problem(path, line, "name", "missing: the skill's name is required"))
    else:
        if len(name) > MAX_NAME or not NAME_RE.match(name):
            problems.append(
                Problem(
                    path,
                    line,
                    "name",
                    f"{name!r} must be 1-{MAX_NAME} lowercase letters, digits and single "
                    "hyphens, not at either end",
                )
            )
        if name != folder.name:
            problems.append(
                Problem(
                    path,
                    line,
                    "name",
                    f"{name!r} must equal its folder's name {folder.name!r} (the agents "
                    "find a skill by its folder)",
                )
            )
    line = _line_of_key(text, "description")
    if not isinstance(description, str) or not description.strip():
        problems.append(
            Problem(
                path,
                line,
                "description",
                "missing: say what the skill does and when to use it (agents load a skill by it)",
            )
        )
    elif len(description) > MAX_DESCRIPTION:
        problems.append(
            Problem(
                path,
                line,
                "description",
                f"is {len(description)} characters; at most {MAX_DESCRIPTION}",
            )
        )
    compatibility = meta.get("compatibility")
    if compatibility is not None and (
        not isinstance(compatibility, str) or len(compatibility) > MAX_COMPATIBILITY
    ):
        problems.append(
            Problem(
                path,
                _line_of_key(text, "compatibility"),
                "compatibility",
                f"must be text of at most {MAX_COMPATIBILITY} characters",
            )
        )
    if problems:
        return None, problems
    assert isinstance(name, str) and isinstance(description, str)
    return Skill(name, description, folder, body), []


def skill_files(folder: Path) -> list[Path]:
    """Every file of a skill folder, sorted (what is copied and keyed); links are not followed."""
    found = []
    for top, dirs, files in os.walk(folder):
        dirs.sort()
        found += [Path(top, f) for f in sorted(files)]
    return found


def _folder_problems(folder: Path, path: Path) -> list[Problem]:
    """What in the folder cannot be laid into a workspace: too many files, or a link."""
    problems = []
    count = 0
    for top, dirs, files in os.walk(folder):
        for entry in (*dirs, *files):
            count += 1
            if os.path.islink(os.path.join(top, entry)):
                problems.append(
                    Problem(
                        Path(top, entry),
                        None,
                        None,
                        "is a link; a skill folder is copied into the workspace as files",
                    )
                )
    if count > MAX_FILES:
        problems.append(
            Problem(
                None,
                None,
                None,
                f"skill folder {folder} holds {count} entries; at most {MAX_FILES}",
            )
        )
    return problems


def _front_matter(path: Path, text: str) -> tuple[dict[str, Any] | None, str, list[Problem]]:
    """SKILL.md's front matter as a mapping, and its body."""
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        return (
            None,
            text,
            [
                Problem(
                    path,
                    1,
                    None,
                    "must open with YAML front matter: a line `---`, `name:` and `description:`, "
                    "then `---`",
                )
            ],
        )
    end = next((i for i in range(1, len(lines)) if lines[i].strip() == "---"), None)
    if end is None:
        return None, text, [Problem(path, 1, None, "front matter opened by `---` is never closed")]
    try:
        meta = yaml.safe_load("".join(lines[1:end]))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        line = mark.line + 2 if mark is not None else None
        return None, text, [Problem(path, line, None, f"invalid YAML front matter: {exc.problem}")]
    except yaml.YAMLError as exc:
        return None, text, [Problem(path, None, None, f"invalid YAML front matter: {exc}")]
    if not isinstance(meta, dict):
        return (
            None,
            text,
            [
                Problem(
                    path, 2, None, "front matter must be a mapping with `name` and `description`"
                )
            ],
        )
    return meta, "".join(lines[end + 1 :]), []


def _line_of_key(text: str, key: str) -> int | None:
    """The 1-based line of a top-level `key:` of the front matter."""
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith(f"{key}:"):
            return number
        if number > 1 and line.strip() == "---":
            break
    return None
