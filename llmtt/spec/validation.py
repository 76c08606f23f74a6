"""Validating loaded YAML and TOML with pydantic, with errors that name file, line and field:
the branch of a union a value was meant for, what was expected, the nearest valid key for an
unknown one."""

from __future__ import annotations

import difflib
import re
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, TypeVar, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from llmtt.errors import ConfigError, Problem
from llmtt.spec.loading import Loc, dotted, line_of

M = TypeVar("M", bound=BaseModel)

# The tags of tagged unions (gate types): a location part that names one is not a field.
_UNION_TAGS: set[str] = set()
_UNION_TAG_ORDER: list[str] = []


def validate(model: type[M], data: Any, path: Path, lines: dict[Loc, int]) -> M:
    """Validate `data` as `model`, turning pydantic's errors into located problems."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(problems_from(exc, model, path, lines, data)) from None


def problems_from(
    exc: ValidationError,
    model: type[BaseModel],
    path: Path,
    lines: dict[Loc, int],
    data: Any = None,
) -> list[Problem]:
    """One problem per pydantic error, with line, dotted field and a readable expectation."""
    problems = []
    seen: set[tuple[Loc, str]] = set()
    for err in _one_branch(exc.errors(include_url=False), data):
        loc = _clean_loc(err["loc"])
        kind = err["type"]
        if kind in ("union_tag_invalid", "union_tag_not_found"):
            loc = (*loc, "type")
        field_name = dotted(loc) or None
        if kind == "extra_forbidden":
            message = _unknown_key_message(model, tuple(err["loc"]))
            line = line_of(lines, loc, key=True)
        else:
            message = _expectation(err)
            line = line_of(lines, loc, key=True)
        if loc[:2] == ("evaluation", "gates") and len(loc) > 2 and isinstance(loc[2], int):
            # The path's index counts from 0; every report numbers gates from 1.
            message += f" (gate {loc[2] + 1})"
        if (loc, message) not in seen:
            seen.add((loc, message))
            problems.append(Problem(path, line, field_name, message))
    return problems


_BRANCH = re.compile(r"^(?:[A-Z][A-Za-z0-9_]*|str|int|float|bool|none|(?:list|dict|tuple)\[.*\])$")


def _branch_at(loc: tuple[int | str, ...], data: Any) -> int | None:
    for i, part in enumerate(loc):
        if isinstance(part, str) and _BRANCH.match(part):
            parent = _value_at(data, loc[:i])
            if not (isinstance(parent, dict) and part in parent):  # a real key (e.g. env NAME)
                return i
    return None


def _one_branch(errors: list[Any], data: Any) -> list[Any]:
    """For a plain union (`TargetSpec | str`), pydantic reports every member's complaint
    under the member's name. Keep the member the input was meant for (a mapping for a model,
    a list for a list, ...) and drop the name from the path; with no such member, one error."""
    out: list[Any] = []
    for err in errors:
        loc = tuple(err["loc"])
        i = _branch_at(loc, data)
        if i is None:
            out.append(err)
            continue
        label = str(loc[i])
        value = _value_at(data, loc[:i])
        if _matches(label, value):
            out.append({**err, "loc": loc[:i] + loc[i + 1 :]})
        elif not any(
            _matches(str(e["loc"][j]), value)
            for e in errors
            if (j := _branch_at(tuple(e["loc"]), data)) is not None
            and tuple(e["loc"])[:j] == loc[:i]
        ):
            labels = sorted(
                {
                    str(e["loc"][j])
                    for e in errors
                    if (j := _branch_at(tuple(e["loc"]), data)) is not None
                    and tuple(e["loc"])[:j] == loc[:i]
                }
            )
            out.append(
                {
                    "type": "union",
                    "loc": loc[:i],
                    "msg": f"expected one of: {', '.join(labels)}",
                    "input": value,
                }
            )
    return out


def _matches(label: str, value: Any) -> bool:
    if label[:1].isupper():
        return isinstance(value, dict)
    kinds = {
        "str": str,
        "int": int,
        "float": float,
        "bool": bool,
        "list": list,
        "dict": dict,
        "tuple": list,
    }
    kind = kinds.get(label.split("[")[0])
    return (
        kind is not None
        and isinstance(value, kind)
        and not (kind is int and isinstance(value, bool))
    )


def _value_at(data: Any, loc: tuple[int | str, ...]) -> Any:
    for part in loc:
        if isinstance(data, dict) and part in data:
            data = data[part]
        elif isinstance(data, list) and isinstance(part, int) and part < len(data):
            data = data[part]
        else:
            return None
    return data


def _clean_loc(loc: tuple[int | str, ...]) -> Loc:
    # Tagged unions add the tag value to the path right after the item's index
    # (gates.0.file_exists.path); drop it there only: a field may share a tag's name
    # (gates.0.check.check is the `check` field of a `check` gate).
    cleaned: list[int | str] = []
    for index, part in enumerate(loc):
        if isinstance(part, str) and part.startswith("function-"):
            continue
        tagged = index > 0 and isinstance(loc[index - 1], int) and part in _UNION_TAGS
        if isinstance(part, str) and tagged:
            continue
        cleaned.append(part)
    return tuple(cleaned)


def register_union_tags(tags: Sequence[str]) -> None:
    """Declare tag values of discriminated unions so they are left out of field paths."""
    _UNION_TAGS.update(tags)
    _UNION_TAG_ORDER.extend(t for t in tags if t not in _UNION_TAG_ORDER)


def _expectation(err: Any) -> str:
    kind = err["type"]
    if kind == "missing":
        return "required field is missing"
    message = str(err["msg"])
    if kind == "value_error":
        message = message.removeprefix("Value error, ")
    if kind == "union_tag_not_found":
        return f"required field is missing (valid types: {', '.join(_UNION_TAG_ORDER)})"
    if kind == "union_tag_invalid":
        tag = str(err.get("ctx", {}).get("tag", ""))
        expected = [
            t.strip(" '") for t in str(err.get("ctx", {}).get("expected_tags", "")).split(",")
        ]
        close = difflib.get_close_matches(tag, expected, n=1, cutoff=0.5)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        return f"unknown type {tag!r}{hint} (valid types: {', '.join(expected)})"
    given = err.get("input")
    if _short(given) and not isinstance(given, dict | list) and repr(given) not in message:
        return f"{message} (got {given!r})"
    return message


def _short(value: Any) -> bool:
    return value is not None and len(repr(value)) <= 60


def _unknown_key_message(model: type[BaseModel], loc: Loc) -> str:
    key = str(loc[-1])
    loc = tuple(p for p in loc if not (isinstance(p, str) and p.startswith("function-")))
    valid = _valid_keys_at(model, loc[:-1])
    message = f"unknown key {key!r}"
    if valid:
        close = difflib.get_close_matches(key, valid, n=1, cutoff=0.5)
        if close:
            message += f"; did you mean {close[0]!r}?"
        message += f" (valid keys: {', '.join(sorted(valid))})"
    return message


def _valid_keys_at(model: type[BaseModel], loc: Loc) -> list[str]:
    """Field names (aliases where set) of the model found by walking `loc` from `model`."""
    current: Any = model
    for part in loc:
        current = _descend(current, part)
        if current is None:
            return []
    if get_origin(current) is Union or get_origin(current) is types.UnionType:
        current = next(
            (a for a in get_args(current) if isinstance(a, type) and issubclass(a, BaseModel)), None
        )
    if isinstance(current, type) and issubclass(current, BaseModel):
        return [f.alias or name for name, f in current.model_fields.items()]
    return []


def _descend(annotation: Any, part: int | str) -> Any:
    """The annotation one step down `part` (a field, list index or dict key) from `annotation`."""
    candidates = [annotation]
    found: Any = None
    while candidates:
        ann = candidates.pop()
        origin = get_origin(ann)
        if origin is Annotated:
            candidates.append(get_args(ann)[0])
        elif origin is Union or origin is types.UnionType:
            candidates.extend(get_args(ann))
        elif isinstance(ann, type) and issubclass(ann, BaseModel) and isinstance(part, str):
            for name, f in ann.model_fields.items():
                if part in (name, f.alias):
                    return f.annotation
            tag = ann.model_fields.get("type")
            if tag is not None and tag.default == part:
                found = ann  # a tagged union's member, named by its tag in pydantic's path
        elif origin in (list, tuple) and isinstance(part, int):
            args = get_args(ann)
            found = args[0] if args else None
        elif origin is dict and isinstance(part, str):
            args = get_args(ann)
            found = args[1] if len(args) == 2 else None
    return found
