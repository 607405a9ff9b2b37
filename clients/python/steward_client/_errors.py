"""The exceptions the client raises.

Every exception derives from :class:`StewardError`. An HTTP error answer raises the subclass of
:class:`APIStatusError` for its status family (:class:`APIStatusError` itself for a status
without one: 405, 408, 410, 415…); a request that got no answer raises
:class:`APIConnectionError` (or :class:`APITimeoutError`). A governed action that may not run
raises :class:`ActionDenied` (or one of its subclasses). Messages never hold a credential: they
are built from the server's error text, the status and the request id only.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional

__all__ = [
    "StewardError",
    "APIStatusError",
    "BadRequestError",
    "AuthenticationError",
    "PermissionDeniedError",
    "NotFoundError",
    "ConflictError",
    "PayloadTooLargeError",
    "UnprocessableEntityError",
    "RateLimitError",
    "ServerError",
    "APIConnectionError",
    "APITimeoutError",
    "ActionDenied",
    "ApprovalExpired",
    "ApprovalTimeout",
    "ApprovalPending",
    "status_error",
]


class StewardError(Exception):
    """The base of every exception this package raises."""


class APIStatusError(StewardError):
    """The server answered with a 4xx or 5xx status.

    Attributes: ``status`` (the HTTP status), ``error`` (the server's message), ``body`` (the
    decoded JSON answer, or None), ``request_id`` (the answer's ``X-Request-Id``, for support),
    ``retry_after`` (seconds from ``Retry-After``, or None).
    """

    status: int

    def __init__(self, status: int, error: str, *, body: Any = None, request_id: Optional[str] = None, retry_after: Optional[float] = None) -> None:
        self.status = status
        self.error = error
        self.body = body
        self.request_id = request_id
        self.retry_after = retry_after
        suffix = f" (request {request_id})" if request_id else ""
        super().__init__(f"{status}: {error}{suffix}")


class BadRequestError(APIStatusError):
    """400: the request was refused as malformed or invalid."""


class AuthenticationError(APIStatusError):
    """401: the credential is missing, malformed, unknown, expired or revoked."""


class PermissionDeniedError(APIStatusError):
    """403: the credential is valid but may not do this."""


class NotFoundError(APIStatusError):
    """404: no such resource in the credential's organization (or no such route)."""


class ConflictError(APIStatusError):
    """409: the request conflicts with the current state (a taken handle, a changed plan, a vote twice…)."""


class PayloadTooLargeError(APIStatusError):
    """413: the body is over the server's limit."""


class UnprocessableEntityError(APIStatusError):
    """422: the request was understood but cannot be carried out."""


class RateLimitError(APIStatusError):
    """429: too many requests; ``retry_after`` says when to come back."""


class ServerError(APIStatusError):
    """5xx: the server could not answer (a 503 from ``POST /decisions`` means nothing was logged)."""


_BY_STATUS = {
    400: BadRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    413: PayloadTooLargeError,
    422: UnprocessableEntityError,
    429: RateLimitError,
}


def status_error(status: int, body: Any, request_id: Optional[str], retry_after: Optional[float]) -> APIStatusError:
    """Builds the exception for an error answer from its status and JSON body."""
    error = ""
    if isinstance(body, Mapping):
        for field in ("error_description", "error", "message"):
            value = body.get(field)
            if isinstance(value, str) and value:
                error = value
                break
    if not error:
        error = f"HTTP {status}"
    # Another status (405, 408, 410, 415…) raises APIStatusError itself.
    cls = ServerError if status >= 500 else _BY_STATUS.get(status, APIStatusError)
    return cls(status, error, body=body, request_id=request_id, retry_after=retry_after)


class APIConnectionError(StewardError):
    """No answer: the server could not be reached or the connection broke."""

    def __init__(self, message: str = "Could not reach the Steward server") -> None:
        super().__init__(message)


class APITimeoutError(APIConnectionError):
    """No answer within the client's timeout."""

    def __init__(self, message: str = "The request to the Steward server timed out") -> None:
        super().__init__(message)


class ActionDenied(StewardError):
    """A governed action may not run: the decision was ``deny``, or its approval did not come.

    Attributes: ``decision`` (the last decision answer, or None), ``reasons`` (its reasons),
    ``approval`` (the approval when one was asked for, or None), ``action``.
    """

    def __init__(self, message: str, *, action: str = "", decision: Optional[Mapping[str, Any]] = None, approval: Optional[Mapping[str, Any]] = None) -> None:
        self.action = action
        self.decision = dict(decision) if decision is not None else None
        self.approval = dict(approval) if approval is not None else None
        self.reasons: List[Dict[str, Any]] = list((decision or {}).get("reasons") or [])
        super().__init__(message)


class ApprovalExpired(ActionDenied):
    """The approval expired (nobody decided in time, or it was not used in time): a deny."""


class ApprovalTimeout(ActionDenied):
    """The caller's own wait ran out while the approval was still pending: the action does not run."""


class ApprovalPending(ActionDenied):
    """``guard(..., wait=False)``: approval was requested and is pending; ``approval_id`` names it."""

    @property
    def approval_id(self) -> Optional[str]:
        return (self.approval or {}).get("approval_id")
