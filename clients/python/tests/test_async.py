"""AsyncSteward: the same surface as coroutines, pagination as async iterators, errors, sessions."""
from __future__ import annotations

import asyncio

import pytest

from conftest import OWNER_EMAIL, OWNER_PASSWORD, unique
from steward_client import AsyncPaginator, AsyncSteward, ConflictError, NotFoundError, Page


def test_async_twins(live, steward):
    async def main():
        async with AsyncSteward(api_key=live.owner_key, base_url=live.url) as client:
            assert "***" in repr(client) and live.owner_key not in repr(client)
            org = await client.organization.get()
            assert org["organization_id"] == live.org_id
            prefix = unique("async")
            made = await asyncio.gather(*(client.agents.create(f"{prefix}-{i}") for i in range(3)))
            assert len({a["agent_id"] for a in made}) == 3
            listed = client.agents.list(limit=2)
            assert isinstance(listed, AsyncPaginator)
            page = await listed.page()
            assert isinstance(page, Page) and len(page.items) == 2 and page.next_cursor
            seen = [a["agent_id"] async for a in client.agents.list(limit=2)]
            assert {a["agent_id"] for a in made} <= set(seen)
            assert len(await client.agents.list(limit=2).to_list(3)) == 3
            decision = await client.decisions.decide("async.thing", agent=made[0]["handle"])
            assert decision["decision"] == "deny"
            assert (await client.decisions.get(decision["decision_id"]))["action"] == "async.thing"
            with pytest.raises(NotFoundError):
                await client.agents.get("00000000-0000-4000-8000-000000000000")
            with pytest.raises(ConflictError):
                await client.agents.create(made[0]["handle"])
            versions = client.policies.versions.list
            assert callable(versions)
            await client.sign_in(OWNER_EMAIL, OWNER_PASSWORD)
            assert (await client.members.list())[0]["email"]
            assert (await client.audit.verify())["ok"] is True

    asyncio.run(main())


def test_async_approvals_wait(live, steward, person):
    steward.policies.create(name=unique("async-approve"), effect="require_approval", actions=["py.async-wait.*"])
    handle = steward.agents.create(unique("async-waiter"))["handle"]

    async def main():
        async with AsyncSteward(api_key=live.owner_key, base_url=live.url) as client:
            decision = await client.decisions.decide("py.async-wait.go", agent=handle)
            approval_id = decision["approval"]["approval_id"]
            waiting = asyncio.ensure_future(client.approvals.wait(approval_id, timeout=30))
            await asyncio.sleep(0.3)
            assert not waiting.done()
            await asyncio.get_running_loop().run_in_executor(None, person.approvals.approve, approval_id)
            assert (await waiting)["status"] == "approved"
            pending = [a async for a in client.approvals.list(status="approved")]
            assert approval_id in [a["approval_id"] for a in pending]

    asyncio.run(main())
