"""The API's routes as methods, one namespace per resource. Every method sends one request (with
the client's retries) and answers the decoded JSON; list methods answer a lazy :class:`Paginator`.
Unknown keyword arguments of create and update methods are sent as body fields, so a field the
server adds later can be used before this client knows it by name."""
from __future__ import annotations

import time
import uuid
from typing import Any, Dict, Iterable, List, Mapping, Optional, Union

from ._base import BaseClient, Paginator, path_param as _p
from ._namespace import Namespace, _body, paginated
from ._errors import ApprovalTimeout
from .types import Agent, ApiKey, Approval, Capability, Decision, LoggedDecision, Policy, PolicyApply, PolicyPlan, Replay, Token

#: ``idempotency_key`` value that sends none (so a failed decision is not retried).
NO_KEY = False


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


# The organization's namespaces, beside these.
from ._admin import Audit, Invitations, Keys, Leads, Mcp, Members, OrganizationNs, Reports, Webhooks  # noqa: E402

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
