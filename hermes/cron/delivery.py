"""Delivery planning: where a fire's brief goes, and whether it is mirrored.

Pure logic: targets carry where they came from (origin, origin_fallback,
explicit, broadcast); duplicates merge keeping the strongest; mirroring into
the chat's session follows per-target eligibility; the origin's scope_id
travels only with targets that are the origin's own chat.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

import attrs

from hermes.cron.jobs import Origin

STRENGTH = {"origin": 3, "origin_fallback": 2, "explicit": 1, "broadcast": 0}
LOCAL = "local"


@attrs.frozen
class Target:
    platform: str
    chat_id: str | None = None
    thread_id: str | None = None

    @property
    def key(self) -> tuple[str, str | None, str | None]:
        return (self.platform, self.chat_id, self.thread_id)

    def __str__(self) -> str:
        parts = [self.platform, self.chat_id, self.thread_id]
        return ":".join(p for p in parts if p)


@attrs.frozen
class PlannedTarget:
    target: Target
    provenance: str
    mirror: bool
    metadata: tuple[tuple[str, str], ...] = ()

    @property
    def meta(self) -> dict[str, str]:
        return dict(self.metadata)


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


def _resolve(
    token: str, origin: Origin | None, homes: Mapping[str, Target]
) -> tuple[list[tuple[Target, str]], str | None]:
    if token == LOCAL:
        return [(Target(LOCAL), "explicit")], None
    if token == "origin":
        if origin is not None:
            return [(Target(origin.platform, origin.chat_id, origin.thread_id), "origin")], None
        if homes:
            return [(next(iter(homes.values())), "origin_fallback")], None
        return [], "origin: the job has no origin and no home channel is configured"
    if token == "all":
        return [(home, "broadcast") for home in homes.values()], None
    if ":" not in token:
        if token in homes:
            return [(homes[token], "broadcast")], None
        return [], f"{token}: no home channel is configured for that platform"
    platform, _, rest = token.partition(":")
    chat, _, thread = rest.partition(":")
    if not platform or not chat:
        return [], f"{token}: expected platform:chat_id[:thread_id]"
    return [(Target(platform, chat, thread or None), "explicit")], None


def plan_delivery(
    deliver: str,
    origin: Origin | None,
    homes: Mapping[str, Target],
    attach_to_session: bool | None,
    mirror_default: bool,
    job_id: str = "",
) -> Plan:
    merged: dict[tuple, list] = {}  # key -> [target, strongest provenance, eligible]
    problems = []
    for token in (t.strip() for t in deliver.split(",")):
        if not token:
            continue
        resolved, problem = _resolve(token, origin, homes)
        if problem:
            problems.append(problem)
        for target, provenance in resolved:
            eligible = target.platform != LOCAL and mirror_eligible(
                provenance, attach_to_session, mirror_default
            )
            entry = merged.get(target.key)
            if entry is None:
                merged[target.key] = [target, provenance, eligible]
            else:
                if STRENGTH[provenance] > STRENGTH[entry[1]]:
                    entry[1] = provenance
                entry[2] = entry[2] or eligible  # eligibility does not depend on token order
    targets = []
    for target, provenance, eligible in merged.values():
        meta = {"job_id": job_id} if job_id else {}
        if (
            origin
            and origin.scope_id
            and (target.platform, target.chat_id)
            == (
                origin.platform,
                origin.chat_id,
            )
        ):
            meta.setdefault("scope_id", origin.scope_id)
        targets.append(PlannedTarget(target, provenance, eligible, tuple(sorted(meta.items()))))
    return Plan(targets, problems)


@attrs.frozen
class SendResult:
    success: bool
    message_id: str | None = None
    error: str | None = None


class Deliverer(Protocol):
    """Sends a brief to a chat target (the adapters implement it)."""

    async def send(self, target: PlannedTarget, text: str) -> SendResult: ...


class NoAdapters:
    """The deliverer while no platform adapter is running: every chat send fails, recorded."""

    async def send(self, target: PlannedTarget, text: str) -> SendResult:
        return SendResult(False, error=f"no adapter is connected for {target.target.platform}")
