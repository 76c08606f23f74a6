"""Reading YAML and TOML into pydantic models with errors that name file, line and field.

pydantic knows the field path of a mistake but not its line; YAML nodes and a light scan of
TOML text supply the line. Unknown keys get the nearest valid key as a suggestion.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from llmtt.errors import ConfigError
from llmtt.util import signatures as inputs

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


def dotted(loc: Sequence[int | str]) -> str:
    """`("evaluation", "gates", 2, "path")` -> `evaluation.gates[2].path`."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + part
    return out
