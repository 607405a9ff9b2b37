"""Error classes (each from the live server where it can produce them, else from a stub),
retries with backoff and Retry-After, and idempotency keys held across attempts."""
from __future__ import annotations

import time

import pytest

from conftest import unique
from stub import Stub, closed_port_url
from steward_client import (
    APIConnectionError, APIStatusError, APITimeoutError, AuthenticationError, BadRequestError, ConflictError, NotFoundError,
    PayloadTooLargeError, PermissionDeniedError, RateLimitError, ServerError, Steward, StewardError, UnprocessableEntityError,
)

DENY = {"decision_id": "d1", "decision": "deny", "reasons": [{"rule": "default_decision"}], "approval": None}


@pytest.fixture
def stub():
    made = []

    def make(answers, delay=0.0, keep_alive=False):
        s = Stub(answers, delay, keep_alive)
        made.append(s)
        return s

    yield make
    for s in made:
        s.close()


def recorded_sleeps(client):
    slept = []
    client._sleep = slept.append
    return slept


def test_status_classes_from_the_live_server(live, steward):
    cases = []
    with pytest.raises(BadRequestError) as e:
        steward.agents.create("Not A Handle!")
    cases.append(e.value)
    with pytest.raises(AuthenticationError) as e:
        live.client("stw_key_" + "a" * 39).organization.get()
    cases.append(e.value)
    viewer = live.client(steward.keys.create("viewer", name=unique("viewer"))["api_key"])
    with pytest.raises(PermissionDeniedError) as e:
        viewer.agents.create(unique("nope"))
    cases.append(e.value)
    with pytest.raises(NotFoundError) as e:
        steward.agents.get("00000000-0000-4000-8000-000000000000")
    cases.append(e.value)
    handle = unique("dup")
    steward.agents.create(handle)
    with pytest.raises(ConflictError) as e:
        steward.agents.create(handle)
    cases.append(e.value)
    with pytest.raises(PayloadTooLargeError) as e:
        steward.agents.create(unique("big"), description="x" * 2_000_000)
    cases.append(e.value)
    with pytest.raises(APIStatusError) as e:
        steward.request("POST", "/members", json_body={})
    assert type(e.value) is APIStatusError
    cases.append(e.value)
    assert [c.status for c in cases] == [400, 401, 403, 404, 409, 413, 405]
    for error in cases:
        assert isinstance(error, APIStatusError) and isinstance(error, StewardError)
        assert error.error and error.request_id, error
        assert live.owner_key not in str(error) and live.owner_key not in repr(error.body)


def test_rate_limit_and_server_errors(stub):
    s = stub([(429, {"retry-after": "7"}, {"status": "Too Many Requests", "error": "Slow down"})])
    client = Steward(api_key="stw_key_secret", base_url=s.url, max_retries=0)
    with pytest.raises(RateLimitError) as e:
        client.organization.get()
    assert (e.value.status, e.value.error, e.value.retry_after, e.value.request_id) == (429, "Slow down", 7.0, "req-1")
    s = stub([(422, {}, {"status": "Unprocessable Content", "error": "No"})])
    with pytest.raises(UnprocessableEntityError) as e:
        Steward(api_key="k", base_url=s.url, max_retries=0).organization.get()
    assert (e.value.status, e.value.error) == (422, "No")
    s = stub([(502, {}, None)])
    with pytest.raises(ServerError) as e:
        Steward(api_key="k", base_url=s.url, max_retries=0).organization.get()
    assert (e.value.status, e.value.error) == (502, "HTTP 502")


def test_connection_and_timeout_errors(stub):
    client = Steward(api_key="stw_key_secret", base_url=closed_port_url(), max_retries=1)
    slept = recorded_sleeps(client)
    with pytest.raises(APIConnectionError) as e:
        client.organization.get()
    assert not isinstance(e.value, APITimeoutError)
    assert len(slept) == 1 and "stw_key_secret" not in str(e.value)
    s = stub([(200, {}, {})], delay=2.0)
    with pytest.raises(APITimeoutError):
        Steward(api_key="k", base_url=s.url, timeout=0.3, max_retries=0).organization.get()


