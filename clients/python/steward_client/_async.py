"""The asyncio client.

How requests avoid blocking the event loop: each request runs the synchronous client's code
(``urllib``) on a worker thread of a thread pool the client owns (``max_concurrency`` threads, 16
by default), and the coroutine awaits it with ``loop.run_in_executor``. The loop itself never
waits on a socket. A pool of its own keeps long approval waits (up to 60 s each) from taking the
loop's default executor away from the rest of the program. Everything else (retries, sessions,
pagination, guard) is the synchronous client's, so the two behave the same by construction.
"""
from __future__ import annotations

import asyncio
import contextvars
import functools
from concurrent.futures import ThreadPoolExecutor
from typing import Any, AsyncIterator, Callable, Dict, List, Mapping, Optional, TypeVar

from ._base import Page, Paginator
from ._client import Steward
from ._guard import Guard, ResourceSpec
from ._resources import Namespace

T = TypeVar("T")


class AsyncPaginator:
    """``async for item in steward.agents.list(): …``, or ``await ….page(cursor)`` for one page."""

    def __init__(self, paginator: Paginator[Any], run: Callable[..., Any]) -> None:
        self._paginator = paginator
        self._run = run

    async def page(self, cursor: Optional[str] = None) -> Page[Any]:
        return await self._run(self._paginator.page, cursor)

    async def pages(self) -> AsyncIterator[Page[Any]]:
        cursor: Optional[str] = None
        while True:
            page = await self.page(cursor)
            yield page
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    async def _items(self) -> AsyncIterator[Any]:
        async for page in self.pages():
            for item in page.items:
                yield item

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._items()

    async def to_list(self, limit: Optional[int] = None) -> List[Any]:
        out: List[Any] = []
        async for item in self:
            if limit is not None and len(out) >= limit:
                break
            out.append(item)
        return out


class AsyncNamespace:
    """The async twin of a namespace: the same methods, as coroutines (list methods answer an
    :class:`AsyncPaginator` without awaiting)."""

    def __init__(self, sync: Namespace, run: Callable[..., Any]) -> None:
        self._sync = sync
        self._run = run
        self._cache: Dict[str, Any] = {}

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        cached = self._cache.get(name)
        if cached is not None:
            return cached
        target = getattr(self._sync, name)
        if isinstance(target, Namespace):
            wrapped: Any = AsyncNamespace(target, self._run)
        elif callable(target) and getattr(target, "_paginated", False):

            @functools.wraps(target)
            def list_method(*args: Any, **kwargs: Any) -> AsyncPaginator:
                return AsyncPaginator(target(*args, **kwargs), self._run)

            wrapped = list_method
        elif callable(target):

            @functools.wraps(target)
            async def method(*args: Any, **kwargs: Any) -> Any:
                return await self._run(functools.partial(target, *args, **kwargs))

            wrapped = method
        else:
            return target
        self._cache[name] = wrapped
        return wrapped

    def __dir__(self) -> List[str]:
        return [n for n in dir(self._sync) if not n.startswith("_")]

    def __repr__(self) -> str:
        return f"<async {type(self._sync).__name__}>"


class AsyncSteward:
    """The asyncio client: ``AsyncSteward()`` takes the same arguments as :class:`Steward` plus
    ``max_concurrency`` (worker threads, 16 by default), and offers the same namespaces with
    coroutine methods: ``await steward.decisions.decide(...)``, ``async for a in
    steward.agents.list()``, ``@steward.guard(...)`` on ``async def`` functions."""

    _NAMESPACES = ("auth", "decisions", "approvals", "agents", "policies", "organization", "keys", "members", "invitations", "audit", "webhooks", "mcp", "leads", "reports")

    def __init__(self, api_key: Optional[str] = None, base_url: Optional[str] = None, *, max_concurrency: int = 16, **options: Any) -> None:
        self._client = Steward(api_key, base_url, **options)
        self._executor = ThreadPoolExecutor(max_workers=max_concurrency, thread_name_prefix="steward-client")
        for name in self._NAMESPACES:
            setattr(self, name, AsyncNamespace(getattr(self._client, name), self._run))

    @property
    def sync(self) -> Steward:
        """The synchronous client underneath (same credential and session)."""
        return self._client

    @property
    def base_url(self) -> str:
        return self._client.base_url

    def __repr__(self) -> str:
        return "Async" + repr(self._client)

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        loop = asyncio.get_running_loop()
        ctx = contextvars.copy_context()
        return await loop.run_in_executor(self._executor, functools.partial(ctx.run, fn, *args))

    @classmethod
    async def signed_in(cls, email: str, password: str, *, organization_id: Optional[str] = None, base_url: Optional[str] = None, **options: Any) -> "AsyncSteward":
        """See :meth:`Steward.signed_in`."""
        client = cls(api_key="", base_url=base_url, **options)
        await client.sign_in(email, password, organization_id)
        return client

    async def sign_in(self, email: str, password: str, organization_id: Optional[str] = None) -> Dict[str, Any]:
        """See :meth:`Steward.sign_in`."""
        return await self._run(self._client.sign_in, email, password, organization_id)

    def sign_out(self) -> None:
        self._client.sign_out()

    async def request(self, method: str, path: str, **kwargs: Any) -> Any:
        """A raw request (see :meth:`Steward.request`)."""
        return await self._run(functools.partial(self._client.request, method, path, **kwargs))

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
        """See :meth:`Steward.guard`; use ``async with`` for blocks. On a plain (sync) function it
        blocks like the synchronous client's guard."""
        return Guard(self._client, action, resource=resource, agent=agent, context=context, args=args, timeout=timeout, wait=wait,
                     approval_id=approval_id, on_approval=on_approval, runner=self._run)

    async def aclose(self) -> None:
        """Stops the worker threads (after the requests in flight) and closes the connections."""
        await asyncio.get_running_loop().run_in_executor(None, functools.partial(self._executor.shutdown, wait=True))
        self._client.close()

    async def __aenter__(self) -> "AsyncSteward":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()
