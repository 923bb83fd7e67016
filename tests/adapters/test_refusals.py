"""Every platform's refusals mean the same to the outbox: each platform's own answer for a
refused token, a rate limit with and without a wait, a server error and an edit of a
message that is gone is read by its adapter into a Refusal, and the one table
(hermes/adapters/refusals.py) gives the same contract result for each."""

from __future__ import annotations

from collections.abc import Callable
from unittest.mock import ANY

import httpx
import pytest

from hermes.adapters.contract import Permanent, RetryAfter, SendResult
from hermes.adapters.discord.adapter import CODES as DISCORD
from hermes.adapters.discord.adapter import refusal_of as discord_refusal
from hermes.adapters.email.smtp import CODES as EMAIL
from hermes.adapters.http import HttpAnswer
from hermes.adapters.imessage.api import CODES as IMESSAGE
from hermes.adapters.imessage.api import refusal_of as imessage_refusal
from hermes.adapters.matrix.api import CODES as MATRIX
from hermes.adapters.matrix.api import sent_or_refusal
from hermes.adapters.mattermost.api import CODES as MATTERMOST
from hermes.adapters.mattermost.api import refusal_of as mattermost_refusal
from hermes.adapters.refusals import Codes, Refusal, is_auth, result_of, retry_after
from hermes.adapters.signal.adapter import CODES as SIGNAL
from hermes.adapters.slack.adapter import CODES as SLACK
from hermes.adapters.slack.api import refusal_of as slack_refusal
from hermes.adapters.sms.adapter import CODES as SMS
from hermes.adapters.sms.adapter import refusal_of as sms_refusal
from hermes.adapters.teams.adapter import CODES as TEAMS
from hermes.adapters.teams.adapter import refusal_of as teams_refusal
from hermes.adapters.telegram.adapter import CODES as TELEGRAM
from hermes.adapters.telegram.api import ApiError, answered
from hermes.adapters.telegram.api import refusal_of as telegram_refusal
from hermes.adapters.whatsapp.adapter import CODES as WHATSAPP
from hermes.adapters.whatsapp.adapter import refusal_of as whatsapp_refusal


def http(status: int, body: object, **headers: str) -> HttpAnswer:
    return HttpAnswer(status, body, httpx.Headers(headers))


def telegram(answer: HttpAnswer) -> Refusal:
    with pytest.raises(ApiError) as refused:
        answered("sendMessage", answer)
    return telegram_refusal(refused.value)


def matrix(answer: HttpAnswer) -> Refusal:
    refusal = sent_or_refusal(answer)
    assert isinstance(refusal, Refusal)
    return refusal


def tg(code: int, description: str, **parameters: object) -> dict:
    return {"ok": False, "error_code": code, "description": description, "parameters": parameters}


def mx(errcode: str, **more: object) -> dict:
    return {"errcode": errcode, "error": "said", **more}


def bb(status: int, message: str, said: str) -> dict:
    return {"status": status, "message": message, "error": {"type": message, "message": said}}


def ms(code: str) -> dict:
    return {"error": {"code": code, "message": "said"}}


def wa(code: int) -> dict:
    return {"error": {"message": "said", "code": code}}


def tw(code: int, status: int) -> dict:
    return {"code": code, "message": "said", "status": status,
            "more_info": f"https://www.twilio.com/docs/errors/{code}"}  # fmt: skip


def mm(error_id: str, status: int) -> dict:
    return {"id": error_id, "message": "said", "status_code": status}