def test_decide_retries_429_then_503_then_answers_with_one_idempotency_key(stub):
    s = stub([
        (429, {"retry-after": "1"}, {"status": "Too Many Requests", "error": "Slow down"}),
        (503, {"retry-after": "0"}, {"status": "Service Unavailable", "error": "The decision could not be recorded"}),
        (200, {}, DENY),
    ])
    client = Steward(api_key="stw_key_secret", base_url=s.url)
    slept = recorded_sleeps(client)
    assert client.decisions.decide("payments.refund", args={"amount": 1}) == DENY
    assert len(s.requests) == 3
    keys = {r["body"]["idempotency_key"] for r in s.requests}
    assert len(keys) == 1 and next(iter(keys)).startswith("py-")
    assert slept == [1.0, 0.0]
    assert [r["headers"].get("x-steward-retry-count") for r in s.requests] == [None, "1", "2"]
    assert all(r["headers"]["authorization"] == "Bearer stw_key_secret" for r in s.requests)
    # A key the caller gives is the one sent, on every attempt.
    s2 = stub([(503, {}, {"error": "x"}), (200, {}, DENY)])
    c2 = Steward(api_key="k", base_url=s2.url)
    recorded_sleeps(c2)
    c2.decisions.decide("a.b", idempotency_key="mine")
    assert [r["body"]["idempotency_key"] for r in s2.requests] == ["mine", "mine"]


def test_backoff_is_exponential_with_jitter_and_retries_stop_at_max(stub):
    s = stub([(500, {}, {"error": "boom"})])
    client = Steward(api_key="k", base_url=s.url, max_retries=2)
    slept = recorded_sleeps(client)
    with pytest.raises(ServerError):
        client.agents.list().page()
    assert len(s.requests) == 3
    assert 0.375 <= slept[0] <= 0.5 and 0.75 <= slept[1] <= 1.0


def test_no_retry_without_an_idempotency_key_or_past_the_retry_after_cap(stub):
    s = stub([(503, {}, {"error": "busy"}), (201, {}, {"agent_id": "a"})])
    client = Steward(api_key="k", base_url=s.url)
    recorded_sleeps(client)
    with pytest.raises(ServerError):
        client.agents.create("bot")
    assert len(s.requests) == 1
    s = stub([(503, {}, {"error": "busy"}), (200, {}, DENY)])
    client = Steward(api_key="k", base_url=s.url)
    recorded_sleeps(client)
    with pytest.raises(ServerError):
        client.decisions.decide("a.b", idempotency_key=False)
    assert len(s.requests) == 1 and "idempotency_key" not in s.requests[0]["body"]
    s = stub([(429, {"retry-after": "3600"}, {"error": "later"}), (200, {}, {})])
    client = Steward(api_key="k", base_url=s.url)
    recorded_sleeps(client)
    with pytest.raises(RateLimitError) as e:
        client.organization.get()
    assert len(s.requests) == 1 and e.value.retry_after == 3600.0
    # 408 is retried like 429.
    s = stub([(408, {}, {"error": "slow"}), (200, {}, {"organization_id": "o"})])
    client = Steward(api_key="k", base_url=s.url)
    recorded_sleeps(client)
    assert client.organization.get() == {"organization_id": "o"}


def test_secrets_stay_out_of_urls_repr_and_messages(stub, monkeypatch):
    monkeypatch.setenv("STEWARD_API_KEY", "stw_key_fromenv")
    s = stub([(404, {}, {"status": "Not Found", "error": "Agent not found"})])
    monkeypatch.setenv("STEWARD_BASE_URL", s.url)
    client = Steward()
    assert "stw_key_fromenv" not in repr(client) and "***" in repr(client)
    with pytest.raises(NotFoundError) as e:
        client.agents.get("x")
    assert "stw_key_fromenv" not in str(e.value)
    assert "stw_key" not in s.requests[0]["path"]
    assert s.requests[0]["headers"]["authorization"] == "Bearer stw_key_fromenv"
    assert Steward(api_key="other", base_url=s.url)._api_key == "other"
    with pytest.raises(ValueError):
        Steward(api_key="k", base_url="http://user:pw@example.com")
    # Ids are one escaped path segment: no way to reach another route through them.
    with pytest.raises(NotFoundError):
        client.agents.get("a/../../keys")
    assert s.requests[-1]["path"] == "/agents/a%2F..%2F..%2Fkeys"


def test_connections_are_kept_alive_and_replaced_once_the_server_closed_them(stub, monkeypatch):
    s = stub([(200, {}, {"organization_id": "o"})], keep_alive=True)
    client = Steward(api_key="k", base_url=s.url)
    client.organization.get()
    client.organization.get()
    assert len({r["port"] for r in s.requests}) == 1
    # The server closes after its answer: the idle socket shows it, a new connection is opened.
    s.close_after_answer = True
    client.organization.get()
    time.sleep(0.1)
    client.organization.get()
    assert len({r["port"] for r in s.requests}) == 2
    # Closed without the client seeing it before writing (a race): the request, which the server
    # never read, goes once more on a new connection, a POST included.
    import steward_client._transport as transport

    monkeypatch.setattr(transport, "_dropped", lambda sock: sock is None)
    time.sleep(0.1)
    assert client.agents.create("bot") == {"organization_id": "o"}
    assert [r["method"] for r in s.requests].count("POST") == 1
    assert len({r["port"] for r in s.requests}) == 3
    client.close()
