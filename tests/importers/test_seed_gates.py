"""The seed's migration table (specs/evaluation.md, "Migration from Current Gates"), row by row:
each retired domain gate becomes the generic gate the table gives, on the target's binary."""

from __future__ import annotations

from typing import Any

import pytest

from llmtt.importers.seed_gates import migrate_gate, snake
from llmtt.spec.evaluation import EvaluationSpec

# fmt: off
ROWS = [
    ({"type": "MinNotes", "count": 3}, {"type": "command_json_path", "command": "my-tool list --format json", "path": "$", "assertion": "len >= 3"}),
    ({"type": "MinLinks", "count": 1}, {"type": "command_json_path", "command": "my-tool export --format json", "path": "$.links", "assertion": "len >= 1"}),
    ({"type": "SearchHit", "query": "distributed systems"}, {"type": "command_output_contains", "command": "my-tool search 'distributed systems'", "substring": "distributed systems"}),
    ({"type": "NoteExists", "id": "qp-1"}, {"type": "command_succeeds", "command": "my-tool show qp-1"}),
    ({"type": "TagExists", "tag": "rust"}, {"type": "command_output_contains", "command": "my-tool list --format json", "substring": "rust"}),
    ({"type": "ContentContains", "id": "qp-1", "substring": "ownership"}, {"type": "command_output_contains", "command": "my-tool show qp-1", "substring": "ownership"}),
    ({"type": "DoctorPasses"}, {"type": "command_succeeds", "command": "my-tool doctor"}),
    # The seed's own spelling (serde's snake_case) reads the same.
    ({"type": "min_notes", "count": 2, "description": "two"}, {"type": "command_json_path", "command": "my-tool list --format json", "path": "$", "assertion": "len >= 2", "description": "two"}),
]
# fmt: on


@pytest.mark.parametrize(("old", "new"), ROWS)
def test_each_row_of_the_table(old: dict[str, Any], new: dict[str, Any]) -> None:
    made, note = migrate_gate(old, "my-tool")
    assert made == new
    assert note is not None and f"the retired gate {old['type']} migrated" in note
    EvaluationSpec.model_validate({"gates": [made]})  # a gate llmtt takes


def test_link_exists_which_the_table_leaves_out_checks_what_the_seed_checked() -> None:
    made, _ = migrate_gate(
        {"type": "LinkExists", "from": "a b", "to": "c", "link_type": "related"}, "my-tool"
    )
    assert made is not None and made["type"] == "command_succeeds"
    assert made["command"].startswith("my-tool link list 'a b' --format json | python3 -c ")
    assert made["command"].endswith(" c related")


def test_what_cannot_be_migrated_says_why() -> None:
    assert migrate_gate({"type": "MinNotes"}, "t") == (
        None,
        "the retired gate MinNotes lacks count",
    )
    made, why = migrate_gate({"type": "MinNotes", "count": "many"}, "t")
    assert made is None and "a value it cannot take (count: 'many')" in str(why)
    made, why = migrate_gate({"type": "DoctorPasses"}, None)
    assert made is None and "no binary is known" in str(why)


def test_generic_gates_pass_through_and_camel_case_names_are_read() -> None:
    gate = {"type": "file_exists", "path": "a"}
    assert migrate_gate(gate, None) == (gate, None)
    made, note = migrate_gate({"type": "NoTranscriptErrors"}, None)
    assert made == {"type": "no_transcript_errors"}
    assert note == "gate type NoTranscriptErrors written as no_transcript_errors"
    assert migrate_gate({"type": "Frobnicate"}, "t") == ({"type": "Frobnicate"}, None)
    assert snake("ContentContains") == "content_contains" and snake("min_notes") == "min_notes"
