"""Every method against the live server: one real call each, asserting what it answers."""
from __future__ import annotations

import time

import pytest

from conftest import OWNER_EMAIL, unique
from steward_client import ConflictError, NotFoundError, Page, Paginator


@pytest.fixture(scope="module")
def agent(steward):
    return steward.agents.create(unique("res-agent"), display_name="Resource bot", labels={"team": "py"})


def test_agents(steward, agent):
    assert agent["status"] == "active" and agent["labels"] == {"team": "py"}
    assert steward.agents.get(agent["agent_id"])["handle"] == agent["handle"]
    assert steward.agents.update(agent["agent_id"], description="changed")["description"] == "changed"
    assert steward.agents.suspend(agent["agent_id"])["status"] == "suspended"
    assert steward.agents.activate(agent["agent_id"])["status"] == "active"
    listed = steward.agents.list(status="active")
    assert isinstance(listed, Paginator)
    assert agent["agent_id"] in [a["agent_id"] for a in listed]
    assert isinstance(steward.agents.capabilities(agent["agent_id"]), list)
    key = steward.agents.create_key(agent["agent_id"], name="bot key")
    assert key["api_key"].startswith("stw_key_")
    bot = Steward_for(steward, key["api_key"])
    assert isinstance(bot.agents.my_capabilities(), list)
    gone = steward.agents.create(unique("gone"))
    assert steward.agents.delete(gone["agent_id"]) is None
    with pytest.raises(NotFoundError):
        steward.agents.get(gone["agent_id"])


def Steward_for(client, key):
    from steward_client import Steward

    return Steward(api_key=key, base_url=client.base_url)


def test_decisions(steward, agent):
    decision = steward.decisions.decide("res.nothing", agent=agent["handle"], resource="thing/1", args={"n": 1}, context={"k": "v"})
    assert decision["decision"] == "deny"
    assert decision["reasons"] == [{"rule": "default_decision"}]
    logged = steward.decisions.get(decision["decision_id"])
    assert (logged["action"], logged["resource"], logged["args"], logged["context"]) == ("res.nothing", "thing/1", {"n": 1}, {"k": "v"})
    assert decision["decision_id"] in [d["decision_id"] for d in steward.decisions.list(agent=agent["handle"], limit=10)]
    simulated = steward.decisions.simulate("res.nothing", agent=agent["handle"], policies=[{"effect": "allow", "actions": ["res.*"]}])
    assert simulated["decision"] == "allow" and simulated["decision_id"] is None
    # The same idempotency key answers the first decision again.
    first = steward.decisions.decide("res.same", agent=agent["handle"], idempotency_key="res-key-1")
    again = steward.decisions.decide("res.same", agent=agent["handle"], idempotency_key="res-key-1")
    assert again == first
    with pytest.raises(ConflictError):
        steward.decisions.decide("res.other", agent=agent["handle"], idempotency_key="res-key-1")
    toolhive = steward.decisions.toolhive("mcp:tool:call", f"mrn:mcp:{agent['handle']}:tool:echo", principal={"sub": "ada@py-client.example"}, probe=True)
    assert (toolhive["allow"], toolhive["decision"]) == (False, "deny")


def test_policies(steward):
    name = unique("res-policy")
    policy = steward.policies.create(name=name, effect="allow", actions=["res.policy.*"])
    pid = policy["policy_id"]
    assert steward.policies.get(pid)["name"] == name
    assert steward.policies.update(pid, description="v2")["version"] == 2
    versions = steward.policies.versions.list(pid).to_list()
    assert [v["version"] for v in versions] == [2, 1]
    assert steward.policies.versions.get(pid, 1)["description"] in (None, "")
    rolled = steward.policies.rollback(pid, 1)
    assert rolled["version"] == 3 and rolled["description"] in (None, "")
    assert pid in [p["policy_id"] for p in steward.policies.list()]
    replay = steward.policies.replay([{"name": "all", "effect": "allow", "actions": ["*"]}])
    assert set(replay) >= {"evaluated", "changed", "sample"}
    assert steward.policies.delete(pid) is None
    assert steward.policies.get(pid)["archived"] is True
    assert pid in [p["policy_id"] for p in steward.policies.list(archived=True)]


def test_organization(steward, live):
    org = steward.organization.get()
    changed = steward.organization.update(name="Python client")
    assert changed["organization_id"] == live.org_id == org["organization_id"]


def test_keys(steward):
    key = steward.keys.create("viewer", name=unique("res-key"))
    assert key["api_key"].startswith("stw_key_") and key["role"] == "viewer"
    assert key["key_id"] in [k["key_id"] for k in steward.keys.list()]
    assert steward.keys.get(key["key_id"])["prefix"] == key["api_key"][:14]
    assert "api_key" not in steward.keys.get(key["key_id"])
    rotated = steward.keys.rotate(key["key_id"])
    assert rotated["api_key"] != key["api_key"]
    assert steward.keys.revoke(rotated["key_id"]) is None


