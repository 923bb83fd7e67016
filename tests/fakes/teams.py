"""A fake Microsoft Teams on 127.0.0.1, playing Microsoft's three sides for the tests of the
Teams adapter, from the Bot Framework's documentation (the Bot Connector API, its
authentication, the Teams bot guides):

Microsoft's identity platform (the client-credentials grant):

    POST /{tenant}/oauth2/v2.0/token   (form) grant_type=client_credentials, client_id,
        client_secret, scope=https://api.botframework.com/.default
        -> {"token_type": "Bearer", "expires_in": 3599, "ext_expires_in": 3599,
            "access_token": "<opaque>"}
        A wrong app id or secret: 401 {"error": "invalid_client", "error_description":
        "AADSTS7000215: Invalid client secret provided. ..."}; after `revoke_secret()`
        400 invalid_client AADSTS7000222 (the secret expired), and every token issued
        before stops working at the connector.

The Bot Framework's OpenID metadata and signing keys:

    GET /v1/.well-known/openidconfiguration -> {"issuer", "jwks_uri": "<this>/v1/.well-known
        /keys", "id_token_signing_alg_values_supported": ["RS256"], ...}
    GET /v1/.well-known/keys -> {"keys": [{"kty": "RSA", "use": "sig", "kid", "n", "e",
        "endorsements": ["msteams"]}]}: RSA keys this fake makes; `rotate_keys()` signs
        with a new one from then on (the old one stays published, as in a rotation).
    Each fetch is counted (`metadata_fetches`, `key_fetches`).

The connector, at the serviceUrl it gives in activities (`service_url`: `<this>/teams/`;
also served without the `/teams` prefix):

    POST {service}/v3/conversations/{conversationId}/activities[/{replyToId}]
        Authorization: Bearer <an access token issued above>
        a message activity {"type": "message", "text"?, "textFormat"?, "attachments"?,
        "replyToId"?} -> 201 {"id": "<activity id>"}, recorded in `sent`; a typing activity
        -> 201 {}, recorded in `typing`
    PUT {service}/v3/conversations/{conversationId}/activities/{activityId}
        -> 200 {"id"}: the activity replaced, recorded in `updates`; an id not sent: 404
        {"error": {"code": "NotFound", ...}}
    A token not issued (or revoked, or expired by `expire_tokens()`) is refused 401
    {"message": "Authorization has been denied for this request."}. A text over
    MAX_TEXT UTF-16 code units is refused 413 {"error": {"code": "MessageSizeTooBig"}}.
    `fail(status, code, retry_after=None, method="send"|"edit"|"*", times=1)` answers the
    next such call(s) with that status (429 with a Retry-After header, 412
    PreconditionFailed, 403, 500, ...).

A file consent card sent by the bot is accepted by `accept_file(record)`: an `invoke`
activity `fileConsent/invoke` whose `uploadInfo.uploadUrl` is `<this>/upload/<n>`; the
bytes PUT there (with its Content-Range) are recorded in `uploads`.

The driver (Teams's side toward hermes's webhook at `webhook_url`): `message()` builds a
user's activity (a personal chat, a group chat, a channel post or reply, a mention of the
bot, an Adaptive Card press's `value`), `deliver()` POSTs any activity with an
`Authorization: Bearer <JWT>` signed as the Bot Framework signs (iss, aud = the app id,
exp, nbf, and the connector's URL as the claim `serviceurl`, so spelled) from a thread of
its own: one conversation's activities in order.
An answer other than 2xx (or none) is tried again after `retry_initial` seconds,
doubling, `retry_max_tries` in all; `forge=` signs it wrongly ("signature": another key
under the published key id; "audience": for another app; "expired": an hour ago;
"kid": a key id never published; "service_url": a token for another connector;
"channel": the activity's channelId one the key does not endorse) and tries once, as a
forger would. Every attempt is in
`deliveries` (`id`, `attempt`, `status_code` or `error`).

Where it differs from Microsoft: one tenant, one bot; no rate limits of its own (inject
them with `fail`); no roster, conversation creation or attachments API; upload URLs do
not expire. In its own process: `python -m tests.fakes.teams` prints its URL and serves
until killed; `POST /_fake/<control>` and `GET /_fake/state` drive it.
"""

from __future__ import annotations

import itertools
import threading
import time
from typing import Any
from urllib.parse import parse_qsl

import httpx
import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm

from tests.fakes.kit import Fake, observed, serve_until_killed
from tests.fakes.local_http import Reply, TrackedHandler, bearer, copy_json, decode_object, routes

