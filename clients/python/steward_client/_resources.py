"""The API's routes as methods, one namespace per resource. Every method sends one request (with
the client's retries) and answers the decoded JSON; list methods answer a lazy :class:`Paginator`.
Unknown keyword arguments of create and update methods are sent as body fields, so a field the
server adds later can be used before this client knows it by name."""
from __future__ import annotations

import time
import uuid
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, TypeVar, Union

from ._base import BaseClient, Paginator, path_param as _p
from ._errors import ApprovalTimeout
from .types import (
    Agent, ApiKey, Approval, AuditEvent, AuditVerification, Capability, Decision, Invitation, Lead,
    LoggedDecision, McpServer, Member, Organization, Policy, PolicyApply, PolicyPlan, Replay, Token,
    Webhook, WebhookDelivery,
)

F = TypeVar("F", bound=Callable[..., Any])

#: ``idempotency_key`` value that sends none (so a failed decision is not retried).
NO_KEY = False


def paginated(fn: F) -> F:
    """Marks a method that answers a Paginator (the async client wraps those differently)."""
    fn._paginated = True  # type: ignore[attr-defined]
    return fn


def _body(fields: Mapping[str, Any], extra: Mapping[str, Any]) -> Dict[str, Any]:
    out = {k: v for k, v in fields.items() if v is not None}
    out.update(extra)
    return out


class Namespace:
    def __init__(self, client: BaseClient) -> None:
        self._c = client

    def __repr__(self) -> str:
        return f"<{type(self).__name__}>"


class Auth(Namespace):
    """Tokens. To make this client act as a signed-in person, use ``Steward.sign_in``."""

    def login(self, email: Optional[str] = None, password: Optional[str] = None, *, organization_id: Optional[str] = None, api_key: Optional[str] = None) -> Token:
        """``POST /auth/login``: exchanges a password (or an API key) for a token pair; does not
        change this client's credential."""
        body = _body({"email": email, "password": password, "organization_id": organization_id, "api_key": api_key}, {})
        return self._c.request("POST", "/auth/login", json_body=body, auth=False).body

    def refresh(self, refresh_token: str) -> Token:
        """``POST /auth/refresh``: spends a refresh token for a new pair."""
        return self._c.request("POST", "/auth/refresh", json_body={"refresh_token": refresh_token}, auth=False, safe_to_retry=True).body


class Decisions(Namespace):
    """Asking whether an agent may act, and the decision log."""

    def _decision_body(self, action: str, resource: Optional[str], args: Optional[Mapping[str, Any]], context: Optional[Mapping[str, Any]], agent: Optional[str], approval_id: Optional[str]) -> Dict[str, Any]:
        body: Dict[str, Any] = {"action": action}
        if agent is not None:
            body["agent"] = agent
        if resource is not None:
            body["resource"] = resource
        if args is not None:
            body["args"] = dict(args)
        if context is not None:
            body["context"] = dict(context)
        if approval_id is not None:
            body["approval_id"] = approval_id
        return body

    def decide(
        self,
        action: str,
        *,
        resource: Optional[str] = None,
        args: Optional[Mapping[str, Any]] = None,
        context: Optional[Mapping[str, Any]] = None,
        agent: Optional[str] = None,
        approval_id: Optional[str] = None,
        idempotency_key: Union[str, bool, None] = None,
    ) -> Decision:
        """``POST /decisions``: may ``agent`` (by default the key's own agent) do ``action`` on
        ``resource`` with ``args`` now? Answers ``allow``, ``deny`` or ``require_approval`` (with
        ``approval``) and the reasons; a deny is an answer, not an exception.

        ``idempotency_key``: the same key returns the first answer (24 h). When None, one is made
        for this call, so its retries can never log a second decision; ``False`` sends none (and
        then a failed call is not retried)."""
        body = self._decision_body(action, resource, args, context, agent, approval_id)
        if idempotency_key is None:
            idempotency_key = "py-" + uuid.uuid4().hex
        if idempotency_key is not False:
            body["idempotency_key"] = str(idempotency_key)
        return self._c.request("POST", "/decisions", json_body=body, safe_to_retry=idempotency_key is not False).body

    def simulate(
        self,
        action: str,
        *,
        resource: Optional[str] = None,
        args: Optional[Mapping[str, Any]] = None,
        context: Optional[Mapping[str, Any]] = None,
        agent: Optional[str] = None,
        policies: Optional[List[Mapping[str, Any]]] = None,
    ) -> Decision:
        """``POST /decisions/simulate``: the same decision, optionally against draft ``policies``
        standing in for the stored ones; writes nothing (so it is retried like a read)."""
        body = self._decision_body(action, resource, args, context, agent, None)
        if policies is not None:
            body["policies"] = [dict(p) for p in policies]
        return self._c.request("POST", "/decisions/simulate", json_body=body, safe_to_retry=True).body

    @paginated
    def list(self, *, agent: Optional[str] = None, action: Optional[str] = None, decision: Optional[str] = None, via: Optional[str] = None, from_: Optional[str] = None, to: Optional[str] = None, limit: Optional[int] = None) -> Paginator[LoggedDecision]:
        """``GET /decisions``: the decision log, newest first, filtered."""
        return self._c.paginate("/decisions", "decisions", {"agent": agent, "action": action, "decision": decision, "via": via, "from": from_, "to": to, "limit": limit})

    def get(self, decision_id: str) -> LoggedDecision:
        """``GET /decisions/{decision_id}``: one logged decision."""
        return self._c.get_json(f"/decisions/{_p(decision_id)}")

    def toolhive(self, operation: str, resource: str, *, principal: Optional[Mapping[str, Any]] = None, context: Optional[Mapping[str, Any]] = None, probe: Optional[bool] = None) -> Dict[str, Any]:
        """``POST /toolhive/decision``: ToolHive's authorizer form of a decision (a PORC)."""
        body = _body({"principal": principal, "operation": operation, "resource": resource, "context": context}, {})
        return self._c.request("POST", "/toolhive/decision", params={"probe": probe}, json_body=body).body


