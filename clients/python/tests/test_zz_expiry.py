"""The approval guard started waiting on in test_00 expires (30 s after it was asked for): guard
raises ApprovalExpired, a deny, and the block never ran."""
from steward_client import ActionDenied, ApprovalExpired


def test_an_expired_approval_is_a_deny(steward, expiring):
    expiring["thread"].join(timeout=90)
    assert not expiring["thread"].is_alive()
    raised = expiring.get("raised")
    assert isinstance(raised, ApprovalExpired) and isinstance(raised, ActionDenied), raised
    assert "ran" not in expiring
    assert raised.approval["status"] == "expired"
    assert steward.approvals.get(expiring["approval"]["approval_id"])["status"] == "expired"
