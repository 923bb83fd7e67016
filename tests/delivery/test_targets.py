"""The delivery planner: provenance, dedup (both orders), mirror eligibility, scope metadata;
and where the answer to an event goes."""

from __future__ import annotations

import attrs
import pytest

from hermes.adapters.contract import ChatType, InboundEvent, Target
from hermes.delivery.targets import Origin, answer_target, asked_at, plan_delivery

ORIGIN = Origin("slack", "C-ORIGIN", None, "U1", "T-TEAM")
HOMES = {"slack": Target("slack", "C-HOME"), "telegram": Target("telegram", "T-HOME")}


def plan(deliver, origin=ORIGIN, attach=None, mirror=False, homes=HOMES):
    return plan_delivery(deliver, origin, homes, attach, mirror)


def by_target(p):
    return {str(t.target): (t.provenance, t.mirror) for t in p.targets}


@pytest.mark.parametrize(
    ("deliver", "origin", "attach", "mirror", "expected"),
    [
        # origin: the per-job switch, else the global one
        ("origin", ORIGIN, None, False, {"slack:C-ORIGIN": ("origin", False)}),
        ("origin", ORIGIN, None, True, {"slack:C-ORIGIN": ("origin", True)}),
        ("origin", ORIGIN, True, False, {"slack:C-ORIGIN": ("origin", True)}),
        ("origin", ORIGIN, False, True, {"slack:C-ORIGIN": ("origin", False)}),
        # origin_fallback: no origin captured, the home channel stands in, same switches
        ("origin", None, None, False, {"slack:C-HOME": ("origin_fallback", False)}),
        ("origin", None, None, True, {"slack:C-HOME": ("origin_fallback", True)}),
        ("origin", None, True, False, {"slack:C-HOME": ("origin_fallback", True)}),
        ("origin", None, False, True, {"slack:C-HOME": ("origin_fallback", False)}),
        # explicit: only the per-job switch, never the global one
        ("telegram:99", ORIGIN, None, True, {"telegram:99": ("explicit", False)}),
        ("telegram:99", ORIGIN, True, False, {"telegram:99": ("explicit", True)}),
        ("telegram:99", ORIGIN, False, True, {"telegram:99": ("explicit", False)}),
        # broadcasts: never
        ("all", ORIGIN, True, True,
         {"slack:C-HOME": ("broadcast", False), "telegram:T-HOME": ("broadcast", False)}),
        ("telegram", ORIGIN, True, True, {"telegram:T-HOME": ("broadcast", False)}),
    ],
)  # fmt: skip
def test_mirror_matrix(deliver, origin, attach, mirror, expected):
    assert by_target(plan(deliver, origin, attach, mirror)) == expected


@pytest.mark.parametrize("deliver", ["origin,all", "all,origin"])
def test_dedup_keeps_the_strongest_in_either_order(deliver):
    homes = {"slack": Target("slack", "C-ORIGIN")}  # the origin chat is also the home channel
    result = by_target(plan(deliver, ORIGIN, None, True, homes))
    assert result == {"slack:C-ORIGIN": ("origin", True)}


@pytest.mark.parametrize("deliver", ["origin,slack:C-ORIGIN", "slack:C-ORIGIN,origin"])
def test_dedup_origin_and_explicit_same_chat(deliver):
    assert by_target(plan(deliver, ORIGIN, None, True)) == {"slack:C-ORIGIN": ("origin", True)}


def test_scope_id_only_on_origin_matching_targets():
    p = plan("origin,all,slack:C-OTHER,slack:C-ORIGIN:T7")
    scope = {str(t.target): t.target.scope_id for t in p.targets}
    assert scope == {
        "slack:C-ORIGIN": "T-TEAM",
        "slack:C-ORIGIN:T7": "T-TEAM",
        "slack:C-HOME": None,
        "slack:C-OTHER": None,
        "telegram:T-HOME": None,
    }


def test_a_scope_the_router_recorded_is_never_replaced():
    homes = {"slack": Target("slack", "C-ORIGIN", scope_id="T-OTHER")}  # set by /sethome
    (only,) = plan("slack", homes=homes).targets
    assert only.target.scope_id == "T-OTHER"


def test_unresolvable_tokens_are_reported_and_the_rest_still_planned():
    p = plan_delivery("origin,discord,local,bad:,slack:C9", None, {}, None, False)
    assert [str(t.target) for t in p.targets] == ["slack:C9"]  # local: the output file only
    assert len(p.problems) == 3
    assert any("no home channel is configured for that platform" in x for x in p.problems)


def test_threads_are_distinct_targets():
    p = plan("slack:C1:T1,slack:C1,slack:C1:T1")
    assert sorted(str(t.target) for t in p.targets) == ["slack:C1", "slack:C1:T1"]


def test_the_origins_own_chat_is_origin_however_it_is_named():
    homes = {"slack": Target("slack", "C-ORIGIN")}  # the home channel is where it was made
    assert by_target(plan("slack", ORIGIN, True, False, homes)) == {
        "slack:C-ORIGIN": ("origin", True)
    }


def test_an_answer_goes_to_its_events_chat_unless_the_event_names_another():
    event = InboundEvent("slack", "e1", ChatType.GROUP, "C1", "U1", "hi", "T1", "1700.1")
    assert answer_target(event) == Target("slack", "C1", "1700.1", "T1")
    named = {
        "telegram:-100123": Target("telegram", "-100123"),
        "slack:C2:1700.2": Target("slack", "C2", "1700.2"),
        "none": None,  # the session's transcript keeps it
        "home:telegram": None,  # admission resolves it; one it did not goes nowhere
    }
    for answer_to, where in named.items():
        assert answer_target(attrs.evolve(event, answer_to=answer_to)) == where


def test_a_turn_asks_where_its_answer_goes_and_nowhere_its_client_holds_it_open():
    """Questions and approval prompts: an inbound webhook's in the chat its answer goes to,
    none for an answer that goes nowhere, none on the local endpoint or the API (their
    clients are answered within the request; the CLI and the dashboard decide)."""
    slack = Origin("slack", "C1", "1700.1", "U1", "T1")
    assert asked_at(slack) == Target("slack", "C1", "1700.1", "T1")
    hook = Origin("webhook", "ci", None, "ci", answer_to="telegram:-100123")
    assert asked_at(hook) == Target("telegram", "-100123")
    assert asked_at(attrs.evolve(hook, answer_to="none")) is None
    assert asked_at(Origin("local", "local_1")) is None
    assert asked_at(Origin("api", "alice", "c1", "alice")) is None
    assert asked_at(None) is None
    assert Origin("local", "local_1").answers() == Target("local", "local_1")  # its files
