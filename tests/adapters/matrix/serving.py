"""`hermes serve` as a real process with its Matrix adapter against the fake homeserver
(tests/fakes/matrix.py), its encryption state sealed with a test pickle key; Alice
talks to it from a client that encrypts as Element does (tests/fakes/matrix_client.py)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from tests.adapters.serving import Serve
from tests.fakes.matrix import ALICE, ALICE_DEVICE, ALICE_TOKEN, HERMES, HERMES_TOKEN, FakeMatrix
from tests.fakes.matrix_client import ElementClient

TOKEN_VAR = "MATRIX_TOKEN"
PICKLE_VAR = "MATRIX_PICKLE_KEY"
PICKLE_KEY = "a passphrase the operator keeps"


class MatrixServe(Serve):
    """Serve with `platforms.matrix` on the fake; Alice may talk, in groups when she
    mentions hermes."""

    name = "matrix"
    access = f"    allowed_users: ['{ALICE}']\n    owner: '{ALICE}'\n    group_policy: open\n"

    def tokens(self) -> dict[str, str]:
        return {TOKEN_VAR: HERMES_TOKEN, PICKLE_VAR: PICKLE_KEY}

    def settings(self) -> str:
        return (
            f"    token_env: {TOKEN_VAR}\n    pickle_key_env: {PICKLE_VAR}\n"
            f"    base_url: '{self.platform.url}'\n    user_id: '{HERMES}'\n"
            "    sync_timeout: 1\n"  # a silent sync is replaced after 16 s
        )


@contextlib.contextmanager
def element(hs: FakeMatrix) -> Iterator[ElementClient]:
    """Alice's client, its keys published."""
    with ElementClient(hs.url, ALICE, ALICE_TOKEN, ALICE_DEVICE) as client:
        client.start()
        yield client
