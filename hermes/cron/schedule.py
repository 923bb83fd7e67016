"""Schedules: the forms users write, compiled to cron expressions, intervals or one-shots.

Cron expressions run on the configured timezone's wall clock (croniter does the
field arithmetic). When a wall time is ambiguous (DST fall-back) the earliest
of its instants strictly after the base wins; a wall time that does not exist
(spring-forward) runs at the same offset as before the jump (02:30 -> 03:30).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import attrs
from croniter import croniter

from hermes.actors.errors import Invalid

ACCEPTED = (
    "accepted forms: 'every 30m', 'every 2h', 'every day at 9am', 'weekdays at 9:30', "
    "'every monday and friday at 18:00', a five-field cron expression ('0 9 * * 1-5'), "
    "an ISO timestamp ('2026-12-24T18:00'), 'in 30m' (once), or a bare '30m' (recurring)"
)
GRACE_MIN = 120.0
GRACE_MAX = 7200.0
ONE_SHOT_GRACE = GRACE_MAX  # a one-shot later than this is retired, not fired

DAYS = {
    "monday": 1,
    "mon": 1,
    "tuesday": 2,
    "tue": 2,
    "tues": 2,
    "wednesday": 3,
    "wed": 3,
    "thursday": 4,
    "thu": 4,
    "thurs": 4,
    "friday": 5,
    "fri": 5,
    "saturday": 6,
    "sat": 6,
    "sunday": 0,
    "sun": 0,
}
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


class ScheduleError(Invalid):
    """A schedule that does not parse; the message shows the accepted forms."""

    def __init__(self, text: str, why: str) -> None:
        super().__init__(f"cannot read schedule {text!r}: {why}; {ACCEPTED}")
        self.text = text
        self.why = why


@attrs.frozen
class Schedule:
    """kind: 'cron' (expr), 'interval' (seconds) or 'once' (at, epoch seconds)."""

    kind: str
    display: str
    expr: str | None = None
    seconds: float | None = None
    at: float | None = None

    @property
    def recurring(self) -> bool:
        return self.kind != "once"

    def to_text(self) -> str:
        """The stored form, read back by `from_text`."""
        if self.kind == "cron":
            return f"cron:{self.expr}"
        if self.kind == "interval":
            return f"every:{self.seconds:g}"
        return f"at:{self.at!r}"

    @classmethod
    def from_text(cls, stored: str, display: str) -> Schedule:
        kind, _, value = stored.partition(":")
        if kind == "cron":
            return cls("cron", display, expr=value)
        if kind == "every":
            return cls("interval", display, seconds=float(value))
        return cls("once", display, at=float(value))


def _duration(text: str) -> float | None:
    m = re.fullmatch(r"(\d+)\s*([smhd])", text.strip())
    return int(m.group(1)) * UNITS[m.group(2)] if m else None


def _clock(text: str) -> tuple[int, int] | None:
    m = re.fullmatch(r"(\d{1,2})(?::(\d{2}))?\s*(am|pm)?", text.strip())
    if not m:
        return None
    hour, minute = int(m.group(1)), int(m.group(2) or 0)
    if m.group(3):
        if not 1 <= hour <= 12:
            return None
        hour = hour % 12 + (12 if m.group(3) == "pm" else 0)
    if hour > 23 or minute > 59:
        return None
    return hour, minute


def _every(seconds: float, text: str) -> Schedule:
    """Compile to cron where the period divides the clock evenly, else an interval."""
    minutes = seconds / 60
    if seconds % 60 == 0 and minutes < 60 and 60 % minutes == 0:
        return Schedule("cron", text, expr=f"*/{int(minutes)} * * * *")
    hours = seconds / 3600
    if seconds % 3600 == 0 and hours < 24 and 24 % hours == 0:
        return Schedule("cron", text, expr=f"0 */{int(hours)} * * *")
    if seconds == 86400:
        return Schedule("cron", text, expr="0 0 * * *")
    return Schedule("interval", text, seconds=seconds)


def parse_schedule(text: str, tz: ZoneInfo, now: float) -> Schedule:
    """Read what a user wrote. `now` (epoch seconds) anchors 'in 30m'."""
    raw = text
    text = " ".join(text.lower().split())
    if not text:
        raise ScheduleError(raw, "it is empty")
    if text.startswith("in "):
        seconds = _duration(text[3:])
        if seconds is None or seconds <= 0:
            raise ScheduleError(raw, "'in' needs a duration such as 30m or 2h")
        return Schedule("once", raw, at=now + seconds)
    if (seconds := _duration(text)) is not None:
        if seconds <= 0:
            raise ScheduleError(raw, "a period must be longer than zero")
        return _every(seconds, raw)
    if text.startswith("every "):
        rest = text[6:]
        if (seconds := _duration(rest)) is not None:
            if seconds <= 0:
                raise ScheduleError(raw, "a period must be longer than zero")
            return _every(seconds, raw)
        if rest.startswith("day at "):
            return _daily(raw, rest[7:], "*")
        m = re.fullmatch(r"([a-z ,]+?) at (.+)", rest)
        if m:
            names = [d for d in re.split(r"\s*(?:,|\band\b)\s*", m.group(1)) if d]
            if names and all(d in DAYS for d in names):
                days = ",".join(str(DAYS[d]) for d in names)
                return _daily(raw, m.group(2), days)
        raise ScheduleError(raw, "after 'every' comes a duration, 'day at TIME' or weekdays")
    if text.startswith("weekdays at "):
        return _daily(raw, text[12:], "1-5")
    if len(text.split()) == 5 and croniter.is_valid(text):
        return Schedule("cron", raw, expr=text)
    try:
        when = datetime.fromisoformat(raw.strip())
    except ValueError:
        raise ScheduleError(raw, "it matches none of them") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=tz)
    return Schedule("once", raw, at=when.timestamp())


def _daily(raw: str, clock: str, days: str) -> Schedule:
    parsed = _clock(clock)
    if parsed is None:
        raise ScheduleError(raw, f"{clock!r} is not a time of day (9am, 18:00, 9:30pm)")
    hour, minute = parsed
    return Schedule("cron", raw, expr=f"{minute} {hour} * * {days}")


def _instants(naive: datetime, tz: ZoneInfo) -> list[float]:
    """The instants a wall time names: two in a fall-back hour, one otherwise.
    A time in the spring-forward gap names none; it resolves with the offset
    before the jump (02:30 -> 03:30)."""
    found = set()
    for fold in (0, 1):
        ts = naive.replace(tzinfo=tz, fold=fold).timestamp()
        if datetime.fromtimestamp(ts, tz).replace(tzinfo=None) == naive:
            found.add(ts)
    if not found:
        found.add(naive.replace(tzinfo=tz, fold=0).timestamp())
    return sorted(found)


def zone_of(schedule: Schedule, tz: ZoneInfo) -> str | None:
    """The zone a run of `schedule` computed in `tz` depends on: tz's name for a cron
    expression (a wall-clock schedule), None for an interval or a one-shot (an instant)."""
    return tz.key if schedule.kind == "cron" else None


def same_wall_time(at: float, old: ZoneInfo, new: ZoneInfo) -> float:
    """The instant whose wall-clock time in `new` is the one `at` shows in `old` (the
    earlier of two in a fall-back hour; across a spring-forward gap, the offset before
    the jump)."""
    return _instants(datetime.fromtimestamp(at, old).replace(tzinfo=None), new)[0]


def next_after(schedule: Schedule, base: float, tz: ZoneInfo) -> float | None:
    """The first run strictly after `base` (epoch seconds); None for a spent one-shot."""
    if schedule.kind == "once":
        return schedule.at if schedule.at > base else None
    if schedule.kind == "interval":
        return base + schedule.seconds
    aware = datetime.fromtimestamp(base, UTC).astimezone(tz)
    local = aware.replace(tzinfo=None)
    lookback = timedelta(hours=3)
    if aware.utcoffset() == (aware - lookback).utcoffset() == (aware + lookback).utcoffset():
        lookback = timedelta(0)  # no clock change nearby: wall time maps one to one
    it = croniter(schedule.expr, local - lookback)
    for _ in range(10_000):
        candidate = it.get_next(datetime)
        later = [t for t in _instants(candidate, tz) if t > base]
        if later:
            return later[0]
    raise ScheduleError(schedule.display, "it never fires")


def period(schedule: Schedule, at: float, tz: ZoneInfo) -> float | None:
    """The gap between the run at `at` and the one after it (None for one-shots)."""
    if schedule.kind == "interval":
        return schedule.seconds
    if schedule.kind == "once":
        return None
    following = next_after(schedule, at, tz)
    return None if following is None else following - at


def grace(schedule: Schedule, due: float, tz: ZoneInfo) -> float:
    """How late a missed run may still fire: half the period, within 2 min .. 2 h."""
    gap = period(schedule, due, tz)
    if gap is None:
        return ONE_SHOT_GRACE
    return min(GRACE_MAX, max(GRACE_MIN, gap / 2))
