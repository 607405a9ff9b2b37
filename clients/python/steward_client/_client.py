"""The synchronous client."""
from __future__ import annotations

from typing import Any, Callable, Mapping, Optional

from ._base import BaseClient
from ._guard import Guard, ResourceSpec
from ._resources import (
    Agents, Approvals, Audit, Auth, Decisions, Invitations, Keys, Leads, Mcp, Members, OrganizationNs, Policies, Reports, Webhooks,
)


class Steward(BaseClient):
    """A client of the Steward API.

    ``Steward()`` reads ``STEWARD_API_KEY`` and ``STEWARD_BASE_URL`` from the environment; the
    ``api_key`` and ``base_url`` arguments override them. The key is sent only as
    ``Authorization: Bearer …``; it never appears in a URL, a log line, an exception or ``repr``.

    Namespaces: ``auth``, ``decisions``, ``approvals``, ``agents``, ``policies`` (and
    ``policies.versions``), ``organization``, ``keys``, ``members``, ``invitations``, ``audit``,
    ``webhooks`` (and ``webhooks.deliveries``), ``mcp.servers``, ``leads`` (and ``leads.lists``,
    ``leads.spam``, ``leads.people``), ``reports``.

    Thread-safe: one client may serve many threads; each thread keeps one connection alive to the
    server. ``close()`` (or ``with Steward() as steward:``) closes them.
    """

    def __init__(self, api_key: Optional[str] = None, base_url: Optional[str] = None, **options: Any) -> None:
        super().__init__(api_key, base_url, **options)
        self.auth = Auth(self)
        self.decisions = Decisions(self)
        self.approvals = Approvals(self)
        self.agents = Agents(self)
        self.policies = Policies(self)
        self.organization = OrganizationNs(self)
        self.keys = Keys(self)
        self.members = Members(self)
        self.invitations = Invitations(self)
        self.audit = Audit(self)
        self.webhooks = Webhooks(self)
        self.mcp = Mcp(self)
        self.leads = Leads(self)
        self.reports = Reports(self)

    @classmethod
    def signed_in(cls, email: str, password: str, *, organization_id: Optional[str] = None, base_url: Optional[str] = None, **options: Any) -> "Steward":
        """A new client acting as the person ``email`` (``POST /auth/login``), its session
        refreshed before expiry: ``Steward.signed_in("ada@acme.example", password)``."""
        client = cls(api_key="", base_url=base_url, **options)
        client.sign_in(email, password, organization_id)
        return client

    def guard(
        self,
        action: str,
        *,
        resource: ResourceSpec = None,
        agent: Optional[str] = None,
        context: Optional[Mapping[str, Any]] = None,
        args: Any = None,
        timeout: float = 900.0,
        wait: bool = True,
        approval_id: Optional[str] = None,
        on_approval: Optional[Callable[[Mapping[str, Any]], None]] = None,
    ) -> Guard:
        """Governs a function or a block by a decision on ``action``.

        As a decorator (sync or ``async def``)::

            @steward.guard("payments.refund", resource=lambda order_id, **_: f"order/{order_id}")
            def refund(order_id: str, amount: int) -> None: ...

        As a context manager: ``with steward.guard("db.drop", resource="db/prod", args={...}) as decision:``.

        ``resource``: a string, or a function called with the call's arguments by name.
        ``agent``: the handle to decide for (default: the agent the key belongs to).
        ``args``: which arguments to send (default all; a list of names, or a function of the
        arguments answering the dict to send: keep secrets out of the decision log).
        ``timeout``: seconds to wait for a human approval. ``wait=False``: raise
        :class:`ApprovalPending` instead of waiting. ``on_approval``: called with the approval
        when one is asked for (to tell someone). See :class:`Guard` for the outcomes.
        """
        return Guard(self, action, resource=resource, agent=agent, context=context, args=args, timeout=timeout, wait=wait, approval_id=approval_id, on_approval=on_approval)

    def __enter__(self) -> "Steward":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
