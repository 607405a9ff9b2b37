"""The organization's routes as methods: its settings, keys, members, invitations, audit log,
webhooks, MCP servers, leads and reports (the governance routes are in ``_resources``)."""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Union

from ._base import BaseClient, Paginator, path_param as _p
from ._namespace import Namespace, _body, paginated
from .types import ApiKey, AuditEvent, AuditVerification, Invitation, Lead, McpServer, Member, Organization, Webhook, WebhookDelivery


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
