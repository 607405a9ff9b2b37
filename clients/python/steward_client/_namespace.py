"""What every namespace of routes shares: the base class and the marker of paginated methods."""
from __future__ import annotations

from typing import Any, Callable, Dict, Mapping, TypeVar

from ._base import BaseClient

F = TypeVar("F", bound=Callable[..., Any])


def paginated(fn: F) -> F:
    """Marks a method that answers a Paginator (the async client wraps those differently)."""
    fn._paginated = True  # type: ignore[attr-defined]
    return fn


def _body(fields: Mapping[str, Any], extra: Mapping[str, Any]) -> Dict[str, Any]:
    out = {k: v for k, v in fields.items() if v is not None}
    out.update(extra)
    return out


class Namespace:
    def __init__(self, client: BaseClient) -> None:
        self._c = client

    def __repr__(self) -> str:
        return f"<{type(self).__name__}>"
