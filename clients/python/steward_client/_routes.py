"""Which method covers each product route of the OpenAPI document. The repository's route test
(tests/unit/client-routes.test.ts) fails when a product route has no entry here or when an
entry's ``call`` is not callable on ``Steward(api_key="x", base_url="http://127.0.0.1:1")``."""
from __future__ import annotations

from typing import Dict, List

_ROUTES = [
    ("POST", "/auth/login", "auth.login"),
    ("POST", "/auth/refresh", "auth.refresh"),
    ("POST", "/policies/replay", "policies.replay"),
    ("POST", "/policies/plan", "policies.plan"),
    ("POST", "/policies/apply", "policies.apply"),
    ("GET", "/policies", "policies.list"),
    ("POST", "/policies", "policies.create"),
    ("GET", "/policies/{policy_id}", "policies.get"),
    ("PATCH", "/policies/{policy_id}", "policies.update"),
    ("DELETE", "/policies/{policy_id}", "policies.delete"),
    ("GET", "/policies/{policy_id}/versions", "policies.versions.list"),
    ("GET", "/policies/{policy_id}/versions/{version}", "policies.versions.get"),
    ("POST", "/policies/{policy_id}/rollback", "policies.rollback"),
    ("GET", "/organization", "organization.get"),
    ("PATCH", "/organization", "organization.update"),
    ("GET", "/keys", "keys.list"),
    ("POST", "/keys", "keys.create"),
    ("GET", "/keys/{key_id}", "keys.get"),
    ("DELETE", "/keys/{key_id}", "keys.revoke"),
    ("POST", "/keys/{key_id}/rotate", "keys.rotate"),
    ("GET", "/members", "members.list"),
    ("PATCH", "/members/{user_id}", "members.update"),
    ("DELETE", "/members/{user_id}", "members.remove"),
    ("POST", "/invitations/accept", "invitations.accept"),
    ("GET", "/invitations", "invitations.list"),
    ("POST", "/invitations", "invitations.create"),
    ("DELETE", "/invitations/{invitation_id}", "invitations.revoke"),
    ("GET", "/agents", "agents.list"),
    ("POST", "/agents", "agents.create"),
    ("GET", "/agents/me/capabilities", "agents.my_capabilities"),
    ("GET", "/agents/{agent_id}", "agents.get"),
    ("PATCH", "/agents/{agent_id}", "agents.update"),
    ("DELETE", "/agents/{agent_id}", "agents.delete"),
    ("POST", "/agents/{agent_id}/keys", "agents.create_key"),
    ("GET", "/agents/{agent_id}/capabilities", "agents.capabilities"),
    ("GET", "/agents/{agent_id}/usage", "agents.usage"),
    ("GET", "/agents/me/usage", "agents.my_usage"),
    ("POST", "/decisions", "decisions.decide"),
    ("GET", "/decisions", "decisions.list"),
    ("POST", "/decisions/simulate", "decisions.simulate"),
    ("GET", "/decisions/{decision_id}", "decisions.get"),
    ("POST", "/toolhive/decision", "decisions.toolhive"),
    ("GET", "/leads/demo-requests", "leads.demo_requests"),
    ("GET", "/leads/newsletter", "leads.newsletter"),
    ("GET", "/leads/outbox", "leads.outbox"),
    ("GET", "/leads/lists", "leads.lists.list"),
    ("GET", "/leads/lists/{list}", "leads.lists.get"),
    ("PATCH", "/leads/lists/{list}", "leads.lists.update"),
    ("GET", "/leads/lists/{list}/spam", "leads.lists.spam_settings"),
    ("PATCH", "/leads/lists/{list}/spam", "leads.lists.update_spam_settings"),
    ("GET", "/leads/spam", "leads.spam.list"),
    ("POST", "/leads/spam/{id}/restore", "leads.spam.restore"),
    ("POST", "/leads/people/export", "leads.people.export"),
    ("POST", "/leads/people/erase", "leads.people.erase"),
    ("POST", "/leads/people/erasures", "leads.people.erasures"),
    ("GET", "/reports/decisions", "reports.decisions"),
    ("GET", "/reports/denials", "reports.denials"),
    ("GET", "/reports/approvals", "reports.approvals"),
    ("GET", "/reports/policies", "reports.policies"),
    ("GET", "/reports/policies/{policy_id}", "reports.policy"),
    ("GET", "/reports/agents", "reports.agents"),
    ("GET", "/reports/leads", "reports.leads"),
    ("GET", "/approvals", "approvals.list"),
    ("GET", "/approvals/{approval_id}", "approvals.get"),
    ("POST", "/approvals/{approval_id}/approve", "approvals.approve"),
    ("POST", "/approvals/{approval_id}/deny", "approvals.deny"),
    ("POST", "/approvals/{approval_id}/cancel", "approvals.cancel"),
    ("GET", "/audit/verify", "audit.verify"),
    ("GET", "/audit", "audit.list"),
    ("GET", "/webhooks", "webhooks.list"),
    ("POST", "/webhooks", "webhooks.create"),
    ("GET", "/webhooks/{webhook_id}", "webhooks.get"),
    ("DELETE", "/webhooks/{webhook_id}", "webhooks.delete"),
    ("GET", "/webhooks/{webhook_id}/deliveries", "webhooks.deliveries.list"),
    ("GET", "/webhooks/{webhook_id}/deliveries/{delivery_id}", "webhooks.deliveries.get"),
    ("POST", "/webhooks/{webhook_id}/deliveries/{delivery_id}/replay", "webhooks.deliveries.replay"),
    ("GET", "/mcp/servers", "mcp.servers.list"),
    ("POST", "/mcp/servers", "mcp.servers.create"),
    ("GET", "/mcp/servers/{server_id}", "mcp.servers.get"),
    ("PATCH", "/mcp/servers/{server_id}", "mcp.servers.update"),
    ("DELETE", "/mcp/servers/{server_id}", "mcp.servers.delete"),
]


def route_table() -> List[Dict[str, str]]:
    """``[{"method", "path", "call"}]``: ``call`` is a dotted attribute path on a ``Steward``."""
    return [{"method": method, "path": path, "call": call} for method, path, call in _ROUTES]


if __name__ == "__main__":
    import json

    print(json.dumps(route_table()))
