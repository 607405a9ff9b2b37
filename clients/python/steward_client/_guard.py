"""``guard``: run a function (or a block) only when Steward allows it.

The decision's ``args`` are the call's arguments by name (``self``/``cls`` left out, ``*args`` as
a list, ``**kwargs`` merged in), made JSON-safe once per call so the very same arguments are
decided and, after an approval, decided again: the approval is bound to their hash
(``args_sha256``) and the server refuses it for any other arguments (``approval_mismatch``).
"""
from __future__ import annotations

import functools
import inspect
import json
from typing import Any, Awaitable, Callable, Dict, Iterable, Mapping, Optional, TypeVar, Union

from ._errors import ActionDenied, ApprovalExpired, ApprovalPending, ApprovalTimeout
from .types import Decision

F = TypeVar("F", bound=Callable[..., Any])
Runner = Callable[..., Awaitable[Any]]
ResourceSpec = Union[str, Callable[..., str], None]
ArgsSpec = Union[Iterable[str], Callable[..., Mapping[str, Any]], None]


def _jsonable(value: Any) -> Any:
    """A JSON round trip; values JSON cannot hold become their ``str`` (decided once, reused)."""
    return json.loads(json.dumps(value, default=str))


def _summary(decision: Mapping[str, Any]) -> str:
    names = []
    for reason in decision.get("reasons") or []:
        names.append(str(reason.get("name") or reason.get("rule") or reason.get("policy_id") or "?"))
    return ", ".join(names) or "no reason given"


def call_arguments(fn: Callable[..., Any], args: tuple, kwargs: Mapping[str, Any]) -> Dict[str, Any]:
    """The call's arguments by name, defaults applied."""
    signature = inspect.signature(fn)
    bound = signature.bind(*args, **kwargs)
    bound.apply_defaults()
    out: Dict[str, Any] = {}
    for index, (name, param) in enumerate(signature.parameters.items()):
        if index == 0 and name in ("self", "cls"):
            continue
        if name not in bound.arguments:
            continue
        value = bound.arguments[name]
        if param.kind is inspect.Parameter.VAR_KEYWORD:
            out.update(value)
        elif param.kind is inspect.Parameter.VAR_POSITIONAL:
            out[name] = list(value)
        else:
            out[name] = value
    return out


