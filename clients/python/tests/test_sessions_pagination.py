"""Sessions (sign in, refresh before expiry, transparently) and pagination across pages."""
from __future__ import annotations

import pytest

from conftest import OWNER_EMAIL, OWNER_PASSWORD, unique
from steward_client import AuthenticationError, BadRequestError, Page, Steward, StewardError


def test_sign_in_then_refresh_before_expiry(live):
    client = Steward(api_key=None, base_url=live.url)
    with pytest.raises(StewardError, match="No credential"):
        client.organization.get()
    answer = client.sign_in(OWNER_EMAIL, OWNER_PASSWORD)
    assert answer["organization_id"] == live.org_id and answer["role"] == "owner"
    assert "access_token" not in answer and "refresh_token" not in answer
    assert repr(client).endswith("session)")
    first = client._session.access_token
    assert client.organization.get()["organization_id"] == live.org_id
    assert client._session.access_token == first
    # Near expiry: the next request refreshes first, and carries the new token.
    client._session.refresh_at = 0
    assert client.organization.get()["organization_id"] == live.org_id
    assert client._session.access_token != first and client._session.refresh_at > 0
    assert first not in repr(client) and client._session.access_token not in repr(client)


def test_a_token_refused_early_is_refreshed_once(live, monkeypatch):
    monkeypatch.setenv("STEWARD_API_KEY", live.owner_key)
    client = Steward.signed_in(OWNER_EMAIL, OWNER_PASSWORD, base_url=live.url)
    assert client._api_key is None  # a signed-in client never falls back to the environment's key
    client._session.access_token = "stw_at_" + "a" * 39  # as if revoked under our feet
    assert client.organization.get()["organization_id"] == live.org_id


def test_wrong_password_is_refused(live):
    with pytest.raises((AuthenticationError, BadRequestError)) as e:
        Steward(api_key=None, base_url=live.url).sign_in(OWNER_EMAIL, "wrong password!!")
    assert OWNER_PASSWORD not in str(e.value) and "wrong password" not in str(e.value)


def test_iteration_follows_next_cursor_across_pages(steward):
    prefix = unique("page")
    made = [steward.agents.create(f"{prefix}-{i}")["agent_id"] for i in range(5)]
    seen = []
    pages = list(steward.agents.list(limit=2).pages())
    assert all(isinstance(p, Page) for p in pages)
    assert len(pages) >= 3 and all(len(p.items) == 2 for p in pages[:-1]) and len(pages[-1].items) in (1, 2)
    assert all(p.next_cursor for p in pages[:-1]) and pages[-1].next_cursor is None
    for agent in steward.agents.list(limit=2):
        seen.append(agent["agent_id"])
    # Newest first: the five just made lead, in reverse order of creation.
    assert seen[:5] == made[::-1]
    assert len(seen) == len(set(seen)) == sum(len(p.items) for p in pages)
    first = steward.agents.list(limit=2).page()
    second = steward.agents.list(limit=2).page(first.next_cursor)
    assert [a["agent_id"] for a in first.items + second.items] == made[::-1][:4]
    assert len(steward.agents.list(limit=2).to_list(3)) == 3