# platform: (its codes, how its adapter reads an answer, its answer for each case)
PLATFORMS: dict[str, tuple[Codes, Callable[[HttpAnswer], Refusal], dict[str, HttpAnswer]]] = {
    "telegram": (
        TELEGRAM,
        telegram,
        {
            "revoked": http(401, tg(401, "Unauthorized")),
            "waited": http(429, tg(429, "Too Many Requests: retry after 7", retry_after=7)),
            "limited": http(429, tg(429, "Too Many Requests")),
            "down": http(502, tg(502, "Bad Gateway")),
            "gone": http(400, tg(400, "Bad Request: message to edit not found")),
        },
    ),
    "slack": (
        SLACK,
        lambda a: slack_refusal(a, "chat.update"),
        {
            "revoked": http(200, {"ok": False, "error": "token_revoked"}),
            "waited": http(429, None, **{"Retry-After": "7"}),
            "limited": http(429, None),
            "down": http(503, {"ok": False, "error": "service_unavailable"}),
            "gone": http(200, {"ok": False, "error": "message_not_found"}),
        },
    ),
    "discord": (
        DISCORD,
        discord_refusal,
        {
            "revoked": http(401, {"message": "401: Unauthorized", "code": 0}),
            "waited": http(429, {"message": "You are being rate limited.", "retry_after": 7}),
            "limited": http(429, {"message": "You are being rate limited."}),
            "down": http(502, None),
            "gone": http(404, {"message": "Unknown Message", "code": 10008}),
        },
    ),
    "whatsapp": (
        WHATSAPP,
        whatsapp_refusal,
        {
            "revoked": http(401, wa(190)),
            "waited": http(429, wa(130429), **{"Retry-After": "7"}),
            "limited": http(400, wa(131056)),
            "down": http(500, wa(1)),
        },
    ),
    "teams": (
        TEAMS,
        teams_refusal,
        {
            "revoked": http(401, {"message": "Authorization has been denied for this request."}),
            "waited": http(429, None, **{"Retry-After": "7"}),
            "limited": http(429, ms("TooManyRequests")),
            "down": http(412, ms("PreconditionFailed")),  # a concurrent change: retried
            "gone": http(404, ms("NotFound")),
        },
    ),
    "matrix": (
        MATRIX,
        matrix,
        {
            "revoked": http(401, mx("M_UNKNOWN_TOKEN")),
            "waited": http(429, mx("M_LIMIT_EXCEEDED", retry_after_ms=7000)),
            "limited": http(429, mx("M_LIMIT_EXCEEDED")),
            "down": http(502, None),
        },
    ),
    "mattermost": (
        MATTERMOST,
        lambda a: mattermost_refusal(a, "PUT posts/patch"),
        {
            "revoked": http(401, mm("api.context.session_expired.app_error", 401)),
            # the server's limiter answers "limit exceeded" as text, its wait in a header
            "waited": http(429, None, **{"X-Ratelimit-Remaining": "0", "X-Ratelimit-Reset": "7"}),
            "limited": http(429, None),
            "down": http(500, mm("app.post.update.app_error", 500)),
            "gone": http(404, mm("app.post.get.app_error", 404)),
        },
    ),
    "imessage": (
        IMESSAGE,
        lambda a: imessage_refusal(a, "POST message/text"),
        {
            "revoked": http(401, bb(401, "Unauthorized", "Authentication Error")),
            # BlueBubbles limits nothing; a reverse proxy in front of it may
            "waited": http(429, None, **{"Retry-After": "7"}),
            "limited": http(429, None),
            "down": http(500, bb(500, "Server Error", "Failed to send message!")),
        },
    ),
    "sms": (
        SMS,
        sms_refusal,
        {
            "revoked": http(401, tw(20003, 401)),
            "waited": http(429, tw(20429, 429), **{"Retry-After": "7"}),
            "limited": http(429, tw(20429, 429)),
            "down": http(500, tw(20500, 500)),
        },
    ),
}
EXPECTED: dict[str, Callable[[SendResult], bool]] = {
    "revoked": lambda r: r == RetryAfter(None, r.reason),  # kept: the adapter goes fatal
    "waited": lambda r: isinstance(r, RetryAfter) and r.seconds == 7.0,
    "limited": lambda r: r == RetryAfter(None, r.reason),  # the outbox backs off
    "down": lambda r: r == RetryAfter(None, r.reason),
    "gone": lambda r: isinstance(r, Permanent) and r.missing,
}
CASES = [(p, case) for p, (_, _, answers) in PLATFORMS.items() for case in answers]


@pytest.mark.parametrize(("platform", "case"), CASES)
def test_each_platforms_refusal_means_the_same(platform, case):
    codes, read, answers = PLATFORMS[platform]
    refusal = read(answers[case])
    result = result_of(refusal, codes, edit_of="m1" if case == "gone" else None)
    assert EXPECTED[case](result), result
    assert is_auth(refusal, codes) == (case == "revoked")
    assert refusal.reason  # the row says why


def test_an_smtp_refusal_is_passing_at_4xx_and_final_at_5xx():
    assert isinstance(result_of(Refusal(0, "451", "451 try later"), EMAIL), RetryAfter)
    assert isinstance(result_of(Refusal(0, "550", "550 no such user"), EMAIL), Permanent)


def test_a_signal_recipients_failure_is_read_by_its_type():
    """A code is matched as a code, never as a phrase of the text ("" names the
    failures signal-cli did not name: passing; it is in every text)."""
    unregistered = Refusal(0, "UNREGISTERED_FAILURE", "+4915 is not on Signal")
    assert isinstance(result_of(unregistered, SIGNAL), Permanent)
    assert result_of(Refusal(0, "", "failed (send)"), SIGNAL) == RetryAfter(None, ANY)
    limited = Refusal(0, "RATE_LIMIT_FAILURE", "rate limited", 30.0, True)
    assert result_of(limited, SIGNAL) == RetryAfter(30.0, ANY, scope_wide=True)


def test_a_wait_is_read_one_way():
    assert retry_after({"retry-after": "3"}) == 3.0
    assert retry_after({}, 2500, ms=True) == 2.5
    assert retry_after({"retry-after": "3"}, "1.5") == 1.5  # the body's own field first
    assert retry_after({"retry-after": "soon"}) is None
    assert retry_after({}, True) is None  # not a number
    assert retry_after({"retry-after": "-4"}) == 0.0
    assert retry_after({"retry-after": "1e9"}) == 3600.0
    assert retry_after({"retry-after": "nan"}) is None
