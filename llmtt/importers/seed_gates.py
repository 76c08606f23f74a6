"""The seed's retired domain gates as the generic gates its own migration table gives
(specs/evaluation.md, "Migration from Current Gates"), for `llmtt import llm-tool-test`.

The seed's older files name gates that only its first tool (a notes store) had: `min_notes`,
`search_hit`, ... (or, as the spec's table writes them, `MinNotes`, `SearchHit`, ...). Each
becomes the table's command gate on the scenario's target binary (`my-tool` in the table);
`LinkExists`, which the table leaves out, becomes what the seed checked (its `link list` JSON
holds a link with that id and type). Every migration is reported, with the gate it became.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from typing import Any

from llmtt.spec.gates import GATE_TYPES

Gate = dict[str, Any]


def _min_notes(tool: str, g: Gate) -> Gate:
    return _json_len(f"{tool} list --format json", "$", g["count"])


def _min_links(tool: str, g: Gate) -> Gate:
    return _json_len(f"{tool} export --format json", "$.links", g["count"])


def _json_len(command: str, path: str, count: Any) -> Gate:
    return {
        "type": "command_json_path",
        "command": command,
        "path": path,
        "assertion": f"len >= {int(count)}",
    }


def _search_hit(tool: str, g: Gate) -> Gate:
    # The table leaves the substring open ("..."): the query itself, which a hit shows.
    query = str(g["query"])
    return _contains(f"{tool} search {shlex.quote(query)}", query)


def _note_exists(tool: str, g: Gate) -> Gate:
    return {"type": "command_succeeds", "command": f"{tool} show {shlex.quote(str(g['id']))}"}


def _tag_exists(tool: str, g: Gate) -> Gate:
    return _contains(f"{tool} list --format json", str(g["tag"]))


def _content_contains(tool: str, g: Gate) -> Gate:
    return _contains(f"{tool} show {shlex.quote(str(g['id']))}", str(g["substring"]))


def _doctor_passes(tool: str, g: Gate) -> Gate:
    return {"type": "command_succeeds", "command": f"{tool} doctor"}


def _link_exists(tool: str, g: Gate) -> Gate:
    # Not in the table: the seed read `link list FROM` as JSON for an entry {id: TO, type: T}.
    test = (
        'import json, sys; sys.exit(not any(k.get("id") == sys.argv[1] and '
        'k.get("type") == sys.argv[2] for k in json.load(sys.stdin)))'
    )
    listing = f"{tool} link list {shlex.quote(str(g['from']))} --format json"
    args = " ".join(shlex.quote(str(g[k])) for k in ("to", "link_type"))
    return {
        "type": "command_succeeds",
        "command": f"{listing} | python3 -c {shlex.quote(test)} {args}",
    }


def _contains(command: str, substring: str) -> Gate:
    return {"type": "command_output_contains", "command": command, "substring": substring}


# The seed's gate (snake_case, as its serde wrote it) -> its fields and the generic gate.
RETIRED: dict[str, tuple[tuple[str, ...], Callable[[str, Gate], Gate]]] = {
    "min_notes": (("count",), _min_notes),
    "min_links": (("count",), _min_links),
    "search_hit": (("query",), _search_hit),
    "note_exists": (("id",), _note_exists),
    "link_exists": (("from", "to", "link_type"), _link_exists),
    "tag_exists": (("tag",), _tag_exists),
    "content_contains": (("id", "substring"), _content_contains),
    "doctor_passes": ((), _doctor_passes),
}


def snake(name: str) -> str:
    """`MinNotes` -> `min_notes` (a snake_case name is returned as it is)."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


def migrate_gate(gate: Gate, binary: str | None) -> tuple[Gate | None, str | None]:
    """(the gate as llmtt takes it, what to report) — or (None, why it cannot be carried
    over). A gate that needs no change comes back as it is, with nothing to report."""
    kind = gate.get("type")
    if not isinstance(kind, str):
        return gate, None
    name = snake(kind)
    if name in RETIRED:
        return _retired(gate, kind, name, binary)
    if name != kind and name in GATE_TYPES:
        return {**gate, "type": name}, f"gate type {kind} written as {name}"
    return gate, None


def _retired(gate: Gate, kind: str, name: str, binary: str | None) -> tuple[Gate | None, str]:
    fields, make = RETIRED[name]
    missing = [f for f in fields if f not in gate]
    if missing:
        return None, f"the retired gate {kind} lacks {', '.join(missing)}"
    if binary is None:
        return None, (
            f"the retired gate {kind} becomes a command on the target's binary (the seed's "
            "migration table), and no binary is known: give the file `target: {binary: "
            "...}`, or import it into a project whose llmtt.toml [target] names one"
        )
    try:
        made = make(shlex.quote(binary), gate)
    except (TypeError, ValueError):
        values = ", ".join(f"{f}: {gate[f]!r}" for f in fields)
        return None, f"the retired gate {kind} has a value it cannot take ({values})"
    extra = {k: v for k, v in gate.items() if k not in (*fields, "type")}
    made.update({k: v for k, v in extra.items() if k in ("description", "timeout_secs", "weight")})
    shown = ", ".join(f"{k}: {v}" for k, v in made.items() if k != "type")
    note = f"the retired gate {kind} migrated (the seed's table) to {made['type']} ({shown})"
    return made, note
