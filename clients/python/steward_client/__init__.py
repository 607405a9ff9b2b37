"""Steward's Python client: decisions for AI agents' actions, approvals, policies and the rest
of the API, with ``guard`` to govern a function in one line. Standard library only.

    from steward_client import Steward
    steward = Steward()  # STEWARD_API_KEY, STEWARD_BASE_URL

    @steward.guard("payments.refund", resource=lambda order_id, **_: f"order/{order_id}")
    def refund(order_id: str, amount: int) -> None: ...
"""
from ._async import AsyncPaginator, AsyncSteward
from ._base import Page, Paginator, Response
from ._client import Steward
from ._errors import (
    ActionDenied, APIConnectionError, APIStatusError, APITimeoutError, ApprovalExpired, ApprovalPending, ApprovalTimeout,
    AuthenticationError, BadRequestError, ConflictError, NotFoundError, PayloadTooLargeError, PermissionDeniedError,
    RateLimitError, ServerError, StewardError, UnprocessableEntityError,
)
from ._guard import Guard
from ._version import __version__

__all__ = [
    "Steward", "AsyncSteward", "Guard", "Page", "Paginator", "AsyncPaginator", "Response",
    "StewardError", "APIStatusError", "BadRequestError", "AuthenticationError", "PermissionDeniedError", "NotFoundError",
    "ConflictError", "PayloadTooLargeError", "UnprocessableEntityError", "RateLimitError", "ServerError",
    "APIConnectionError", "APITimeoutError", "ActionDenied", "ApprovalExpired", "ApprovalTimeout", "ApprovalPending",
    "__version__",
]

# Tracebacks name the public import path (steward_client.ActionDenied), not the private module.
for _name in __all__:
    _value = globals()[_name]
    if isinstance(_value, type) and _value.__module__.startswith("steward_client._"):
        _value.__module__ = "steward_client"
del _name, _value
