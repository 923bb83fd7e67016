"""Schedule forms and next-run times, including across DST changes."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from hermes.cron.schedule import ScheduleError, grace, next_after, parse_schedule

NY = ZoneInfo("America/New_York")
UTC = ZoneInfo("UTC")


def at(text: str, tz: ZoneInfo = NY) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=tz).timestamp()


def local(ts: float, tz: ZoneInfo = NY) -> str:
    return datetime.fromtimestamp(ts, tz).strftime("%Y-%m-%d %H:%M %Z")


BASE = at("2026-06-10T08:10")  # a Wednesday


@pytest.mark.parametrize(
    ("text", "kind", "expected_next"),
    [
        ("every 30m", "cron", "2026-06-10 08:30 EDT"),
        ("every 2h", "cron", "2026-06-10 10:00 EDT"),
        ("every day at 9am", "cron", "2026-06-10 09:00 EDT"),
        ("weekdays at 9:30", "cron", "2026-06-10 09:30 EDT"),
        ("every monday and friday at 18:00", "cron", "2026-06-12 18:00 EDT"),
        ("15 8 * * *", "cron", "2026-06-10 08:15 EDT"),
        ("2026-06-11T07:00", "once", "2026-06-11 07:00 EDT"),
        ("in 30m", "once", "2026-06-10 08:40 EDT"),
        ("30m", "cron", "2026-06-10 08:30 EDT"),
        ("every 45m", "interval", "2026-06-10 08:55 EDT"),
        ("every 9pm".replace("9pm", "day at 9pm"), "cron", "2026-06-10 21:00 EDT"),
    ],
)
def test_each_form_and_its_next_run(text, kind, expected_next):
    schedule = parse_schedule(text, NY, BASE)
    assert schedule.kind == kind
    assert schedule.display == text
    assert local(next_after(schedule, BASE, NY) if kind != "once" else schedule.at) == expected_next


@pytest.mark.parametrize("text", ["", "sometimes", "every blue moon", "61 * * * *", "at 25:00",
                                  "every day at 13pm", "in forever"])  # fmt: skip
def test_bad_schedules_show_the_accepted_forms(text):
    with pytest.raises(ScheduleError) as info:
        parse_schedule(text, NY, BASE)
    assert "accepted forms:" in str(info.value)
    assert "every 30m" in str(info.value)


def test_spring_forward_gap_runs_once_after_the_jump():
    daily = parse_schedule("30 2 * * *", NY, BASE)  # 02:30 does not exist on 2026-03-08
    start = at("2026-03-07T12:00")
    first = next_after(daily, start, NY)
    assert local(first) == "2026-03-08 03:30 EDT"
    assert local(next_after(daily, first, NY)) == "2026-03-09 02:30 EDT"
    hourly = parse_schedule("0 * * * *", NY, BASE)
    t, seen = at("2026-03-08T00:30"), []
    for _ in range(3):
        t = next_after(hourly, t, NY)
        seen.append(local(t))
    assert seen == ["2026-03-08 01:00 EST", "2026-03-08 03:00 EDT", "2026-03-08 04:00 EDT"]


def test_fall_back_earliest_instant_strictly_after_base_wins():
    hourly = parse_schedule("0 * * * *", NY, BASE)
    t, seen = at("2026-11-01T00:30"), []
    for _ in range(4):
        nxt = next_after(hourly, t, NY)
        assert nxt > t  # never the same instant again: no re-fire loop
        seen.append(local(nxt))
        t = nxt
    # 01:00 happens twice; both are real hours, an hour apart
    assert seen == [
        "2026-11-01 01:00 EDT",
        "2026-11-01 01:00 EST",
        "2026-11-01 02:00 EST",
        "2026-11-01 03:00 EST",
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [("every 1m", 120), ("every 2h", 3600), ("every day at 9am", 7200), ("in 5m", 7200)],
)
def test_grace_is_half_the_period_within_bounds(text, expected):
    schedule = parse_schedule(text, UTC, BASE)
    due = schedule.at if schedule.kind == "once" else next_after(schedule, BASE, UTC)
    assert grace(schedule, due, UTC) == expected  # 1m clamps up to 2 min, a day down to 2 h
