"""`hermes serve` as a real process with inbound webhooks beside its Telegram adapter (the
fake Bot API, where the routes' answers go): the routes the tests post to, signed as their
senders sign, over real HTTP to serve's webhook listener."""

from __future__ import annotations

import hashlib
import hmac
import json
import subprocess
import uuid
from typing import Any

import httpx
import yaml

from hermes.adapters.contract import ChatType, InboundEvent
from tests.adapters.serving import in_thread
from tests.adapters.telegram.serving import ANN, TelegramServe

HOME_CHAT = -100777  # Telegram's home channel, where the `alerts` route answers
SECRETS = {"WEBHOOK_CI_SECRET": "ci-secret-4f1b", "WEBHOOK_ALERTS_SECRET": "alerts-secret-9c2e"}
ROUTES: dict[str, dict[str, Any]] = {
    "ci": {  # GitHub's form, answered in Ann's chat
        "secret_env": "WEBHOOK_CI_SECRET",
        "prompt": "CI on {repository.full_name}: {workflow_run.name} {workflow_run.conclusion}",
        "deliver": f"telegram:{ANN}",
    },
    "alerts": {  # the generic form, answered in the home channel
        "secret_env": "WEBHOOK_ALERTS_SECRET",
        "signature": "generic",
        "prompt": "Alert {alert.name}: {alert.summary}",
        "deliver": "home:telegram",
        "role": "owner",  # an owner's turns, yet on text from outside
    },
    "form": {  # generic, id the body's hash, answered nowhere
        "secret_env": "WEBHOOK_ALERTS_SECRET",
        "signature": "generic",
        "prompt": "{message}",  # a body that is a command is not one
        "deliver": "none",
    },
}


def event_of(route: str, text: str = "hello") -> InboundEvent:
    """An event of `route` as the adapter makes it (for tests of what reads it)."""
    return InboundEvent("webhook", f"{route}:1", ChatType.DM, route, route, text)


def github_delivery(body: dict[str, Any], secret: str = SECRETS["WEBHOOK_CI_SECRET"],
                    delivery: str | None = None,
                    event: str = "workflow_run") -> tuple[bytes, dict[str, str]]:  # fmt: skip
    """A delivery as GitHub sends it: the raw body and its headers (signed with `secret`)."""
    raw = json.dumps(body).encode()
    digest = hmac.new(secret.encode(), raw, hashlib.sha256).hexdigest()
    return raw, {
        "Content-Type": "application/json",
        "User-Agent": "GitHub-Hookshot/abc123",
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
        "X-Hub-Signature-256": f"sha256={digest}",
    }


def generic_delivery(body: dict[str, Any] | bytes, secret: str = SECRETS["WEBHOOK_ALERTS_SECRET"],
                     **headers: str) -> tuple[bytes, dict[str, str]]:  # fmt: skip
    """A delivery signed in the generic form (bare hex in X-Signature-256)."""
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    digest = hmac.new(secret.encode(), raw, hashlib.sha256).hexdigest()
    return raw, {"Content-Type": "application/json", "X-Signature-256": digest, **headers}


class WebhookServe(TelegramServe):
    """Serve with `platforms.webhook` (ROUTES) beside Telegram (whose home channel is
    HOME_CHAT), its webhook listener on a free port."""

    def tokens(self) -> dict[str, str]:
        return {**super().tokens(), **SECRETS}

    def configure(self, *args, gateway: str = "", **kwargs) -> None:
        super().configure(*args, gateway="  webhooks: {port: 0}\n" + gateway, **kwargs)
        config = yaml.safe_load(self.home.config_path.read_text())
        config["platforms"]["telegram"]["home_channel"] = str(HOME_CHAT)
        config["platforms"]["webhook"] = {"routes": ROUTES}
        self.home.config_path.write_text(yaml.safe_dump(config))

    def start(self, *args: str) -> subprocess.Popen[str]:
        proc = super().start(*args)
        self.hooks = int(self.home.webhooks_port.read_text())
        return proc

    async def post(self, route: str, delivery: tuple[bytes, dict[str, str]]) -> httpx.Response:
        """POST a delivery to `route` on the webhook listener; its answer."""
        raw, headers = delivery
        url = f"http://127.0.0.1:{self.hooks}/webhooks/webhook/{route}"
        return await in_thread(lambda: httpx.post(url, content=raw, headers=headers, timeout=30))
