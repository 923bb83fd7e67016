"""Where a brief goes: targets with their provenance, and whether each is mirrored.

Pure logic. A `deliver` string names targets: `origin` (where the job was made),
a bare platform (its home channel), `platform:chat[:thread]`, `all` (every
home channel), `local` (the output file only: no chat). Each target carries
where it came from (origin, origin_fallback, explicit, broadcast); duplicates
merge keeping the strongest, whatever the order (the origin's own chat is
`origin` however it is named: a home channel that is the origin's chat too);
mirroring into the chat's
session follows per-target eligibility; the origin's scope goes only with
targets that are the origin's own chat, and never replaces a scope the
router recorded (a home channel's).
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import attrs

from hermes.adapters.contract import HOME, NOWHERE, InboundEvent, Target
from hermes.adapters.registry import PLATFORMS

STRENGTH = {"origin": 3, "origin_fallback": 2, "explicit": 1, "broadcast": 0}
LOCAL = "local"


@attrs.frozen
class Origin:
    """The chat a job was created from, and who made it there."""

    platform: str
    chat_id: str
    thread_id: str | None = None
    user_id: str | None = None
    scope_id: str | None = None
    chat_type: str | None = None  # dm | group | channel; None where unknown
    answer_to: str | None = None  # the event's (InboundEvent.answer_to): its answers go there

    def target(self) -> Target:
        return Target(self.platform, self.chat_id, self.thread_id, self.scope_id)

    def answers(self) -> Target | None:
        """Where what a turn of this chat sends back goes (its answer, a file, a prompt): its
        own chat, or the one its event's `answer_to` names; None: nowhere."""
        return _answered_at(self.target(), self.answer_to)

    def to_json(self) -> str:
        return json.dumps(attrs.asdict(self))

    @classmethod
    def from_json(cls, text: str | None) -> Origin | None:
        if not text:
            return None
        known = {f.name for f in attrs.fields(cls)}
        return cls(**{k: v for k, v in json.loads(text).items() if k in known})


def asked_at(origin: Origin | None) -> Target | None:
    """Where a turn asks a person (a question, an approval's prompt): where its answers go.
    None where no message would be read: no chat, an answer that goes nowhere, or a
    platform whose client holds the turn open and is answered within it (the local
    endpoint, the API); there the CLI and the dashboard decide."""
    if origin is None:
        return None
    platform = PLATFORMS.get(origin.platform)
    return None if platform is not None and platform.streams else origin.answers()


@attrs.frozen
class PlannedTarget:
    target: Target
    provenance: str
    mirror: bool


@attrs.frozen
class Plan:
    targets: list[PlannedTarget]
    problems: list[str]  # tokens that named nowhere


def mirror_eligible(provenance: str, attach_to_session: bool | None, mirror_default: bool) -> bool:
    """origin and origin_fallback: the per-job switch, else the global one; explicit
    targets only by the per-job switch; broadcasts never."""
    switch = attach_to_session if attach_to_session is not None else mirror_default
    if provenance in ("origin", "origin_fallback"):
        return switch
    if provenance == "explicit":
        return attach_to_session is True
    return False


def parse_target(token: str) -> Target | None:
    """`platform:chat[:thread]`, or None when it is not one."""
    platform, _, rest = token.partition(":")
    chat, _, thread = rest.partition(":")
    if not platform or not chat:
        return None
    return Target(platform, chat, thread or None)


def answer_target(event: InboundEvent) -> Target | None:
    """Where the answer to `event` goes: its own chat, or the one its `answer_to` names
    (admission resolved a home channel to its chat); None: nowhere."""
    return _answered_at(event.target(), event.answer_to)


def _answered_at(own: Target, answer_to: str | None) -> Target | None:
    if answer_to is None:
        return own
    if answer_to == NOWHERE or answer_to.startswith(HOME):
        return None
    return parse_target(answer_to)


def _resolve(
    token: str, origin: Origin | None, homes: Mapping[str, Target]
) -> tuple[list[tuple[Target, str]], str | None]:
    if token == LOCAL:
        return [], None  # the output file, written for every fire
    if token == "origin":
        if origin is not None:
            return [(origin.target(), "origin")], None
        if homes:
            return [(next(iter(homes.values())), "origin_fallback")], None
        return [], "origin: the job has no origin and no home channel is configured"
    if token == "all":
        return [(home, "broadcast") for home in homes.values()], None
    if ":" not in token:
        if token in homes:
            return [(homes[token], "broadcast")], None
        return [], f"{token}: no home channel is configured for that platform"
    target = parse_target(token)
    if target is None:
        return [], f"{token}: expected platform:chat_id[:thread_id]"
    return [(target, "explicit")], None


def plan_delivery(
    deliver: str,
    origin: Origin | None,
    homes: Mapping[str, Target],
    attach_to_session: bool | None,
    mirror_default: bool,
) -> Plan:
    merged: dict[tuple, list] = {}  # (platform, chat, thread) -> [target, provenance, mirror]
    problems = []
    for token in (t.strip() for t in deliver.split(",")):
        if not token:
            continue
        resolved, problem = _resolve(token, origin, homes)
        if problem:
            problems.append(problem)
        for target, provenance in resolved:
            if origin is not None and (target.platform, target.chat_id, target.thread_id) == (
                origin.platform,
                origin.chat_id,
                origin.thread_id,
            ):
                provenance = "origin"  # the job's own chat, however it was named
            eligible = mirror_eligible(provenance, attach_to_session, mirror_default)
            key = (target.platform, target.chat_id, target.thread_id)
            entry = merged.get(key)
            if entry is None:
                merged[key] = [target, provenance, eligible]
            else:
                if STRENGTH[provenance] > STRENGTH[entry[1]]:
                    entry[1] = provenance
                entry[2] = entry[2] or eligible  # eligibility does not depend on token order
    targets = []
    for target, provenance, eligible in merged.values():
        if (
            origin is not None
            and origin.scope_id
            and target.scope_id is None
            and (target.platform, target.chat_id) == (origin.platform, origin.chat_id)
        ):
            target = attrs.evolve(target, scope_id=origin.scope_id)
        targets.append(PlannedTarget(target, provenance, eligible))
    return Plan(targets, problems)
