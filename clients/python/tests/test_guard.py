"""guard: allow, deny, an approval granted by a signed-in person while guard waits, denied,
timed out, arguments changed after the approval; decorator and context manager, sync and async."""
from __future__ import annotations

import asyncio
import threading
import time

import pytest

from conftest import unique
from steward_client import ActionDenied, ApprovalExpired, ApprovalPending, ApprovalTimeout, AsyncSteward


@pytest.fixture(scope="module")
def setup(steward):
    steward.policies.create(name=unique("guard-allow"), effect="allow", actions=["py.allow.*"])
    steward.policies.create(name=unique("guard-approve"), effect="require_approval", actions=["py.approve.*"])
    return {"agent": steward.agents.create(unique("guard-bot"))["handle"]}


def later(fn, *args, delay=0.5):
    """Runs fn on another thread after a pause, so guard is really waiting when it happens."""
    def run():
        time.sleep(delay)
        fn(*args)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_allow_runs_the_function_with_its_arguments_as_args(steward, setup):
    ran = []

    @steward.guard("py.allow.refund", agent=setup["agent"], resource=lambda order_id, **_: f"order/{order_id}")
    def refund(order_id: str, amount: int, currency: str = "EUR") -> str:
        ran.append((order_id, amount))
        return "refunded"

    assert refund("o-1", 5) == "refunded"
    assert ran == [("o-1", 5)]
    logged = steward.decisions.list(action="py.allow.refund", limit=1).page().items[0]
    assert (logged["decision"], logged["resource"], logged["args"], logged["agent"]) == ("allow", "order/o-1", {"order_id": "o-1", "amount": 5, "currency": "EUR"}, setup["agent"])


def test_deny_raises_with_the_reasons_and_does_not_run(steward, setup):
    ran = []

    @steward.guard("py.denied.delete", agent=setup["agent"], resource="db/prod")
    def delete_everything() -> None:
        ran.append(1)

    with pytest.raises(ActionDenied) as e:
        delete_everything()
    assert ran == [] and not isinstance(e.value, ApprovalExpired)
    assert e.value.reasons == [{"rule": "default_decision"}]
    assert e.value.decision["decision"] == "deny" and e.value.action == "py.denied.delete"


def test_approval_granted_while_guard_waits(steward, person, setup):
    asked = []
    ran = []

    def on_approval(approval):
        asked.append(approval["approval_id"])
        later(person.approvals.approve, approval["approval_id"])

    @steward.guard("py.approve.refund", agent=setup["agent"], resource=lambda order_id, **_: f"order/{order_id}", timeout=30, on_approval=on_approval)
    def refund(order_id: str, amount: int) -> str:
        ran.append(order_id)
        return "done"

    assert refund("o-2", 700) == "done"
    assert ran == ["o-2"] and len(asked) == 1
    approval = steward.approvals.get(asked[0])
    assert approval["status"] == "consumed"
    used = steward.decisions.get(approval["consumed_decision_id"])
    assert (used["decision"], used["reasons"], used["approval_id"]) == ("allow", [{"rule": "approval"}], asked[0])


def test_a_denied_approval_is_a_deny(steward, person, setup):
    @steward.guard("py.approve.wire", agent=setup["agent"], timeout=30, on_approval=lambda a: later(person.approvals.deny, a["approval_id"]))
    def wire(amount: int) -> None:
        raise AssertionError("must not run")

    with pytest.raises(ActionDenied) as e:
        wire(10)
    assert e.value.approval["status"] == "denied" and not isinstance(e.value, ApprovalExpired)


def test_the_callers_timeout_is_a_deny(steward, setup):
    with pytest.raises(ApprovalTimeout) as e:
        with steward.guard("py.approve.slow", agent=setup["agent"], args={"n": 1}, timeout=1):
            raise AssertionError("must not run")
    assert isinstance(e.value, ActionDenied) and e.value.approval["status"] == "pending"


def test_arguments_changed_after_the_approval_are_refused(steward, person, setup):
    def refund(order_id: str, amount: int) -> str:
        return f"refunded {amount}"

    ask = steward.guard("py.approve.change", agent=setup["agent"], wait=False)(refund)
    with pytest.raises(ApprovalPending) as e:
        ask("o-3", 10)
    approval_id = e.value.approval_id
    person.approvals.approve(approval_id)
    use = steward.guard("py.approve.change", agent=setup["agent"], approval_id=approval_id)(refund)
    with pytest.raises(ActionDenied) as changed:
        use("o-3", 10_000)
    assert changed.value.reasons == [{"rule": "approval_mismatch"}]
    assert use("o-3", 10) == "refunded 10"
    with pytest.raises(ActionDenied) as twice:
        use("o-3", 10)
    assert twice.value.reasons == [{"rule": "approval_unusable"}]


def test_context_manager_methods_and_the_agent_keys_own_agent(steward, live, setup):
    with steward.guard("py.allow.block", agent=setup["agent"], resource=lambda path: f"file/{path}", args={"path": "a.txt"}) as decision:
        assert decision["decision"] == "allow"
    assert steward.decisions.get(decision["decision_id"])["resource"] == "file/a.txt"

    agent = steward.agents.create(unique("own-bot"))
    bot = live.client(steward.agents.create_key(agent["agent_id"])["api_key"])

    class Tools:
        @bot.guard("py.allow.method", args=["query"])
        def search(self, query: str, token: str) -> str:
            return query.upper()

    assert Tools().search("hi", token="not logged") == "HI"
    logged = steward.decisions.list(action="py.allow.method", limit=1).page().items[0]
    assert (logged["agent"], logged["args"]) == (agent["handle"], {"query": "hi"})


def test_guard_on_async_functions(steward, person, live, setup):
    @steward.guard("py.allow.fetch", agent=setup["agent"])
    async def fetch(url: str) -> str:
        await asyncio.sleep(0)
        return url

    async_client = AsyncSteward(api_key=live.owner_key, base_url=live.url)
    asked = {}

    def on_approval(approval):
        # Called on a worker thread; the approving happens on the event loop, which therefore
        # must keep running while guard waits (were it blocked, guard would wait in vain).
        asked["approval_id"] = approval["approval_id"]
        asked["loop"].call_soon_threadsafe(asked["event"].set)

    @async_client.guard("py.approve.async", agent=setup["agent"], timeout=30, on_approval=on_approval)
    async def pay(amount: int) -> int:
        return amount

    @async_client.guard("py.denied.async", agent=setup["agent"])
    async def nope() -> None:
        raise AssertionError("must not run")

    async def approve_when_asked():
        await asked["event"].wait()
        await asyncio.get_running_loop().run_in_executor(None, person.approvals.approve, asked["approval_id"])

    async def main():
        assert await fetch("https://example.com") == "https://example.com"
        asked["loop"] = asyncio.get_running_loop()
        asked["event"] = asyncio.Event()
        approver = asyncio.ensure_future(approve_when_asked())
        assert await pay(42) == 42
        await approver
        with pytest.raises(ActionDenied):
            await nope()
        async with async_client.guard("py.allow.async-block", agent=setup["agent"], args={"k": 1}) as decision:
            assert decision["decision"] == "allow"
        await async_client.aclose()

    asyncio.run(main())
