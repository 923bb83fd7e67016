"""The fake Teams's own checks: it grants tokens only for the app's secret, its connector
takes only those tokens, and what it signs verifies against the keys it publishes (and
its forgeries do not)."""

from __future__ import annotations

import httpx
import jwt
import pytest

from tests.fakes.teams import APP_ID, ISSUER, SCOPE, SECRET, FakeTeams, personal


@pytest.fixture
def fake():
    with FakeTeams() as running:
        yield running


def _grant(fake: FakeTeams, secret: str = SECRET) -> httpx.Response:
    form = {"grant_type": "client_credentials", "client_id": APP_ID, "client_secret": secret,
            "scope": SCOPE}  # fmt: skip
    return httpx.post(f"{fake.url}/botframework.com/oauth2/v2.0/token", data=form)


def _verify(fake: FakeTeams, token: str) -> dict:
    keys = httpx.get(httpx.get(fake.openid_url).json()["jwks_uri"]).json()["keys"]
    kid = jwt.get_unverified_header(token)["kid"]
    [jwk] = [k for k in keys if k["kid"] == kid]
    assert jwk["endorsements"] == ["msteams"]
    return jwt.decode(token, jwt.PyJWK(jwk).key, algorithms=["RS256"], audience=APP_ID,
                      issuer=ISSUER)  # fmt: skip


def test_a_token_is_granted_for_the_secret_only_and_revoked_with_it(fake):
    assert _grant(fake, "wrong").json()["error"] == "invalid_client"
    token = _grant(fake).json()["access_token"]
    url = f"{fake.service_url}v3/conversations/{personal('29:ann')}/activities"
    sent = httpx.post(url, json={"type": "message", "text": "hi"},
                      headers={"authorization": f"Bearer {token}"})  # fmt: skip
    assert sent.status_code == 201 and fake.sent[0]["text"] == "hi"
    fake.revoke_secret()
    again = httpx.post(url, json={"type": "message", "text": "hi"},
                       headers={"authorization": f"Bearer {token}"})  # fmt: skip
    assert again.status_code == 401
    refused = _grant(fake)
    assert refused.status_code == 400 and "AADSTS7000222" in refused.json()["error_description"]


def test_what_it_signs_verifies_and_its_forgeries_do_not(fake):
    claims = _verify(fake, fake.token_for(fake.service_url))
    assert claims["serviceurl"] == fake.service_url
    for forge, error in (("signature", jwt.InvalidSignatureError),
                         ("audience", jwt.InvalidAudienceError),
                         ("expired", jwt.ExpiredSignatureError)):  # fmt: skip
        with pytest.raises(error):
            _verify(fake, fake.token_for(fake.service_url, forge))
    with pytest.raises(ValueError):  # no published key has its id
        _verify(fake, fake.token_for(fake.service_url, "kid"))
    kid = fake.rotate_keys()
    rotated = fake.token_for(fake.service_url)
    assert jwt.get_unverified_header(rotated)["kid"] == kid and _verify(fake, rotated)


def test_edits_faults_and_the_size_limit(fake):
    token = _grant(fake).json()["access_token"]
    auth = {"authorization": f"Bearer {token}"}
    url = f"{fake.url}/v3/conversations/{personal('29:ann')}/activities"
    first = httpx.post(url, json={"type": "message", "text": "one"}, headers=auth).json()["id"]
    edited = httpx.put(f"{url}/{first}", json={"type": "message", "text": "two"}, headers=auth)
    assert edited.status_code == 200
    assert [m["text"] for m in fake.messages_in(personal("29:ann"))] == ["two"]
    fake.fail(429, retry_after=7)
    limited = httpx.post(url, json={"type": "message", "text": "x"}, headers=auth)
    assert (limited.status_code, limited.headers["retry-after"]) == (429, "7")
    big = httpx.post(url, json={"type": "message", "text": "x" * 40_001}, headers=auth)
    assert big.json()["error"]["code"] == "MessageSizeTooBig"
    assert httpx.put(f"{url}/nope", json={"text": "x"}, headers=auth).status_code == 404
