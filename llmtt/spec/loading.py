"""Reading YAML and TOML into pydantic models with errors that name file, line and field.

pydantic knows the field path of a mistake but not its line; YAML nodes and a light scan of
TOML text supply the line. Unknown keys get the nearest valid key as a suggestion.
"""

from __future__ import annotations

import difflib
import re
import tomllib
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, TypeVar, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError

from llmtt.errors import ConfigError, Problem
from llmtt.util import signatures as inputs

M = TypeVar("M", bound=BaseModel)
Loc = tuple[int | str, ...]

try:  # the C loader is several times faster; fall back where libyaml is absent
    _Loader: Any = yaml.CSafeLoader
except AttributeError:  # pragma: no cover
    _Loader = yaml.SafeLoader


MAX_DEPTH = 64  # nesting levels a YAML or TOML file may use; llmtt's formats need under ten
MAX_NODES = 100_000  # values a YAML file may hold once its aliases are expanded


def read_yaml(path: Path) -> tuple[Any, dict[Loc, int]]:
    """Parse a YAML file; return the data and a map from key paths to 1-based lines.

    The file's events are scanned first, with its nesting depth and the size of its aliases
    bounded: libyaml's composer recurses in C (a deep file crashes the process) and an alias
    bomb expands to gigabytes, so neither is composed before the scan has refused it.
    """
    text = _read_text(path)
    try:
        lines = _YamlScan(path).scan(text)
        data = yaml.load(text, Loader=_Loader)  # noqa: S506 - a safe loader
    except yaml.MarkedYAMLError as exc:
        if "nesting depth" in str(exc.problem) and _Loader is not yaml.SafeLoader:
            # The libyaml of PyYAML 6.0.4 refuses past 1,000 levels while it reads ahead, before
            # the scan sees a level; PyYAML's own parser reads ahead less, so the scan refuses
            # at its level, naming the field.
            _YamlScan(path).scan(text, yaml.SafeLoader)
        mark = exc.problem_mark
        line = mark.line + 1 if mark is not None else None
        raise ConfigError.one(path, f"invalid YAML: {exc.problem}", line=line) from None
    except yaml.YAMLError as exc:
        raise ConfigError.one(path, f"invalid YAML: {exc}") from None
    return data, lines


class _Frame:
    """One open mapping or sequence of a YAML file being scanned."""

    __slots__ = ("anchor", "index", "key", "loc", "mapping", "on_key", "seen", "start")

    def __init__(self, loc: Loc, mapping: bool, anchor: str | None, start: int) -> None:
        self.loc = loc
        self.mapping = mapping
        self.anchor = anchor
        self.start = start  # values counted before this one began
        self.index = 0  # a sequence's next index
        self.on_key = mapping  # a mapping's next node is a key (else the value of `key`)
        self.key = "?"
        self.seen: dict[str, int] = {}