class Guard:
    """Made by ``steward.guard(action, …)``; use it as a decorator or as a (async) context manager.

    - ``allow``: the function (or block) runs; in a ``with``, the decision is the ``as`` value.
    - ``deny``: :class:`ActionDenied` with the ``reasons``; the function does not run.
    - ``require_approval``: waits for the people (``timeout`` seconds, then
      :class:`ApprovalTimeout`); an expired approval raises :class:`ApprovalExpired`, a denied or
      cancelled one :class:`ActionDenied`; an approved one is used at once by deciding again with
      its ``approval_id`` and the same arguments, and the function runs. With ``wait=False`` it
      raises :class:`ApprovalPending` (``.approval_id``) instead of waiting; pass that id back as
      ``approval_id=`` to use the approval later.
    """

    def __init__(
        self,
        client: Any,
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
        runner: Optional[Runner] = None,
    ) -> None:
        if not isinstance(action, str) or not action:
            raise ValueError("guard needs an action, e.g. guard('payments.refund')")
        self._client = client
        self.action = action
        self._resource = resource
        self._agent = agent
        self._context = dict(context) if context is not None else None
        self._args = args
        self._timeout = timeout
        self._wait = wait
        self._approval_id = approval_id
        self._on_approval = on_approval
        self._runner = runner
        self.decision: Optional[Decision] = None

    # -- the decision ---------------------------------------------------------------------------

    def _select(self, arguments: Dict[str, Any]) -> Dict[str, Any]:
        spec = self._args
        if spec is None:
            chosen: Mapping[str, Any] = arguments
        elif callable(spec):
            chosen = spec(**arguments)
        elif isinstance(spec, Mapping):
            chosen = spec
        else:
            names = list(spec)
            chosen = {name: arguments[name] for name in names if name in arguments}
        return _jsonable(dict(chosen))

    def _resource_for(self, arguments: Dict[str, Any]) -> Optional[str]:
        if callable(self._resource):
            return str(self._resource(**arguments))
        return self._resource

    def authorize(self, arguments: Optional[Dict[str, Any]] = None) -> Decision:
        """Decides (and waits for an approval) for these arguments; answers the allowing decision
        or raises. Blocking: the async paths run it on a worker thread."""
        arguments = dict(arguments or {})
        args = self._select(arguments)
        resource = self._resource_for(arguments)
        decisions = self._client.decisions

        def decide(approval_id: Optional[str]) -> Decision:
            return decisions.decide(self.action, resource=resource, args=args, context=self._context, agent=self._agent, approval_id=approval_id)

        decision = decide(self._approval_id)
        outcome = decision.get("decision")
        if outcome == "allow":
            self.decision = decision
            return decision
        if outcome != "require_approval":
            raise ActionDenied(f"Steward denied {self.action}: {_summary(decision)}", action=self.action, decision=decision)
        approval = decision.get("approval") or {}
        approval_id = approval.get("approval_id")
        if not approval_id:
            raise ActionDenied(f"Steward asked for an approval of {self.action} but named none", action=self.action, decision=decision)
        if self._on_approval is not None:
            self._on_approval(approval)
        if not self._wait:
            raise ApprovalPending(f"{self.action} waits for approval {approval_id}", action=self.action, decision=decision, approval=approval)
        try:
            final = self._client.approvals.wait(approval_id, timeout=self._timeout)
        except ApprovalTimeout as exc:
            raise ApprovalTimeout(str(exc), action=self.action, decision=decision, approval=exc.approval) from None
        status = final.get("status")
        if status == "expired":
            raise ApprovalExpired(f"Approval {approval_id} of {self.action} expired: a deny", action=self.action, decision=decision, approval=final)
        if status != "approved":
            raise ActionDenied(f"Approval {approval_id} of {self.action} is {status}", action=self.action, decision=decision, approval=final)
        used = decide(approval_id)
        if used.get("decision") != "allow":
            raise ActionDenied(f"Steward denied {self.action} with approval {approval_id}: {_summary(used)}", action=self.action, decision=used, approval=final)
        self.decision = used
        return used

    async def _authorize_async(self, arguments: Optional[Dict[str, Any]] = None) -> Decision:
        runner = self._runner or _to_thread
        return await runner(self.authorize, arguments)

    # -- decorator --------------------------------------------------------------------------------

    def __call__(self, fn: F) -> F:
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def guarded_async(*args: Any, **kwargs: Any) -> Any:
                await self._clone()._authorize_async(call_arguments(fn, args, kwargs))
                return await fn(*args, **kwargs)

            return guarded_async  # type: ignore[return-value]

        @functools.wraps(fn)
        def guarded(*args: Any, **kwargs: Any) -> Any:
            self._clone().authorize(call_arguments(fn, args, kwargs))
            return fn(*args, **kwargs)

        return guarded  # type: ignore[return-value]

    def _clone(self) -> "Guard":
        # One Guard object per call: a decorated function may run on many threads at once.
        return Guard(self._client, self.action, resource=self._resource, agent=self._agent, context=self._context, args=self._args,
                     timeout=self._timeout, wait=self._wait, approval_id=self._approval_id, on_approval=self._on_approval, runner=self._runner)

    # -- context manager ------------------------------------------------------------------------

    def _block_arguments(self) -> Dict[str, Any]:
        if self._args is None or callable(self._args):
            return {}
        if isinstance(self._args, Mapping):
            return dict(self._args)
        raise TypeError("In a with block, args= must be a mapping of the arguments to decide on")

    def __enter__(self) -> Decision:
        return self._clone_for_block().authorize(self._block_arguments())

    def __exit__(self, *exc: Any) -> None:
        return None

    async def __aenter__(self) -> Decision:
        return await self._clone_for_block()._authorize_async(self._block_arguments())

    async def __aexit__(self, *exc: Any) -> None:
        return None

    def _clone_for_block(self) -> "Guard":
        clone = self._clone()
        clone._args = None  # the mapping itself is the arguments
        if callable(self._resource):
            args = self._block_arguments()
            clone._resource = str(self._resource(**args))
        return clone


async def _to_thread(fn: Callable[..., Any], *args: Any) -> Any:
    import asyncio

    return await asyncio.to_thread(fn, *args)