APP_ID = "1b5e3f4a-8c2d-4e6f-9a0b-7c1d2e3f4a5b"
SECRET = "fake~teams~client~secret"
BOT_ID = f"28:{APP_ID}"
BOT_NAME = "hermes"
TENANT = "72f988bf-86f1-41af-91ab-2d7cd011db47"
CHANNEL = "19:general@thread.tacv2"
GROUP = "19:group@thread.v2"
ISSUER = "https://api.botframework.com"
SCOPE = "https://api.botframework.com/.default"
MAX_TEXT = 40_000  # UTF-16 code units of a message's text (80 KB)
TYPES = {"personal": "personal", "group": "groupChat", "channel": "channel"}
DENIED = {"message": "Authorization has been denied for this request."}


def personal(user: str) -> str:
    """A user's personal chat with the bot."""
    return f"a:{user}"


def _key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _utf16(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


class FakeTeams(Fake):
    name = "teams"
    _other_verbs = ("PUT",)
    _CONTROLS = frozenset({"configure", "message"})
    _STATE = (
        "sent",
        "deliveries",
        "typing",
        "updates",
        "refused",
        "internal_errors",
        "webhook_url",
    )
    _channel_field = "conversation"
    _ROUTES = routes(
        ("POST", "/{tenant}/oauth2/v2.0/token", "_token"),
        ("GET", "/v1/.well-known/openidconfiguration", "_metadata"),
        ("GET", "/v1/.well-known/keys", "_keys"),
        ("POST", "{prefix:(/teams)?}/v3/conversations/{conversation}/activities", "_post"),
        ("POST", "{prefix:(/teams)?}/v3/conversations/{conversation}/activities/{reply}", "_post"),
        ("PUT", "{prefix:(/teams)?}/v3/conversations/{conversation}/activities/{activity}", "_put"),
        ("PUT", "/upload/{upload}", "_upload"),
    )

    def __init__(self, secret: str = SECRET, port: int = 0) -> None:
        super().__init__(port)
        self.secret = secret
        self.webhook_url: str | None = None
        self.retry_initial, self.retry_max_tries = 0.2, 6
        self._signing = [(f"key-{n}", _key()) for n in range(1)]
        self._stranger = _key()
        self._revoked = False
        self._tokens: set[str] = set()
        self._numbers = itertools.count(1)
        self._messages: dict[str, dict[str, Any]] = {}  # activity id -> as it shows now
        self._typing: list[dict[str, Any]] = []
        self._updates: list[dict[str, Any]] = []
        self._uploads: list[dict[str, Any]] = []
        self._refused: list[dict[str, Any]] = []  # calls answered with an injected fault
        self._deliveries: list[dict[str, Any]] = []
        self._lanes: dict[str, threading.Lock] = {}
        self._activities: dict[str, dict[str, Any]] = {}  # every activity delivered, by id
        self.token_grants = self.token_refusals = 0
        self.metadata_fetches = self.key_fetches = 0
        self._client = httpx.Client(timeout=30.0)

    def _stop(self) -> None:
        super()._stop()
        self._client.close()

    @property
    def service_url(self) -> str:
        return f"{self.url}/teams/"

    @property
    def openid_url(self) -> str:
        return f"{self.url}/v1/.well-known/openidconfiguration"

    sent = observed("_sent", "Message activities the bot sent, in order.")
    typing = observed("_typing", "Typing activities the bot sent.")
    updates = observed("_updates", "Edits (PUTs) of the bot's activities, in order.")
    uploads = observed("_uploads", "Files PUT to upload URLs.")
    refused = observed("_refused", "Connector calls refused (injected faults, 401, 404, 413).")
    deliveries = observed("_deliveries", "Every attempt to deliver an activity to hermes.")

    # -- controls ----------------------------------------------------------------------

    def configure(self, **values: Any) -> None:
        """Set `webhook_url`, `retry_initial`, `retry_max_tries` (wakes waiting deliveries)."""
        self._change(**values)

    def fail(self, status: int, code: str = "", *, retry_after: float | None = None,
             method: str = "send", times: int = 1) -> None:  # fmt: skip
        """The next `times` connector calls of `method` ("send", "edit", "*") answer
        `status` with the connector's error `code`."""
        with self._cond:
            self._faults.add((status, code, retry_after), method, times=times)

    def revoke_secret(self) -> None:
        """The app's secret expires: no new token, and the issued ones are refused."""
        self._change(_revoked=True, _tokens=set())

    def expire_tokens(self) -> None:
        """Every issued token stops working (a fresh one is granted as usual)."""
        self._change(_tokens=set())

    def rotate_keys(self) -> str:
        """Sign with a new key from now on (both published); its key id."""
        with self._cond:
            kid = f"key-{len(self._signing)}"
            self._signing.append((kid, _key()))
            return kid

    def messages_in(self, conversation: str) -> list[dict[str, Any]]:
        """The bot's messages in a conversation as they show now (after edits)."""
        with self._cond:
            return copy_json([m for m in self._messages.values()
                              if m["conversation"] == conversation])  # fmt: skip

    # -- identity and keys ---------------------------------------------------------------

    def _token(self, request: TrackedHandler, raw: bytes, **_: str) -> Reply:
        form = dict(parse_qsl(raw.decode("utf-8", "replace")))
        with self._cond:
            if self._revoked:
                self.token_refusals += 1
                self._cond.notify_all()
                return Reply(400, {"error": "invalid_client", "error_description":
                                   "AADSTS7000222: The provided client secret keys for app"
                                   f" '{APP_ID}' are expired."})  # fmt: skip
            right = (form.get("client_id"), form.get("client_secret")) == (APP_ID, self.secret)
            if not right or form.get("grant_type") != "client_credentials":
                self.token_refusals += 1
                self._cond.notify_all()
                return Reply(401, {"error": "invalid_client", "error_description":
                                   "AADSTS7000215: Invalid client secret provided."})  # fmt: skip
            if form.get("scope") != SCOPE:
                return Reply(400, {"error": "invalid_scope", "error_description": "AADSTS70011"})
            token = f"eyJ0-fake-{next(self._numbers)}"
            self._tokens.add(token)
            self.token_grants += 1
            self._cond.notify_all()
        return Reply(200, {"token_type": "Bearer", "expires_in": 3599, "ext_expires_in": 3599,
                           "access_token": token})  # fmt: skip

    def _metadata(self, request: TrackedHandler, raw: bytes) -> Reply:
        with self._cond:
            self.metadata_fetches += 1
            self._cond.notify_all()
        metadata = {
            "issuer": ISSUER,
            "jwks_uri": f"{self.url}/v1/.well-known/keys",
            "id_token_signing_alg_values_supported": ["RS256"],
            "token_endpoint_auth_methods_supported": ["private_key_jwt"],
        }
        return Reply(200, metadata)

    def _keys(self, request: TrackedHandler, raw: bytes) -> Reply:
        with self._cond:
            self.key_fetches += 1
            self._cond.notify_all()
            signing = list(self._signing)
        keys = []
        for kid, key in signing:
            jwk = RSAAlgorithm.to_jwk(key.public_key(), as_dict=True)
            keys.append({**jwk, "kid": kid, "use": "sig", "endorsements": ["msteams"]})
        return Reply(200, {"keys": keys})

    def token_for(self, service_url: str, forge: str | None = None) -> str:
        """The JWT the Bot Framework signs a request with (`forge`: signed wrongly)."""
        with self._cond:
            kid, key = self._signing[-1]
        now = int(time.time())
        claims = {"iss": ISSUER, "aud": APP_ID, "exp": now + 3600, "nbf": now - 60,
                  "serviceurl": service_url}  # fmt: skip
        if forge == "audience":
            claims["aud"] = "another-app"
        elif forge == "expired":
            claims["exp"], claims["nbf"] = now - 3600, now - 7200
        elif forge == "signature":
            key = self._stranger
        elif forge == "kid":
            kid, key = "key-never-published", self._stranger
        elif forge == "service_url":  # a real token, issued for another connector
            claims["serviceurl"] = "https://smba.example.net/elsewhere/"
        return jwt.encode(claims, key, algorithm="RS256", headers={"kid": kid})

    # -- the connector -------------------------------------------------------------------

    def _authorized(self, request: TrackedHandler) -> bool:
        with self._cond:
            return bearer(request.headers) in self._tokens

    def _fault(self, method: str) -> Reply | None:
        with self._cond:
            fault = self._faults.take(method)
        if fault is None:
            return None
        status, code, wait = fault
        headers = [] if wait is None else [("Retry-After", f"{wait:g}")]
        body = {"error": {"code": code or str(status), "message": "injected"}}
        return self._refuse(method, Reply(status, body, headers))

    def _refuse(self, method: str, reply: Reply) -> Reply:
        """`reply`, a refusal, recorded in `refused`."""
        with self._cond:
            self._refused.append({"method": method, "status": reply.status,
                                  "at": time.monotonic()})  # fmt: skip
            self._cond.notify_all()
        return reply

    def _post(self, request: TrackedHandler, raw: bytes, conversation: str, **_: str) -> Reply:
        if not self._authorized(request):
            return self._refuse("send", Reply(401, DENIED))
        activity = decode_object("application/json", raw)
        with self._cond:
            if activity.get("type") == "typing":
                self._typing.append({"conversation": conversation, "at": time.monotonic()})
                self._cond.notify_all()
                return Reply(201, {})
        refused = self._fault("send") or self._too_large(activity)
        if refused is not None:
            return refused
        with self._cond:
            activity_id = f"1{next(self._numbers):012d}"
            record = {"id": activity_id, "conversation": conversation,
                      "text": activity.get("text"), "text_format": activity.get("textFormat"),
                      "attachments": activity.get("attachments") or [],
                      "reply_to_id": activity.get("replyToId"), "at": time.monotonic()}  # fmt: skip
            self._sent.append(record)
            self._messages[activity_id] = copy_json(record)
            self._cond.notify_all()
        return Reply(201, {"id": activity_id})

    def _put(self, request: TrackedHandler, raw: bytes, conversation: str, activity: str,
             **_: str) -> Reply:  # fmt: skip
        if not self._authorized(request):
            return self._refuse("edit", Reply(401, DENIED))
        body = decode_object("application/json", raw)
        refused = self._fault("edit") or self._too_large(body)
        if refused is not None:
            return refused
        with self._cond:
            shown = self._messages.get(activity)
            missing = shown is None or shown["conversation"] != conversation
        if missing:
            error = {"error": {"code": "NotFound", "message": "no such activity"}}
            return self._refuse("edit", Reply(404, error))
        with self._cond:
            shown["text"] = body.get("text")
            shown["attachments"] = body.get("attachments") or []
            update = {"id": activity, "conversation": conversation, "text": shown["text"]}
            self._updates.append({**update, "attachments": shown["attachments"]})
            self._cond.notify_all()
        return Reply(200, {"id": activity})

    def _too_large(self, activity: dict[str, Any]) -> Reply | None:
        if _utf16(str(activity.get("text") or "")) <= MAX_TEXT:
            return None
        body = {"error": {"code": "MessageSizeTooBig", "message": "too big"}}
        return self._refuse("send", Reply(413, body))

    def _upload(self, request: TrackedHandler, raw: bytes, upload: str) -> Reply:
        with self._cond:
            headers = request.headers
            self._uploads.append({"upload": upload, "content": raw,
                                  "content_range": headers.get("content-range"),
                                  "authorization": headers.get("authorization")})  # fmt: skip
            self._cond.notify_all()
        return Reply(201, {"id": f"item-{upload}", "size": len(raw)})

    # -- the driver ------------------------------------------------------------------------

    def message(self, text: str = "", user: str = "29:ann", where: str = "personal",
                thread: str | None = None, mention: bool = False, value: Any = None,
                name: str | None = None, forge: str | None = None, reply_to: str | None = None,
                conversation: str | None = None) -> str:  # fmt: skip
        """A user's message delivered to hermes (see the module); its activity id. In a
        channel, `thread` is the reply chain's root (None: the post starts one);
        `conversation` another's than the user's own personal chat (a press on a card)."""
        activity_id = f"{int(time.time() * 1000)}{next(self._numbers):04d}"
        conversation = conversation or {"personal": personal(user), "group": GROUP}.get(where)
        if conversation is None:
            conversation = f"{CHANNEL};messageid={thread or activity_id}"
        entities = []
        if mention:
            at = f"<at>{BOT_NAME}</at>"
            text = f"{at} {text}"
            entities.append({"type": "mention", "text": at,
                             "mentioned": {"id": BOT_ID, "name": BOT_NAME}})  # fmt: skip
        activity: dict[str, Any] = {
            "type": "message", "id": activity_id, "channelId": "msteams",
            "serviceUrl": self.service_url, "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "from": {"id": user, "name": name or user, "aadObjectId": f"aad-{user}"},
            "recipient": {"id": BOT_ID, "name": BOT_NAME},
            "conversation": {"id": conversation, "conversationType": TYPES[where],
                             "tenantId": TENANT},
            "channelData": {"tenant": {"id": TENANT}}, "text": text, "entities": entities,
        }  # fmt: skip
        if value is not None:
            activity["value"], activity["text"] = value, ""
        if reply_to:
            activity["replyToId"] = reply_to
        self.deliver(activity, forge=forge)
        return activity_id

    def accept_file(self, consent: dict[str, Any], user: str = "29:ann") -> str:
        """The user allows the file a consent card (a `sent` record) offers: the invoke."""
        card = consent["attachments"][0]
        n = next(self._numbers)
        upload = {"contentUrl": f"{self.url}/files/{n}", "name": card["name"],
                  "uploadUrl": f"{self.url}/upload/{n}", "fileType": card["name"].rsplit(".")[-1],
                  "uniqueId": f"unique-{n}"}  # fmt: skip
        activity = {
            "type": "invoke", "name": "fileConsent/invoke", "id": f"f:{n}",
            "channelId": "msteams", "serviceUrl": self.service_url,
            "from": {"id": user}, "recipient": {"id": BOT_ID},
            "conversation": {"id": consent["conversation"], "conversationType": "personal"},
            "replyToId": consent["id"],
            "value": {"type": "fileUpload", "action": "accept",
                      "context": card["content"]["acceptContext"], "uploadInfo": upload},
        }  # fmt: skip
        self.deliver(activity)
        return str(activity["id"])

    def deliver(self, activity: dict[str, Any], forge: str | None = None) -> None:
        """POST `activity` to hermes from a thread, retried until a 2xx (a forgery once)."""
        lane = str(activity.get("conversation", {}).get("id", "")).partition(";")[0]
        with self._cond:
            self._activities[str(activity.get("id"))] = copy_json(activity)
            lock = self._lanes.setdefault(lane, threading.Lock())
        threading.Thread(target=self._deliver, args=(copy_json(activity), forge, lock),
                         daemon=True).start()  # fmt: skip

    def deliver_again(self, activity_id: str) -> None:
        """The same activity once more (the connector retries what it could not confirm)."""
        with self._cond:
            activity = self._activities[activity_id]
        self.deliver(activity)

    def _deliver(self, activity: dict[str, Any], forge: str | None, lock: threading.Lock) -> None:
        with lock:
            wait = self.retry_initial
            for attempt in range(1, (1 if forge else self.retry_max_tries) + 1):
                with self._cond:
                    self._cond.wait_for(lambda: self.webhook_url or self._closing)
                    url, closing = self.webhook_url, self._closing
                if closing:
                    return
                token = self.token_for(str(activity["serviceUrl"]), forge)
                if forge == "channel":  # a real token over an activity of another channel
                    activity = {**activity, "channelId": "webchat"}
                record: dict[str, Any] = {"id": activity["id"], "attempt": attempt}
                try:
                    auth = {"authorization": f"Bearer {token}"}
                    response = self._client.post(str(url), json=activity, headers=auth)
                    record["status_code"] = response.status_code
                except httpx.HTTPError as exc:
                    record["error"] = type(exc).__name__
                with self._cond:
                    record["at"] = time.monotonic()
                    self._deliveries.append(record)
                    self._cond.notify_all()
                    if 200 <= record.get("status_code", 0) < 300:
                        return
                    self._cond.wait_for(lambda: self._closing, wait)
                wait *= 2

    def wait_delivered(self, activity_id: str, timeout: float = 30.0) -> dict[str, Any]:
        """The 2xx attempt of an activity's delivery, once there is one."""
        [done] = self._wait_records("_deliveries", 1, timeout, f"{activity_id} delivered",
                                    lambda d: d["id"] == activity_id
                                    and 200 <= d.get("status_code", 0) < 300)  # fmt: skip
        return done

    def wait_attempts(self, activity_id: str, count: int = 1, timeout: float = 30.0) -> list:
        """The delivery attempts of an activity, once there are `count`."""
        return self._wait_records("_deliveries", count, timeout, f"{count} tries of {activity_id}",
                                  lambda d: d["id"] == activity_id)  # fmt: skip

    def wait_uploads(self, count: int = 1, timeout: float = 30.0) -> list[dict[str, Any]]:
        return self._wait_records("_uploads", count, timeout, f"{count} upload(s)")

    def _internal_error(self) -> Reply:
        return Reply(500, {"error": {"code": "ServiceError", "message": "fake failed"}})


def event_id(activity_id: str, user: str = "29:ann", where: str = "personal",
             thread: str | None = None) -> str:  # fmt: skip
    """The id hermes admits a message under: its conversation's and its own."""
    if where == "personal":
        return f"{personal(user)}/{activity_id}"
    if where == "group":
        return f"{GROUP}/{activity_id}"
    return f"{CHANNEL};messageid={thread or activity_id}/{activity_id}"


if __name__ == "__main__":
    serve_until_killed(FakeTeams())
