"""Typed shapes of the API's answers (TypedDicts: the values are the decoded JSON objects, so a
field the server adds later is there too). ``total=False``: read optional fields with ``.get``."""
from __future__ import annotations

import sys
from typing import Any, Dict, List, Optional

if sys.version_info >= (3, 8):
    from typing import Literal, TypedDict
else:  # pragma: no cover
    from typing_extensions import Literal, TypedDict

DecisionOutcome = Literal["allow", "deny", "require_approval"]
ApprovalStatus = Literal["pending", "approved", "denied", "expired", "cancelled", "consumed"]
Role = Literal["owner", "admin", "manager", "member", "viewer"]


class Reason(TypedDict, total=False):
    policy_id: str
    version: int
    name: str
    effect: str
    mode: str
    rule: str


class ApprovalRef(TypedDict, total=False):
    approval_id: str
    status: ApprovalStatus
    expires_at: str


class Decision(TypedDict, total=False):
    """The answer of ``POST /decisions`` (and of simulate, with ``decision_id`` None)."""

    decision_id: Optional[str]
    decision: DecisionOutcome
    reasons: List[Reason]
    monitor: Optional[Dict[str, Any]]
    errors: List[Dict[str, Any]]
    approval: Optional[ApprovalRef]
    args_sha256: str
    ruleset_revision: int
    evaluated_at: str


class LoggedDecision(Decision, total=False):
    """A row of the decision log (``GET /decisions``)."""

    agent_id: str
    agent: str
    action: str
    resource: str
    args: Dict[str, Any]
    context: Dict[str, Any]
    policy_decision: DecisionOutcome
    approval_id: Optional[str]
    requested_by: str
    via: str


class Approval(TypedDict, total=False):
    approval_id: str
    decision_id: str
    agent: str
    action: str
    resource: str
    args: Dict[str, Any]
    context: Dict[str, Any]
    args_sha256: str
    policies: List[Dict[str, Any]]
    approvers_required: int
    approver_roles: List[Role]
    status: ApprovalStatus
    created_at: str
    expires_at: str
    use_by: Optional[str]
    decided_at: Optional[str]
    consumed_at: Optional[str]
    consumed_decision_id: Optional[str]
    requested_by: str
    cancelled_by: Optional[str]
    votes: List[Dict[str, Any]]


class Agent(TypedDict, total=False):
    agent_id: str
    organization_id: str
    handle: str
    display_name: Optional[str]
    description: Optional[str]
    owner_user_id: Optional[str]
    labels: Dict[str, str]
    status: Literal["active", "suspended", "discovered"]
    created_at: str
    updated_at: str
    last_seen_at: Optional[str]


class Capability(TypedDict, total=False):
    action: str
    decision: str
    condition: Optional[str]
    otherwise: Optional[str]
    policies: List[Dict[str, Any]]


class Policy(TypedDict, total=False):
    policy_id: str
    organization_id: str
    name: str
    description: Optional[str]
    effect: Literal["allow", "deny", "require_approval"]
    agents: List[str]
    actions: List[str]
    resources: List[str]
    condition: Optional[str]
    approval: Optional[Dict[str, Any]]
    limits: Any
    mode: Literal["enforce", "monitor"]
    enabled: bool
    archived: bool
    archived_at: Optional[str]
    version: int
    created_at: str
    updated_at: str
    created_by: str
    ruleset_revision: int


class Replay(TypedDict, total=False):
    evaluated: int
    changed: Dict[str, int]
    sample: List[Dict[str, Any]]


class PolicyPlan(TypedDict, total=False):
    """``POST /policies/plan``: what applying the file would create, change and archive."""

    base: str
    create: List[Dict[str, Any]]
    change: List[Dict[str, Any]]
    archive: List[Dict[str, Any]]
    unchanged: int
    replay: Replay


class PolicyApply(TypedDict, total=False):
    applied: bool
    base: str
    create: List[Dict[str, Any]]
    change: List[Dict[str, Any]]
    archive: List[Dict[str, Any]]


class Organization(TypedDict, total=False):
    organization_id: str
    name: str
    default_decision: str
    unknown_agents: str
    decision_retention_days: int
    audit_retention_days: int
    ruleset_revision: int
    created_at: str
    updated_at: str


class ApiKey(TypedDict, total=False):
    key_id: str
    organization_id: str
    name: Optional[str]
    role: Role
    prefix: str
    created_by: str
    created_at: str
    expires_at: Optional[str]
    revoked_at: Optional[str]
    last_used_at: Optional[str]
    replaced_by: Optional[str]
    api_key: str  # only in the answer that creates or rotates it
    agent_id: Optional[str]


class Member(TypedDict, total=False):
    user_id: str
    email: str
    role: Role
    created_at: str


class Invitation(TypedDict, total=False):
    invitation_id: str
    email: str
    role: Role
    expires_at: str
    token: str  # only when created


class AuditEvent(TypedDict, total=False):
    event_id: int
    organization_id: str
    occurred_at: str
    actor: Dict[str, Any]
    type: str
    target: Dict[str, Any]
    data: Dict[str, Any]
    request_id: Optional[str]


class AuditVerification(TypedDict, total=False):
    ok: bool
    seals: int
    events: int
    decisions: int
    latest_seal: Optional[Dict[str, Any]]


class Webhook(TypedDict, total=False):
    webhook_id: str
    url: str
    event_types: List[str]
    description: Optional[str]
    secret: str  # only when created
    created_at: str


class WebhookDelivery(TypedDict, total=False):
    delivery_id: str
    webhook_id: str
    event_type: str
    status: str
    attempts: int
    created_at: str


class McpServer(TypedDict, total=False):
    server_id: str
    name: str
    url: str
    headers: List[str]
    resource_argument: Optional[str]
    enabled: bool
    created_at: str
    updated_at: str


class Lead(TypedDict, total=False):
    id: str
    email: str
    first_name: str
    last_name: str
    company: str
    linkedin: str
    phone: Optional[str]
    source: Optional[str]
    analytics_distinct_id: Optional[str]
    via: str
    received_at: str


class Token(TypedDict, total=False):
    access_token: str
    token_type: str
    expires_in: int
    refresh_token: str
    organization_id: str
    role: Role
    scope: str
    organizations: List[Dict[str, Any]]