class Approvals(Namespace):
    """Human approvals asked for by ``require_approval`` decisions."""

    @paginated
    def list(self, *, status: Optional[str] = None, limit: Optional[int] = None) -> Paginator[Approval]:
        """``GET /approvals``: oldest first, filtered by ``status`` (e.g. ``pending``)."""
        return self._c.paginate("/approvals", "approvals", {"status": status, "limit": limit})

    def get(self, approval_id: str, *, wait: Optional[int] = None) -> Approval:
        """``GET /approvals/{approval_id}``; with ``wait`` (0–60 s) the server holds the answer
        while the approval is pending."""
        timeout = None if wait is None else max(self._c.timeout, wait + 15.0)
        return self._c.get_json(f"/approvals/{_p(approval_id)}", {"wait": wait}, timeout=timeout)

    def wait(self, approval_id: str, *, timeout: float = 900.0) -> Approval:
        """Waits until the approval is no longer pending (long polls of up to 60 s each) and
        answers it; raises :class:`ApprovalTimeout` when ``timeout`` seconds pass first."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            approval = self.get(approval_id, wait=max(0, min(60, int(left))))
            if approval.get("status") != "pending":
                return approval
            if deadline - time.monotonic() <= 0:
                raise ApprovalTimeout(f"Approval {approval_id} is still pending after {timeout:g} s", approval=approval, action=str(approval.get("action", "")))
            if left < 1:
                time.sleep(max(0.0, min(1.0, deadline - time.monotonic())))

    def approve(self, approval_id: str, *, note: Optional[str] = None) -> Approval:
        """``POST /approvals/{approval_id}/approve``: one approving vote (a signed-in person only)."""
        return self._c.request("POST", f"/approvals/{_p(approval_id)}/approve", json_body=_body({"note": note}, {})).body

    def deny(self, approval_id: str, *, note: Optional[str] = None) -> Approval:
        """``POST /approvals/{approval_id}/deny``: denies (one deny decides; a signed-in person only)."""
        return self._c.request("POST", f"/approvals/{_p(approval_id)}/deny", json_body=_body({"note": note}, {})).body

    def cancel(self, approval_id: str) -> Approval:
        """``POST /approvals/{approval_id}/cancel``: withdraws a pending approval (the agent's key, Admins, Owners)."""
        return self._c.request("POST", f"/approvals/{_p(approval_id)}/cancel").body


class Agents(Namespace):
    """The organization's agents and their keys and capabilities."""

    @paginated
    def list(self, *, status: Optional[str] = None, limit: Optional[int] = None) -> Paginator[Agent]:
        """``GET /agents``: newest first, filtered by ``status`` (active, suspended, discovered)."""
        return self._c.paginate("/agents", "agents", {"status": status, "limit": limit})

    def get(self, agent_id: str) -> Agent:
        """``GET /agents/{agent_id}``."""
        return self._c.get_json(f"/agents/{_p(agent_id)}")

    def create(self, handle: str, *, display_name: Optional[str] = None, description: Optional[str] = None, owner_user_id: Optional[str] = None, labels: Optional[Mapping[str, str]] = None, **extra: Any) -> Agent:
        """``POST /agents``: registers an active agent."""
        body = _body({"handle": handle, "display_name": display_name, "description": description, "owner_user_id": owner_user_id, "labels": labels}, extra)
        return self._c.request("POST", "/agents", json_body=body).body

    def update(self, agent_id: str, **fields: Any) -> Agent:
        """``PATCH /agents/{agent_id}``: changes the given fields (``None`` clears one)."""
        return self._c.request("PATCH", f"/agents/{_p(agent_id)}", json_body=dict(fields)).body

    def suspend(self, agent_id: str) -> Agent:
        """Suspends the agent: its very next decision is a deny."""
        return self.update(agent_id, status="suspended")

    def activate(self, agent_id: str) -> Agent:
        """Makes a suspended or discovered agent active."""
        return self.update(agent_id, status="active")

    def delete(self, agent_id: str) -> None:
        """``DELETE /agents/{agent_id}``: deletes the agent and its keys."""
        self._c.request("DELETE", f"/agents/{_p(agent_id)}")

    def create_key(self, agent_id: str, *, name: Optional[str] = None, expires_at: Optional[str] = None) -> ApiKey:
        """``POST /agents/{agent_id}/keys``: a key bound to the agent; ``api_key`` is shown once."""
        return self._c.request("POST", f"/agents/{_p(agent_id)}/keys", json_body=_body({"name": name, "expires_at": expires_at}, {})).body

    def capabilities(self, agent_id: str) -> List[Capability]:
        """``GET /agents/{agent_id}/capabilities``: what the agent gets, per action pattern."""
        return self._c.get_json(f"/agents/{_p(agent_id)}/capabilities").get("capabilities", [])

    def my_capabilities(self) -> List[Capability]:
        """``GET /agents/me/capabilities``: the same for the agent key's own agent."""
        return self._c.get_json("/agents/me/capabilities").get("capabilities", [])

    def usage(self, agent_id: str) -> Dict[str, Any]:
        """``GET /agents/{agent_id}/usage``: the agent's use of each limit that applies to it."""
        return self._c.get_json(f"/agents/{_p(agent_id)}/usage")

    def my_usage(self) -> Dict[str, Any]:
        """``GET /agents/me/usage``: an agent key's own use of its limits."""
        return self._c.get_json("/agents/me/usage")


class PolicyVersions(Namespace):
    @paginated
    def list(self, policy_id: str, *, limit: Optional[int] = None) -> Paginator[Policy]:
        """``GET /policies/{policy_id}/versions``: newest first."""
        return self._c.paginate(f"/policies/{_p(policy_id)}/versions", "versions", {"limit": limit})

    def get(self, policy_id: str, version: int) -> Policy:
        """``GET /policies/{policy_id}/versions/{version}``."""
        return self._c.get_json(f"/policies/{_p(policy_id)}/versions/{_p(int(version))}")


class Policies(Namespace):
    """Policies, their versions, replay, and policies as code (plan and apply)."""

    def __init__(self, client: BaseClient) -> None:
        super().__init__(client)
        self.versions = PolicyVersions(client)

    @paginated
    def list(self, *, archived: Optional[bool] = None, limit: Optional[int] = None, organization_id: Optional[str] = None) -> Paginator[Policy]:
        """``GET /policies``: the policies in force (``archived=True``: the archived ones) of the
        credential's organization."""
        return self._c.paginate("/policies", "policies", {"organization_id": organization_id or self._c.organization_id(), "archived": archived, "limit": limit})

    def get(self, policy_id: str) -> Policy:
        """``GET /policies/{policy_id}`` (archived ones too)."""
        return self._c.get_json(f"/policies/{_p(policy_id)}")

    def create(self, policy: Optional[Mapping[str, Any]] = None, **fields: Any) -> Policy:
        """``POST /policies``: ``name``, ``effect``, ``actions`` and optionally ``agents``,
        ``resources``, ``condition``, ``approval``, ``mode``, ``enabled``, ``limits``… The
        ``organization_id`` the route asks for is the credential's own unless given."""
        body = {**(policy or {}), **fields}
        body.setdefault("organization_id", self._c.organization_id())
        return self._c.request("POST", "/policies", json_body=body).body

    def update(self, policy_id: str, **fields: Any) -> Policy:
        """``PATCH /policies/{policy_id}``: a new version with the given fields changed."""
        return self._c.request("PATCH", f"/policies/{_p(policy_id)}", json_body=dict(fields)).body

    def delete(self, policy_id: str) -> None:
        """``DELETE /policies/{policy_id}``: archives the policy (it stays readable)."""
        self._c.request("DELETE", f"/policies/{_p(policy_id)}")

    archive = delete

    def rollback(self, policy_id: str, version: int) -> Policy:
        """``POST /policies/{policy_id}/rollback``: a new version equal in content to ``version``."""
        return self._c.request("POST", f"/policies/{_p(policy_id)}/rollback", json_body={"version": int(version)}).body

    def replay(self, policies: Iterable[Mapping[str, Any]], *, from_: Optional[str] = None, to: Optional[str] = None, limit: Optional[int] = None) -> Replay:
        """``POST /policies/replay``: decides logged decisions again against draft policies."""
        body = _body({"from": from_, "to": to, "limit": limit}, {"policies": [dict(p) for p in policies]})
        return self._c.request("POST", "/policies/replay", json_body=body, safe_to_retry=True).body

    def plan(self, policies: Iterable[Mapping[str, Any]], *, replay: Optional[Mapping[str, Any]] = None) -> PolicyPlan:
        """``POST /policies/plan``: the difference between ``policies`` (the whole desired set,
        matched by ``name``) and the set in force, and what it would have decided on the log."""
        body: Dict[str, Any] = {"policies": [dict(p) for p in policies]}
        if replay is not None:
            body["replay"] = dict(replay)
        return self._c.request("POST", "/policies/plan", json_body=body, safe_to_retry=True).body

    def apply(self, policies: Iterable[Mapping[str, Any]], *, base: str) -> PolicyApply:
        """``POST /policies/apply``: makes exactly the planned change, atomically; 409
        (:class:`ConflictError`) when the set changed since the plan whose ``base`` is given.
        Never retried: after a lost answer, plan again to see whether it was applied."""
        return self._c.request("POST", "/policies/apply", json_body={"policies": [dict(p) for p in policies], "base": base}).body


class OrganizationNs(Namespace):
    """The caller's organization and its decision settings."""

    def get(self) -> Organization:
        """``GET /organization``."""
        return self._c.get_json("/organization")

    def update(self, **fields: Any) -> Organization:
        """``PATCH /organization`` (Owners): ``name``, ``default_decision``, ``unknown_agents``, retention days."""
        return self._c.request("PATCH", "/organization", json_body=dict(fields)).body


class Keys(Namespace):
    """Organization API keys."""

    def list(self) -> List[ApiKey]:
        """``GET /keys`` (never the secrets)."""
        return self._c.get_json("/keys").get("keys", [])

    def get(self, key_id: str) -> ApiKey:
        """``GET /keys/{key_id}``."""
        return self._c.get_json(f"/keys/{_p(key_id)}")

    def create(self, role: str, *, name: Optional[str] = None, expires_at: Optional[str] = None) -> ApiKey:
        """``POST /keys``: a new key; its secret ``api_key`` is in this answer only."""
        return self._c.request("POST", "/keys", json_body=_body({"name": name, "role": role, "expires_at": expires_at}, {})).body

    def rotate(self, key_id: str, *, expires_in: Optional[int] = None) -> ApiKey:
        """``POST /keys/{key_id}/rotate``: a new key; the old one stops at once (or after ``expires_in`` s)."""
        return self._c.request("POST", f"/keys/{_p(key_id)}/rotate", json_body=_body({"expires_in": expires_in}, {})).body

    def revoke(self, key_id: str) -> None:
        """``DELETE /keys/{key_id}``: revokes the key, the keys it made and their tokens."""
        self._c.request("DELETE", f"/keys/{_p(key_id)}")


class Members(Namespace):
    def list(self) -> List[Member]:
        """``GET /members``."""
        return self._c.get_json("/members").get("members", [])

    def update(self, user_id: str, *, role: str) -> Member:
        """``PATCH /members/{user_id}``: changes a member's role."""
        return self._c.request("PATCH", f"/members/{_p(user_id)}", json_body={"role": role}).body

    def remove(self, user_id: str) -> None:
        """``DELETE /members/{user_id}``."""
        self._c.request("DELETE", f"/members/{_p(user_id)}")


class Invitations(Namespace):
    def list(self) -> List[Invitation]:
        """``GET /invitations``: the open ones."""
        return self._c.get_json("/invitations").get("invitations", [])

    def create(self, email: str, *, role: str) -> Invitation:
        """``POST /invitations``: the one-time ``token`` is in this answer only."""
        return self._c.request("POST", "/invitations", json_body={"email": email, "role": role}).body

    def revoke(self, invitation_id: str) -> None:
        """``DELETE /invitations/{invitation_id}``."""
        self._c.request("DELETE", f"/invitations/{_p(invitation_id)}")

    def accept(self, token: str, password: str) -> Dict[str, Any]:
        """``POST /invitations/accept`` (no credential needed: the token is the secret)."""
        return self._c.request("POST", "/invitations/accept", json_body={"token": token, "password": password}, auth=False).body


class Audit(Namespace):
    """The organization's audit log and its seal chain."""

    @paginated
    def list(self, *, type: Optional[Union[str, List[str]]] = None, from_: Optional[str] = None, to: Optional[str] = None, limit: Optional[int] = None) -> Paginator[AuditEvent]:
        """``GET /audit``: newest first; ``type`` is one event type or a list."""
        return self._c.paginate("/audit", "events", {"type": type, "from": from_, "to": to, "limit": limit})

    def verify(self, **params: Any) -> AuditVerification:
        """``GET /audit/verify``: checks the seal chain; ``ok`` is False when it is broken."""
        return self._c.get_json("/audit/verify", params)


class WebhookDeliveries(Namespace):
    @paginated
    def list(self, webhook_id: str, *, limit: Optional[int] = None) -> Paginator[WebhookDelivery]:
        """``GET /webhooks/{webhook_id}/deliveries``: newest first."""
        return self._c.paginate(f"/webhooks/{_p(webhook_id)}/deliveries", "deliveries", {"limit": limit})

    def get(self, webhook_id: str, delivery_id: str) -> WebhookDelivery:
        """``GET /webhooks/{webhook_id}/deliveries/{delivery_id}``."""
        return self._c.get_json(f"/webhooks/{_p(webhook_id)}/deliveries/{_p(delivery_id)}")

    def replay(self, webhook_id: str, delivery_id: str) -> WebhookDelivery:
        """``POST …/deliveries/{delivery_id}/replay``: queues that event again."""
        return self._c.request("POST", f"/webhooks/{_p(webhook_id)}/deliveries/{_p(delivery_id)}/replay").body


class Webhooks(Namespace):
    def __init__(self, client: BaseClient) -> None:
        super().__init__(client)
        self.deliveries = WebhookDeliveries(client)

    @paginated
    def list(self, *, limit: Optional[int] = None) -> Paginator[Webhook]:
        """``GET /webhooks``."""
        return self._c.paginate("/webhooks", "webhooks", {"limit": limit})

    def create(self, url: str, event_types: List[str], *, description: Optional[str] = None) -> Webhook:
        """``POST /webhooks``: the signing ``secret`` is in this answer only."""
        return self._c.request("POST", "/webhooks", json_body=_body({"url": url, "event_types": list(event_types), "description": description}, {})).body

    def get(self, webhook_id: str) -> Webhook:
        """``GET /webhooks/{webhook_id}``."""
        return self._c.get_json(f"/webhooks/{_p(webhook_id)}")

    def delete(self, webhook_id: str) -> None:
        """``DELETE /webhooks/{webhook_id}`` and its delivery log."""
        self._c.request("DELETE", f"/webhooks/{_p(webhook_id)}")


class McpServers(Namespace):
    @paginated
    def list(self, *, limit: Optional[int] = None) -> Paginator[McpServer]:
        """``GET /mcp/servers``: name order."""
        return self._c.paginate("/mcp/servers", "servers", {"limit": limit})

    def create(self, name: str, url: str, *, headers: Optional[Mapping[str, str]] = None, resource_argument: Optional[str] = None, enabled: Optional[bool] = None) -> McpServer:
        """``POST /mcp/servers``: registers an upstream MCP server."""
        return self._c.request("POST", "/mcp/servers", json_body=_body({"name": name, "url": url, "headers": headers, "resource_argument": resource_argument, "enabled": enabled}, {})).body

    def get(self, server_id: str) -> McpServer:
        """``GET /mcp/servers/{server_id}`` (header names, never values)."""
        return self._c.get_json(f"/mcp/servers/{_p(server_id)}")

    def update(self, server_id: str, **fields: Any) -> McpServer:
        """``PATCH /mcp/servers/{server_id}`` (``headers`` merge by name; None removes one)."""
        return self._c.request("PATCH", f"/mcp/servers/{_p(server_id)}", json_body=dict(fields)).body

    def delete(self, server_id: str) -> None:
        """``DELETE /mcp/servers/{server_id}``."""
        self._c.request("DELETE", f"/mcp/servers/{_p(server_id)}")


class Mcp(Namespace):
    def __init__(self, client: BaseClient) -> None:
        super().__init__(client)
        self.servers = McpServers(client)


class LeadLists(Namespace):
    """The lead lists (``demo-requests``, ``newsletter``) and their mail and spam settings."""

    def list(self) -> Dict[str, Any]:
        """``GET /leads/lists``: ``{"smtp_configured", "lists": [...]}``."""
        return self._c.get_json("/leads/lists")

    def get(self, list_name: str) -> Dict[str, Any]:
        """``GET /leads/lists/{list}``: a list's mail settings."""
        return self._c.get_json(f"/leads/lists/{_p(list_name)}")

    def update(self, list_name: str, **fields: Any) -> Dict[str, Any]:
        """``PATCH /leads/lists/{list}`` (Owners): ``notify``, ``double_opt_in``, ``consent_text``…"""
        return self._c.request("PATCH", f"/leads/lists/{_p(list_name)}", json_body=dict(fields)).body

    def spam_settings(self, list_name: str) -> Dict[str, Any]:
        """``GET /leads/lists/{list}/spam``: honeypot, CAPTCHA and retention (never the secret)."""
        return self._c.get_json(f"/leads/lists/{_p(list_name)}/spam")

    def update_spam_settings(self, list_name: str, **fields: Any) -> Dict[str, Any]:
        """``PATCH /leads/lists/{list}/spam`` (Owners): ``honeypot_field``, ``captcha_provider``…"""
        return self._c.request("PATCH", f"/leads/lists/{_p(list_name)}/spam", json_body=dict(fields)).body


class LeadSpam(Namespace):
    @paginated
    def list(self, *, list: Optional[str] = None, limit: Optional[int] = None) -> Paginator[Dict[str, Any]]:  # noqa: A002 - the API's name
        """``GET /leads/spam``: submissions kept apart as spam."""
        return self._c.paginate("/leads/spam", "spam", {"list": list, "limit": limit})

    def restore(self, spam_id: str) -> Dict[str, Any]:
        """``POST /leads/spam/{id}/restore``: makes a spam submission a lead."""
        return self._c.request("POST", f"/leads/spam/{_p(spam_id)}/restore").body


class LeadPeople(Namespace):
    """One person's data (the email goes in the body, never in a URL)."""

    def export(self, email: str) -> Dict[str, Any]:
        """``POST /leads/people/export`` (Owners): everything lead capture holds about ``email``."""
        return self._c.request("POST", "/leads/people/export", json_body={"email": email}, safe_to_retry=True).body

    def erase(self, email: str) -> Dict[str, Any]:
        """``POST /leads/people/erase`` (Owners): erases it (repeating it erases nothing more)."""
        return self._c.request("POST", "/leads/people/erase", json_body={"email": email}, safe_to_retry=True).body

    def erasures(self, email: str) -> Dict[str, Any]:
        """``POST /leads/people/erasures`` (Owners): when ``email`` was erased."""
        return self._c.request("POST", "/leads/people/erasures", json_body={"email": email}, safe_to_retry=True).body


class Leads(Namespace):
    """Leads (in the installation's leads organization only)."""

    def __init__(self, client: BaseClient) -> None:
        super().__init__(client)
        self.lists = LeadLists(client)
        self.spam = LeadSpam(client)
        self.people = LeadPeople(client)

    @paginated
    def demo_requests(self, *, q: Optional[str] = None, limit: Optional[int] = None) -> Paginator[Lead]:
        """``GET /leads/demo-requests``: newest first; ``q`` searches."""
        return self._c.paginate("/leads/demo-requests", "leads", {"q": q, "limit": limit})

    @paginated
    def newsletter(self, *, q: Optional[str] = None, limit: Optional[int] = None) -> Paginator[Lead]:
        """``GET /leads/newsletter``: newest first; ``q`` searches."""
        return self._c.paginate("/leads/newsletter", "leads", {"q": q, "limit": limit})

    @paginated
    def outbox(self, *, status: Optional[str] = None, limit: Optional[int] = None) -> Paginator[Dict[str, Any]]:
        """``GET /leads/outbox``: every lead mail queued, its state and attempts."""
        return self._c.paginate("/leads/outbox", "mails", {"status": status, "limit": limit})


class Reports(Namespace):
    """Reports over a window: ``from_``/``to`` (ISO 8601; the last 7 days by default), ``tz``
    (an IANA zone, UTC by default)."""

    def _get(self, path: str, **params: Any) -> Dict[str, Any]:
        if "from_" in params:
            params["from"] = params.pop("from_")
        return self._c.get_json(path, params)

    def decisions(self, *, from_: Optional[str] = None, to: Optional[str] = None, tz: Optional[str] = None, bucket: Optional[str] = None, group: Optional[str] = None, limit: Optional[int] = None) -> Dict[str, Any]:
        """``GET /reports/decisions``: decisions over time, per ``bucket`` (hour, day) and ``group``."""
        return self._get("/reports/decisions", from_=from_, to=to, tz=tz, bucket=bucket, group=group, limit=limit)

    def denials(self, *, from_: Optional[str] = None, to: Optional[str] = None, tz: Optional[str] = None, limit: Optional[int] = None) -> Dict[str, Any]:
        """``GET /reports/denials``: the most denied agents and actions."""
        return self._get("/reports/denials", from_=from_, to=to, tz=tz, limit=limit)

    def approvals(self, *, from_: Optional[str] = None, to: Optional[str] = None, tz: Optional[str] = None, limit: Optional[int] = None) -> Dict[str, Any]:
        """``GET /reports/approvals``: outcomes, time to decision, what waits now."""
        return self._get("/reports/approvals", from_=from_, to=to, tz=tz, limit=limit)

    def policies(self, *, from_: Optional[str] = None, to: Optional[str] = None, tz: Optional[str] = None) -> Dict[str, Any]:
        """``GET /reports/policies``: hits per policy version, unmatched policies."""
        return self._get("/reports/policies", from_=from_, to=to, tz=tz)

    def policy(self, policy_id: str, *, from_: Optional[str] = None, to: Optional[str] = None, tz: Optional[str] = None, bucket: Optional[str] = None) -> Dict[str, Any]:
        """``GET /reports/policies/{policy_id}``: one policy's hits over time."""
        return self._get(f"/reports/policies/{_p(policy_id)}", from_=from_, to=to, tz=tz, bucket=bucket)

    def agents(self, *, from_: Optional[str] = None, to: Optional[str] = None, tz: Optional[str] = None, limit: Optional[int] = None) -> Dict[str, Any]:
        """``GET /reports/agents``: agents active in the window, discovered and gone."""
        return self._get("/reports/agents", from_=from_, to=to, tz=tz, limit=limit)

    def leads(self, *, from_: Optional[str] = None, to: Optional[str] = None, tz: Optional[str] = None, bucket: Optional[str] = None) -> Dict[str, Any]:
        """``GET /reports/leads``: leads per day, source and list, and duplicates refused."""
        return self._get("/reports/leads", from_=from_, to=to, tz=tz, bucket=bucket)


NAMESPACES = {
    "auth": Auth,
    "decisions": Decisions,
    "approvals": Approvals,
    "agents": Agents,
    "policies": Policies,
    "organization": OrganizationNs,
    "keys": Keys,
    "members": Members,
    "invitations": Invitations,
    "audit": Audit,
    "webhooks": Webhooks,
    "mcp": Mcp,
    "leads": Leads,
    "reports": Reports,
}

__all__ = ["NAMESPACES", "NO_KEY", "Namespace", "paginated"]