def test_members_and_invitations(steward):
    members = steward.members.list()
    owner = next(m for m in members if m["email"] == OWNER_EMAIL)
    assert owner["role"] == "owner"
    email = unique("invitee") + "@py-client.example"
    invitation = steward.invitations.create(email, role="viewer")
    assert invitation["token"].startswith("stw_inv_")
    assert email in [i["email"] for i in steward.invitations.list()]
    accepted = steward.invitations.accept(invitation["token"], "a long enough password")
    assert accepted["role"] == "viewer"
    joined = next(m for m in steward.members.list() if m["email"] == email)
    assert steward.members.update(joined["user_id"], role="member")["role"] == "member"
    assert steward.members.remove(joined["user_id"]) is None
    other = steward.invitations.create(unique("revoked") + "@py-client.example", role="viewer")
    assert steward.invitations.revoke(other["invitation_id"]) is None
    assert other["invitation_id"] not in [i["invitation_id"] for i in steward.invitations.list()]


def test_audit(steward):
    events = steward.audit.list(limit=5).page()
    assert isinstance(events, Page) and len(events.items) == 5
    assert all("type" in e for e in events)
    typed = steward.audit.list(type=["agent.created"]).to_list(3)
    assert typed and {e["type"] for e in typed} == {"agent.created"}
    assert steward.audit.verify()["ok"] is True


def test_webhooks(steward):
    hook = steward.webhooks.create("https://hooks.example.com/steward", ["decision.denied"], description="py")
    assert hook["secret"].startswith("whsec_")
    wid = hook["webhook_id"]
    assert steward.webhooks.get(wid)["url"] == "https://hooks.example.com/steward"
    assert wid in [w["webhook_id"] for w in steward.webhooks.list()]
    assert steward.webhooks.deliveries.list(wid).to_list() == []
    with pytest.raises(NotFoundError):
        steward.webhooks.deliveries.get(wid, "00000000-0000-4000-8000-000000000000")
    with pytest.raises(NotFoundError):
        steward.webhooks.deliveries.replay(wid, "00000000-0000-4000-8000-000000000000")
    assert steward.webhooks.delete(wid) is None


def test_mcp_servers(steward):
    server = steward.mcp.servers.create(unique("upstream"), "https://mcp.example.com/mcp", headers={"X-Token": "t"})
    sid = server["server_id"]
    assert steward.mcp.servers.get(sid)["url"] == "https://mcp.example.com/mcp"
    assert steward.mcp.servers.update(sid, enabled=False)["enabled"] is False
    assert sid in [s["server_id"] for s in steward.mcp.servers.list()]
    assert steward.mcp.servers.delete(sid) is None


def test_leads(steward):
    assert isinstance(steward.leads.demo_requests().to_list(), list)
    assert isinstance(steward.leads.newsletter(q="nobody").to_list(), list)


def test_auth(live, steward):
    token = steward.auth.login(OWNER_EMAIL, "correct horse battery staple")
    assert token["token_type"] == "Bearer" and token["organization_id"] == live.org_id
    fresh = steward.auth.refresh(token["refresh_token"])
    assert fresh["access_token"] != token["access_token"]
    by_key = steward.auth.login(api_key=live.owner_key)
    assert by_key["access_token"].startswith("stw_at_")


def test_usage_and_reports(steward, agent, live):
    assert isinstance(steward.agents.usage(agent["agent_id"]), dict)
    key = steward.agents.create_key(agent["agent_id"])["api_key"]
    assert isinstance(live.client(key).agents.my_usage(), dict)
    assert steward.reports.decisions(bucket="day", group="outcome", tz="Europe/Paris")["tz"] == "Europe/Paris"
    assert set(steward.reports.denials(limit=5)) >= {"from", "to", "agents", "actions"}
    assert "pending" in steward.reports.approvals()
    assert "policies" in steward.reports.policies()
    policy = steward.policies.create(name=unique("report"), effect="allow", actions=["report.*"])
    assert isinstance(steward.reports.policy(policy["policy_id"], bucket="hour"), dict)
    assert "agents" in steward.reports.agents(from_="2026-01-01T00:00:00Z")
    assert "per_day" in steward.reports.leads()


def test_lead_lists_spam_outbox_and_people(steward):
    lists = steward.leads.lists.list()
    assert [entry["list"] for entry in lists["lists"]] == ["demo-requests", "newsletter"]
    assert steward.leads.lists.get("newsletter")["list"] == "newsletter"
    assert steward.leads.lists.update("newsletter", consent_text="Yes, send me news", consent_version="v1")["consent_version"] == "v1"
    assert steward.leads.lists.update_spam_settings("newsletter", honeypot_field="website")["honeypot_field"] == "website"
    assert steward.leads.lists.spam_settings("newsletter")["honeypot_field"] == "website"
    # Each process may keep a list's spam settings for 2 s (documented): wait them out.
    changed_at = time.monotonic()
    assert isinstance(steward.leads.outbox(status="pending").to_list(), list)
    time.sleep(max(0.0, 2.2 - (time.monotonic() - changed_at)))
    email = unique("lead") + "@py-client.example"
    steward.request("POST", "/newsletter", json_body={"email": email, "website": "http://spam.example"}, auth=False)
    spam = [s for s in steward.leads.spam.list(list="newsletter") if email in json_text(s)]
    assert len(spam) == 1
    steward.leads.spam.restore(spam[0].get("id") or spam[0].get("spam_id"))
    assert [lead["email"] for lead in steward.leads.newsletter(q=email)] == [email]
    exported = steward.leads.people.export(email)
    assert exported["email"] == email and exported["records"]
    steward.leads.people.erase(email)
    assert steward.leads.newsletter(q=email).to_list() == []
    assert len(steward.leads.people.erasures(email)["erasures"]) == 1


def json_text(value):
    import json

    return json.dumps(value)
