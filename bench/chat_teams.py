"""Microsoft Teams for bench/chat.py: the fake Teams and a bare Bot Framework echo bot.

Run: python bench/chat.py teams [--rate R]   (about two minutes)
- The fake (tests/fakes/teams.py: the identity platform, the OpenID keys, the connector,
  and a driver POSTing signed activities to its `webhook_url`): `_fake/message` makes a
  user (`29:user<i>`, their personal chat `a:29:user<i>`) write a text, delivered at
  once from a thread of its own (one conversation's in order), and answers the
  activity's id; its state lists the bot's messages (`sent`) and every delivery attempt
  (`deliveries`), each with its `at`.
- bare: `echo_client`, a trio webhook server (hypercorn's Trio worker, as serve's
  listener, with a tiny ASGI app): it fetches the signing keys and a token once, checks
  each request's JWT as hermes does (RS256 under a published key, issuer, audience,
  expiry, the serviceUrl claim), answers 200 (401 unproven), and for each message starts
  a task posting "You said: <text>" (`replyToId` the user's activity) to the connector
  with the token, on a client of its own.
- hermes: serve's webhook listener on a free port (`gateway.webhooks.port: 0`); once
  serve is ready the fake delivers to it. Per activity its adapter checks the JWT and
  commits the journal (with the conversation's serviceUrl) before the 200; the turn runs
  and the outbox sends the reply.
- A reply is matched to its message by `replyToId`. Checked besides: every delivery
  answered 2xx at its first attempt (a retry means another answer).
- `where` splits hermes's latency at the delivery's 200, as the fake records it: inject ->
  200 (the delivery, the JWT, the journal commit) and 200 -> reply (the turn, the outbox
  row, the pacing, the send).
- The pace (hermes/delivery/outbox.py PACES): 50 requests/s for the app, and per
  conversation 1.9 a second in bursts of 3 (Teams: 7 a second, 8 in 2 s, 60 in 30 s).
  The default 20/s over 50 users is one message every 2.5 s to each: under both.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import httpx
import jwt
import trio
from chat import Answer, Fake, Injected, Pushed, Side, not_2xx, serve_webhook

from tests.fakes.teams import APP_ID, ISSUER, SCOPE, SECRET, personal

SECRET_ENV = "TEAMS_APP_SECRET"


async def _keys(http: httpx.AsyncClient, url: str) -> dict[str, Any]:
    metadata = (await http.get(f"{url}/v1/.well-known/openidconfiguration")).json()
    found = (await http.get(metadata["jwks_uri"])).json()["keys"]
    return {k["kid"]: jwt.PyJWK(k).key for k in found}


async def echo_client(url: str) -> None:
    """A webhook server on a free port, given to the fake; each proven activity answered
    200, each message in it answered by a task of its own. Runs until cancelled."""
    async with httpx.AsyncClient(timeout=30) as http, trio.open_nursery() as nursery:
        keys = await _keys(http, url)
        form = {"grant_type": "client_credentials", "client_id": APP_ID,
                "client_secret": SECRET, "scope": SCOPE}  # fmt: skip
        grant = await http.post(f"{url}/botframework.com/oauth2/v2.0/token", data=form)
        auth = {"authorization": f"Bearer {grant.json()['access_token']}"}

        async def answer(activity: dict[str, Any]) -> None:
            conversation = quote(activity["conversation"]["id"], safe="")
            target = f"{activity['serviceUrl'].rstrip('/')}/v3/conversations/{conversation}"
            body = {"type": "message", "text": "You said: " + activity["text"],
                    "replyToId": activity["id"]}  # fmt: skip
            response = await http.post(f"{target}/activities", json=body, headers=auth)
            if response.status_code >= 300:
                raise RuntimeError(f"the send was refused: {response.text}")

        def proven(headers: dict[bytes, bytes], activity: dict[str, Any]) -> bool:
            token = headers.get(b"authorization", b"").decode().removeprefix("Bearer ")
            try:
                key = keys[jwt.get_unverified_header(token)["kid"]]
                claims = jwt.decode(token, key, algorithms=["RS256"], audience=APP_ID,
                                    issuer=ISSUER, leeway=300)  # fmt: skip
            except (jwt.PyJWTError, KeyError):
                return False
            return claims.get("serviceurl") == activity.get("serviceUrl")

        def delivered(headers: dict[bytes, bytes], query: bytes, body: bytes) -> Answer:
            activity = json.loads(body)
            status = 200 if proven(headers, activity) else 401
            if status == 200 and activity.get("type") == "message":
                nursery.start_soon(answer, activity)
            return status, [], b""

        await serve_webhook(nursery, url, "/api/messages", delivered)


class Teams(Pushed):
    name = "teams"
    fake = "Microsoft Teams (Bot Framework connector, signed activities)"
    rate = 20.0  # one message every 2.5 s to each of 50 users: under both paces
    client = "trio + hypercorn + httpx + PyJWT Bot Framework echo bot"
    chat_field = "conversation"
    split = ("answered 200", "inject -> 200 (delivery, JWT, journal commit)",
             "200 -> reply (turn, outbox, pace, send)")  # fmt: skip
    echo_client = staticmethod(echo_client)

    def serve(self, fake_url: str) -> tuple[str, dict[str, str]]:
        yaml = (f"  teams:\n    app_id: '{APP_ID}'\n    token_env: {SECRET_ENV}\n"
                f"    base_url: '{fake_url}/teams/'\n    login_url: '{fake_url}'\n"
                f"    openid_url: '{fake_url}/v1/.well-known/openidconfiguration'\n"
                "    allow_all_users: true\n")  # fmt: skip
        return yaml, {SECRET_ENV: SECRET}

    def who(self, i: int) -> tuple[str, str]:
        user = f"29:user{i}"
        return user, personal(user)

    async def inject(self, http: httpx.AsyncClient, fake: Fake, injected: Injected) -> str:
        kwargs = {"user": injected.user, "text": injected.text, "name": f"User {injected.user}"}
        return str(await fake.inject(http, "message", kwargs))

    def answers(self, post: dict[str, Any]) -> Any:
        return post.get("reply_to_id")

    def text(self, post: dict[str, Any]) -> str:
        return str(post.get("text"))

    def tally(self, side: Side, before: dict[str, Any], state: dict[str, Any]) -> str:
        delivered = len(state["deliveries"]) - len(before["deliveries"])
        typing = len(state["typing"]) - len(before["typing"])
        again = len(not_2xx(state))
        return f"{delivered} activity deliveries, {again} not answered 2xx; {typing} typing"


PLATFORM = Teams()
