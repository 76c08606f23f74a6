"""A run's usage folded from its gateway records (`llmtt.gateway.usage`), and metrics.json's
usage fields from them (`llmtt.evaluation.usage`): turns and side requests, costs to the cent,
lower bounds where the provider cut its report, worst cases for the budget, and the faults."""

from __future__ import annotations

from typing import Any

import pytest

from llmtt.agents.pricing import Pricing
from llmtt.evaluation.usage import usage_fields
from llmtt.gateway.usage import fold
from llmtt.providers import ResolvedModel

# $3 / $15 per million input / output tokens, cache reads at $0.30, writes at $3.75.
MODEL = ResolvedModel("m", "m", None, None, (3.0, 15.0, 0.3, 3.75))
PRICED = Pricing("user", MODEL)


def answered(tools: int = 1, **figures: Any) -> dict[str, Any]:
    return {
        "path": "/v1/messages",
        "wire": "anthropic-messages",
        "status": 200,
        "tools": tools,
        "complete": True,
        **figures,
    }


def test_turns_side_requests_and_cost_come_from_answered_requests() -> None:
    records = [
        answered(0, input_tokens=1000, output_tokens=10),  # a title: a side request
        answered(input_tokens=2000, output_tokens=100, cache_read_tokens=10_000),
        {"path": "/v1/messages", "status": 429, "fault": "rate_limited", "retry_after": 2},
        answered(input_tokens=500, output_tokens=50, cache_write_tokens=1000),
        {"path": "/v1/messages", "status": 400, "refused": "turn limit reached (2 turns)"},
    ]
    run = fold(records, PRICED.price)
    assert (run.loop.requests, run.side.requests, run.sent) == (2, 1, 5)
    assert (run.loop.input_tokens, run.loop.output_tokens) == (2500, 150)
    assert (run.loop.cache_read_tokens, run.loop.cache_write_tokens) == (10_000, 1000)
    # 2500 x 3 + 150 x 15 + 10000 x 0.3 + 1000 x 3.75, per million; the title 1000 x 3 + 10 x 15
    assert run.loop.cost == pytest.approx(0.0165)
    assert run.cost == pytest.approx(0.0165 + 0.00315)
    assert run.worst_cost == pytest.approx(run.cost)  # nothing cut: the worst is what it cost
    assert run.refused == "turn limit reached (2 turns)"
    # The 429 was met, then the agent went on: not the fault its run ended on.
    assert run.faults == ["request 3 (/v1/messages): rate limited (429), Retry-After 2 s"]
    assert run.last_fault is None


def test_a_cut_answer_is_a_lower_bound_held_at_its_worst() -> None:
    cut = answered(input_tokens=700, output_tokens=1, max_tokens=4000, fault="cut", complete=False)
    run = fold([answered(input_tokens=100, output_tokens=10), cut], PRICED.price)
    assert run.unreported == ["request 2 (/v1/messages): the answer was cut short"]
    assert run.loop.requests == 1  # the cut answer gave the agent no turn
    assert run.cost == pytest.approx((800 * 3 + 11 * 15) / 1e6)
    # The budget holds the cut request at its max_tokens of output.
    assert run.worst_cost == pytest.approx((800 * 3 + 10 * 15 + 4000 * 15) / 1e6)
    assert run.last_fault == "request 2 (/v1/messages): answer cut short"
    # Without a max_tokens: held at 64,000 tokens of output, never 0.
    no_limit = {k: v for k, v in cut.items() if k != "max_tokens"}
    assert fold([no_limit], PRICED.price).worst_cost == pytest.approx((700 * 3 + 64_000 * 15) / 1e6)


def test_an_agent_that_goes_on_from_a_cut_answer_is_told_from_one_that_retries_it() -> None:
    cut = answered(body_sha="a1", fault="cut", complete=False)
    went_on = fold([cut, answered(body_sha="b2")], PRICED.price)
    assert went_on.went_on_from_cut == "request 1 (/v1/messages): answer cut short"
    assert went_on.last_fault is None  # the run's last request was answered
    retried = fold([cut, answered(body_sha="a1"), answered(body_sha="c3")], PRICED.price)
    assert retried.went_on_from_cut is None  # the same request again: nothing was lost


def test_only_the_loops_requests_decide_and_a_retry_may_come_after_other_requests() -> None:
    title_cut = answered(0, body_sha="t", fault="cut", complete=False)
    run = fold([title_cut, answered(body_sha="a"), answered(body_sha="b")], PRICED.price)
    assert run.went_on_from_cut is None and run.last_fault is None  # a side request's cut
    assert run.faults == ["request 1 (/v1/messages): answer cut short"]  # still listed
    cut = answered(body_sha="a", fault="cut", complete=False)
    late = fold([cut, answered(body_sha="x"), answered(body_sha="a")], PRICED.price)
    assert late.went_on_from_cut is None  # asked for again after another request finished
    limited = {"path": "/v1/messages", "status": 429, "tools": 0, "fault": "rate_limited"}
    assert fold([answered(), limited], PRICED.price).last_fault is None
    # A token count carries the loop's tools, but is no request of the loop: the loop's last
    # request is still the one rate-limited.
    count = {"path": "/v1/messages/count_tokens", "status": 200, "tools": 1, "wire": None}
    loop_limited = {**limited, "tools": 1, "wire": "anthropic-messages"}
    ended = fold([answered(), loop_limited, count], PRICED.price)
    assert ended.last_fault == "request 2 (/v1/messages): rate limited (429)"