class _YamlScan:
    """Lines of keys and values from a YAML file's events, refusing what cannot be loaded
    safely: duplicate keys, deep nesting, self-referencing aliases and alias bombs."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lines: dict[Loc, int] = {}
        self.stack: list[_Frame] = []
        self.sizes: dict[str, int] = {}  # anchor -> values it expands to
        self.total = 0

    def scan(self, text: str, loader: Any = _Loader) -> dict[Loc, int]:
        """Scan `text`; return the line map (ConfigError for what is refused)."""
        documents = 0
        for event in yaml.parse(text, Loader=loader):
            if isinstance(event, yaml.DocumentStartEvent):
                documents += 1
                if documents > 1:
                    break  # yaml.load says that a single document is expected
            elif isinstance(event, yaml.CollectionEndEvent):
                frame = self.stack.pop()
                if frame.anchor is not None:
                    self.sizes[frame.anchor] = self.total - frame.start
                self._ended()
            elif isinstance(event, yaml.NodeEvent):
                self._node(event)
        return self.lines

    def _node(self, event: yaml.NodeEvent) -> None:
        mark = event.start_mark
        line = mark.line + 1 if mark is not None else 1  # libyaml marks every event
        parent = self.stack[-1] if self.stack else None
        if parent is None:
            loc: Loc = ()
            self.lines[loc] = line
        elif parent.on_key:
            parent.key = str(event.value) if isinstance(event, yaml.ScalarEvent) else "?"
            loc = (*parent.loc, parent.key)
            if isinstance(event, yaml.ScalarEvent):
                self._key(parent, parent.key, line)
        else:
            loc = (*parent.loc, parent.key if parent.mapping else parent.index)
            self.lines[loc] = line
        if isinstance(event, yaml.AliasEvent):
            anchor = str(event.anchor)
            if any(f.anchor == anchor for f in self.stack):
                self._refuse(f"alias *{anchor} refers to a node that contains it", line, loc)
            self._count(self.sizes.get(anchor, 1), line, loc)
            self._ended()
            return
        start = self.total
        self._count(1, line, loc)
        if isinstance(event, yaml.CollectionStartEvent):
            if len(self.stack) >= MAX_DEPTH:
                self._refuse(f"nested deeper than {MAX_DEPTH} levels", line, loc)
            mapping = isinstance(event, yaml.MappingStartEvent)
            self.stack.append(_Frame(loc, mapping, event.anchor, start))
            return
        if event.anchor is not None:
            self.sizes[str(event.anchor)] = 1
        self._ended()

    def _key(self, frame: _Frame, name: str, line: int) -> None:
        if name in frame.seen:
            # YAML would keep the last one silently and lose the first: refuse instead.
            self._refuse(
                f"duplicate key {name!r} (first at line {frame.seen[name]})",
                line,
                (*frame.loc, name),
            )
        frame.seen[name] = line
        self.lines[(*frame.loc, name, "__key__")] = line

    def _ended(self) -> None:
        """A node ended: its mapping waits for the other half of a pair, its sequence for
        the next item."""
        if self.stack:
            parent = self.stack[-1]
            parent.on_key = parent.mapping and not parent.on_key
            parent.index += 1

    def _count(self, values: int, line: int, loc: Loc) -> None:
        self.total += values
        if self.total > MAX_NODES:
            self._refuse(
                f"more than {MAX_NODES} values once aliases are expanded "
                "(an alias used inside aliases, over and over?)",
                line,
                loc,
            )

    def _refuse(self, message: str, line: int, loc: Loc) -> None:
        field = (dotted(loc[:3]) + "..." if len(loc) > 4 else dotted(loc)) or None
        raise ConfigError.one(self.path, message, line=line, field=field)


def read_toml(path: Path) -> tuple[dict[str, Any], dict[Loc, int]]:
    """Parse a TOML file; return the data and a best-effort map from key paths to lines."""
    text = _read_text(path)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        match = re.search(r"at line (\d+)", str(exc))
        line = int(match.group(1)) if match else None
        message = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(exc))
        raise ConfigError.one(path, f"invalid TOML: {message}", line=line) from None
    except RecursionError:  # tomllib recurses once per level of nested arrays and tables
        lines = _toml_lines(text)
        line = _toml_deep_line(text)
        keys = [(n, loc) for loc, n in lines.items() if loc[-1:] != ("__key__",)]
        field = max(((n, loc) for n, loc in keys if line and n <= line), default=(0, ()))[1]
        raise ConfigError.one(
            path,
            f"nested deeper than {MAX_DEPTH} levels",
            line=line,
            field=dotted(field) or None,
        ) from None
    return data, _toml_lines(text)


def _toml_deep_line(text: str) -> int | None:
    """The line where TOML values first nest deeper than MAX_DEPTH (strings and comments
    skipped; table headers stand alone on their line)."""
    depth, line, i, quote = 0, 1, 0, ""
    while i < len(text):
        char = text[i]
        if quote:
            if text.startswith(quote, i):
                i, quote = i + len(quote), ""
                continue
            i += 2 if char == "\\" and quote[0] == '"' else 1
            line += char == "\n"
            continue
        if char in "\"'":
            quote = text[i : i + 3] if text[i : i + 3] in ('"""', "'''") else char
            i += len(quote)
            continue
        if char == "#":
            i = text.find("\n", i)
            if i < 0:
                break
            continue
        if char == "\n":
            line += 1
        elif char in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return line
        elif char in "]}":
            depth = max(depth - 1, 0)
        i += 1
    return None


_TOML_HEADER = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(?:#.*)?$")
_TOML_KEY = re.compile(r"""^\s*("[^"]*"|'[^']*'|[A-Za-z0-9_.\-]+)\s*=""")


def _toml_lines(text: str) -> dict[Loc, int]:
    """Map table headers and `key =` lines to line numbers (dotted keys and headers split)."""
    lines: dict[Loc, int] = {}
    table: Loc = ()
    for number, raw in enumerate(text.splitlines(), start=1):
        header = _TOML_HEADER.match(raw)
        if header:
            table = tuple(_split_dotted(header.group(1)))
            lines.setdefault(table, number)
            lines.setdefault((*table, "__key__"), number)
            continue
        key = _TOML_KEY.match(raw)
        if key:
            loc = (*table, *_split_dotted(key.group(1)))
            lines.setdefault(loc, number)
            lines.setdefault((*loc, "__key__"), number)
    return lines


def _split_dotted(key: str) -> list[str]:
    parts = re.findall(r'"[^"]*"|\'[^\']*\'|[^.]+', key)
    return [p.strip().strip("\"'") for p in parts]


def _read_text(path: Path) -> str:
    inputs.note_file(path)
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError.one(path, "file not found") from None
    except UnicodeDecodeError as exc:
        line = path.read_bytes()[: exc.start].count(b"\n") + 1
        raise ConfigError.one(path, f"not valid utf-8 text: {exc.reason}", line=line) from None
    except OSError as exc:
        raise ConfigError.one(path, f"cannot read: {exc}") from None


def line_of(lines: dict[Loc, int], loc: Sequence[int | str], *, key: bool = False) -> int | None:
    """The line of the deepest known prefix of `loc` (of its key, if `key`)."""
    parts = tuple(loc)
    while True:
        if key and (*parts, "__key__") in lines:
            return lines[(*parts, "__key__")]
        if parts in lines:
            return lines[parts]
        if not parts:
            return None
        parts = parts[:-1]


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


_UNION_TAGS: set[str] = set()
_UNION_TAG_ORDER: list[str] = []


def register_union_tags(tags: Sequence[str]) -> None:
    """Declare tag values of discriminated unions so they are left out of field paths."""
    _UNION_TAGS.update(tags)
    _UNION_TAG_ORDER.extend(t for t in tags if t not in _UNION_TAG_ORDER)


def dotted(loc: Sequence[int | str]) -> str:
    """`("evaluation", "gates", 2, "path")` -> `evaluation.gates[2].path`."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + part
    return out


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
