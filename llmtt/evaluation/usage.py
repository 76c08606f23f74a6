"""A run's turns, tokens and cost in metrics.json: from the wire when the run went through the
model gateway (what the provider reported), else from the agent's own report; the agent's own
figures kept beside the wire's as `client_*`, and a disagreement said (docs/metrics.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from llmtt.agents.pricing import Pricing
from llmtt.gateway.usage import WireRun, fold, read_wire

# The client's figures kept under `client_*` when the wire's replace them.
CLIENT_FIGURES = (
    "turns",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "side_requests",
)


def wire_usage(run_dir: Path, pricing: Pricing) -> WireRun | None:
    """The run's usage from the wire, or None when it did not go through the gateway."""
    records = read_wire(run_dir)
    return None if records is None else fold(records, pricing.price)


def usage_fields(
    client: dict[str, Any], wire: WireRun | None, pricing: Pricing
) -> tuple[dict[str, Any], list[str]]:
    """The usage fields of metrics.json, and the warnings about them.

    `client` holds the fields as the agent's own events give them (`usage_metrics`). With the
    wire's record they become the wire's, the client's kept as `client_*`.
    """
    if wire is None:
        return {**client, "usage_source": "agent"}, []
    fields = {f"client_{name}": client.get(name) for name in CLIENT_FIGURES}
    loop, side = wire.loop, wire.side
    cost = wire.cost
    fields.update(
        {
            "usage_source": "wire",
            "turns": loop.requests,
            "requests": wire.sent,
            "input_tokens": loop.input_tokens,
            "output_tokens": loop.output_tokens,
            "cache_read_tokens": loop.cache_read_tokens,
            "cache_write_tokens": loop.cache_write_tokens,
            "cost_usd": None if cost is None else round(cost, 6),
            "cost_source": pricing.source if loop.requests or side.requests else None,
            "cost_lower_bound": bool(wire.unreported),
            "client_cost_usd": client.get("client_cost_usd"),
            "side_requests": side.requests,
            "side_input_tokens": side.input_tokens,
            "side_output_tokens": side.output_tokens,
            "side_cost_usd": None if side.cost is None else round(side.cost, 6),
        }
    )
    if wire.faults:
        fields["provider_faults"] = list(wire.faults)
    warnings = [
        f"the provider did not report the whole usage of {u}: the run's tokens and cost are "
        "a lower bound"
        for u in wire.unreported
    ]
    if not wire.unreported and not wire.faults:
        differs = _disagreement(client, fields)
        if differs:
            warnings.append(
                "the agent's own report of its usage differs from what the provider reported "
                f"({differs}); the provider's figures are the run's"
            )
    return fields, warnings


def _disagreement(client: dict[str, Any], wire: dict[str, Any]) -> str:
    """The loop figures where the agent's report and the wire differ, in words ('' if none).
    An agent that reports no per-request usage is not compared; nor are the side requests an
    agent never shows (opencode's title), which the wire alone counts."""
    if client.get("turns") is None or (client.get("turns") == 0 and not client.get("input_tokens")):
        return ""
    names = ("turns", "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")
    return ", ".join(
        f"{name} {client.get(name)} against {wire[name]}"
        for name in names
        if client.get(name) != wire[name]
    )