def test_worst_cases_count_what_the_provider_may_bill() -> None:
    # A cut OpenAI stream shows no input: the whole request (20,000 bytes) is its worst input;
    # it names no max_tokens: 64,000 tokens of output.
    cut = answered(body_bytes=20_000, fault="cut", complete=False)
    assert fold([cut], PRICED.price).worst_cost == pytest.approx((20_000 * 3 + 64_000 * 15) / 1e6)
    # A request the provider never answered in time may be billed: held at its worst too.
    timed_out = {"path": "/v1/messages", "status": 504, "tools": 1, "fault": "timeout"}
    run = fold([{**timed_out, "body_bytes": 1000, "max_tokens": 100}], PRICED.price)
    assert run.worst_cost == pytest.approx((1000 * 3 + 100 * 15) / 1e6)
    assert run.unreported == ["request 1 (/v1/messages): no answer in time"]
    # A token count (no model answer) costs nothing and is no request of the loop.
    counted = fold(
        [{"path": "/v1/messages/count_tokens", "status": 200, "wire": None}], PRICED.price
    )
    assert (counted.sent, counted.loop.requests, counted.side.requests) == (1, 0, 0)


def test_the_cost_written_at_run_time_is_the_cost() -> None:
    priced_then = answered(input_tokens=1000, output_tokens=10, cost_usd=0.5)
    assert fold([priced_then], PRICED.price).cost == 0.5


def test_an_agent_that_hung_up_is_no_provider_fault_and_an_unfinished_request_no_turn() -> None:
    gone = answered(input_tokens=300, output_tokens=30, client_gone=True)
    unfinished = {"path": "/v1/messages", "tools": 1, "input_tokens": 900, "unfinished": True}
    run = fold([gone, unfinished], PRICED.price)
    assert run.faults == [] and run.last_fault is None
    assert run.loop.requests == 1  # the unanswered request was never a turn the agent saw...
    assert run.loop.input_tokens == 1200  # ...but what the wire showed of it counts
    assert run.unreported == ["request 2 (/v1/messages): still unanswered when the run ended"]
    # A cut after the agent hung up is no provider fault either.
    assert fold([{**gone, "fault": "cut"}], PRICED.price).last_fault is None


def test_an_unpriced_model_has_unknown_cost_and_no_requests_cost_nothing() -> None:
    unpriced = Pricing(None)
    assert fold([answered(input_tokens=10)], unpriced.price).cost is None
    assert fold([], unpriced.price).cost == 0.0


CLIENT = {
    "turns": 2,
    "input_tokens": 2500,
    "output_tokens": 150,
    "cache_read_tokens": 0,
    "cache_write_tokens": 0,
    "side_requests": 0,
    "cost_usd": 0.0,
    "client_cost_usd": 0.02,
}


def test_metrics_take_the_wire_and_keep_the_client_beside_it() -> None:
    records = [
        answered(0, input_tokens=1000, output_tokens=10),
        answered(input_tokens=2000, output_tokens=100),
        answered(input_tokens=500, output_tokens=50),
    ]
    fields, warnings = usage_fields(CLIENT, fold(records, PRICED.price), PRICED)
    assert fields["usage_source"] == "wire" and warnings == []
    assert (fields["turns"], fields["side_requests"], fields["requests"]) == (2, 1, 3)
    assert fields["side_input_tokens"] == 1000 and fields["client_side_requests"] == 0
    assert fields["client_cost_usd"] == 0.02 and fields["cost_source"] == "user"
    assert fields["cost_usd"] == pytest.approx((3500 * 3 + 160 * 15) / 1e6)
    assert fields["cost_lower_bound"] is False
    # The agent saw less than the provider billed: said, and the provider's figures kept.
    fields, warnings = usage_fields(
        {**CLIENT, "input_tokens": 2000}, fold(records, PRICED.price), PRICED
    )
    assert fields["input_tokens"] == 2500 and fields["client_input_tokens"] == 2000
    assert warnings == [
        "the agent's own report of its usage differs from what the provider reported "
        "(input_tokens 2000 against 2500); the provider's figures are the run's"
    ]


def test_metrics_say_which_request_makes_the_cost_a_lower_bound() -> None:
    cut = answered(input_tokens=700, fault="cut", complete=False)
    fields, warnings = usage_fields(CLIENT, fold([cut], PRICED.price), PRICED)
    assert fields["cost_lower_bound"] is True
    assert fields["provider_faults"] == ["request 1 (/v1/messages): answer cut short"]
    assert warnings == [
        "the provider did not report the whole usage of request 1 (/v1/messages): the answer "
        "was cut short: the run's tokens and cost are a lower bound"
    ]


def test_without_a_gateway_the_agents_own_figures_stand() -> None:
    fields, warnings = usage_fields(CLIENT, None, PRICED)
    assert fields == {**CLIENT, "usage_source": "agent"} and warnings == []
