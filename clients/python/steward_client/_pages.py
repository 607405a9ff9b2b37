"""Pages of a list and the paginator a list method returns (following ``next_cursor``)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Generic, Iterator, List, Optional, TypeVar

T = TypeVar("T")


@dataclass
class Page(Generic[T]):
    """One page of a list: ``items``, ``next_cursor`` (None on the last page) and the raw answer."""

    items: List[T]
    next_cursor: Optional[str]
    raw: Dict[str, Any] = field(repr=False, default_factory=dict)

    def __iter__(self) -> Iterator[T]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)


class Paginator(Generic[T]):
    """What a list method returns: iterate it to get every item across pages (each page is fetched
    when the previous one is used up, following ``next_cursor``), or call :meth:`page` for one.

    Nothing is requested before you iterate or call :meth:`page`.
    """

    def __init__(self, fetch: Callable[[Optional[str]], Page[T]]) -> None:
        self._fetch = fetch

    def page(self, cursor: Optional[str] = None) -> Page[T]:
        """The page at ``cursor`` (the first page when None)."""
        return self._fetch(cursor)

    def pages(self) -> Iterator[Page[T]]:
        """Every page in turn."""
        cursor: Optional[str] = None
        while True:
            page = self._fetch(cursor)
            yield page
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    def __iter__(self) -> Iterator[T]:
        for page in self.pages():
            yield from page.items

    def to_list(self, limit: Optional[int] = None) -> List[T]:
        """Collects the items (at most ``limit`` of them when given)."""
        out: List[T] = []
        for item in self:
            if limit is not None and len(out) >= limit:
                break
            out.append(item)
        return out
