"""Evidence that an agent used the guidance and skills its run placed (run.json `placed`).

What the model was sent is the evidence, not what an agent says it did: the gateway marks each
request whose body holds a placement's text (`seen`, from execution.placement.needles), so the
same rule holds under every agent. A skill is *exposed* when its description reached the model
(the agent listed it), *invoked* when its SKILL.md body did (the agent loaded it by its skill
tool, or the model read the file), and the guidance is *read* when its text did (claude-code,
codex and opencode load theirs into every request; the litellm loop's is its system prompt).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llmtt.gateway.usage import of_loop
from llmtt.spec.scenario import SkillTriggers


def use_fields(
    placed: list[dict[str, Any]],
    records: list[dict[str, Any]] | None,
    triggers: SkillTriggers | None = None,
    calls: Sequence[tuple[str, str, bool]] = (),
) -> dict[str, Any]:
    """metrics.json's fields for a run's placements (none for a run that placed nothing):
    `guidance_read`, `skills_exposed`, `skills_invoked`, `first_read_turn`, and with the
    scenario's `triggers`, `skill_triggers` (each placed skill it names: `tp`, loaded as it
    should; `fn`, not loaded though it should; `fp`, loaded though it should not; `tn`).
    Without a wire record (an agent that reached its model by itself) nothing can be told:
    null, and no trigger is counted.

    `calls`: the run's tool calls in order, as (tool, command, whether it ran the target).
    `skill_before_target` says whether a placed skill was loaded by a call before the first
    that ran the target tool (null: no skill loaded, or the target never ran)."""
    if not placed:
        return {}
    skills = sorted(str(p.get("name")) for p in placed if p.get("kind") == "skill")
    guidance = any(p.get("kind") == "guidance" for p in placed)
    if records is None:
        fields: dict[str, Any] = {"first_read_turn": None}
        if guidance:
            fields["guidance_read"] = None
        if skills:
            fields |= {"skills_exposed": None, "skills_invoked": None, "skill_before_target": None}
        return fields
    seen: set[str] = set()
    first_read: int | None = None
    turn = 0
    asked: set[str] = set()
    for record in records:
        labels = set(record.get("seen") or ())
        seen |= labels
        if not of_loop(record) or record.get("status") != 200:
            continue  # a refused or failed request is no turn
        if record.get("body_sha") in asked:
            continue  # nor is a retry of one already answered
        asked.add(str(record.get("body_sha")))
        turn += 1
        if first_read is None and any(label.startswith("loaded:") for label in labels):
            # The body rides in the request after the answer that asked for it.
            first_read = max(1, turn - 1)
    fields = {"first_read_turn": first_read}
    if skills:
        fields["skill_before_target"] = _before_target(skills, calls)
    if guidance:
        fields["guidance_read"] = "guidance" in seen
    if skills:
        fields["skills_exposed"] = [s for s in skills if f"listed:{s}" in seen]
        fields["skills_invoked"] = [s for s in skills if f"loaded:{s}" in seen]
        if not fields["skills_invoked"]:
            fields["skill_before_target"] = None
        if triggers is not None:
            verdicts = {}
            for skill in skills:
                loaded = f"loaded:{skill}" in seen
                if skill in triggers.should_trigger:
                    verdicts[skill] = "tp" if loaded else "fn"
                elif skill in triggers.should_not_trigger:
                    verdicts[skill] = "fp" if loaded else "tn"
            if verdicts:
                fields["skill_triggers"] = verdicts
    return fields


def _before_target(skills: list[str], calls: Sequence[tuple[str, str, bool]]) -> bool | None:
    """Whether a call loading one of `skills` (the agent's skill tool naming it, or a read of
    its SKILL.md) comes before the first call that runs the target; None without a target
    call or a loading one."""
    loaded = target = None
    for index, (tool, command, runs_target) in enumerate(calls):
        if loaded is None and any(_loads(tool, command, s) for s in skills):
            loaded = index
        if target is None and runs_target:
            target = index
    if loaded is None or target is None:
        return None
    return loaded < target


def _loads(tool: str, command: str, skill: str) -> bool:
    if tool == "skill":  # llmtt's name for claude-code's Skill and opencode's skill
        return f'"{skill}"' in command
    return f"{skill}/SKILL.md" in command
