"""The HTTP core shared by :class:`Steward` and :class:`AsyncSteward`: configuration, one request
with retries, sessions, pagination (its pages: ``_pages.py``). Standard library only (``urllib.request``).

Retries follow the model of openai-python: ``max_retries`` (2 by default) more attempts on 408,
429, 5xx and on connection errors, with exponential backoff and jitter (0.5 s doubling up to 8 s,
minus up to 25 %), a ``Retry-After`` of up to ``max_retry_after`` seconds honoured as it is (a
longer one is not waited for: the error is raised with ``retry_after`` set). A request that is
not a GET is retried only when it is safe to repeat: it carries an idempotency key that stays the
same on every attempt (decisions), or it writes nothing (simulate, replay, plan, a lead export),
or the server makes its repetition harmless (a refresh presented again within 10 s, an erasure).
"""
from __future__ import annotations

import http.client
import json
import os
import platform
import random
import socket
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any, Dict, Mapping, Optional

from ._errors import APIConnectionError, APITimeoutError, AuthenticationError, StewardError, status_error
from ._pages import Page, Paginator
from ._transport import ConnectionPool
from ._version import __version__

DEFAULT_BASE_URL = "http://127.0.0.1:8080"
DEFAULT_TIMEOUT = 60.0
DEFAULT_MAX_RETRIES = 2
INITIAL_RETRY_DELAY = 0.5
MAX_RETRY_DELAY = 8.0
RETRYABLE_STATUSES = frozenset({408, 429})


def path_param(value: Any) -> str:
    """One path segment: every character outside [A-Za-z0-9_.~-] is escaped, so an id can never
    add a segment or a query to the URL."""
    text = str(value)
    if text in ("", ".", ".."):
        raise ValueError("A path parameter must not be empty, '.' or '..'")
    return urllib.parse.quote(text, safe="")


def clean_params(params: Optional[Mapping[str, Any]]) -> Dict[str, str]:
    """Drops None values; booleans become true/false; lists become comma lists."""
    out: Dict[str, str] = {}
    for key, value in (params or {}).items():
        if value is None:
            continue
        if isinstance(value, bool):
            out[key] = "true" if value else "false"
        elif isinstance(value, (list, tuple)):
            out[key] = ",".join(str(v) for v in value)
        else:
            out[key] = str(value)
    return out


def _retry_after_seconds(value: Optional[str]) -> Optional[float]:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError, IndexError):
        return None


@dataclass
class Response:
    """A raw answer: status, headers (lower-case names) and the decoded JSON body (or None)."""

    status: int
    headers: Dict[str, str]
    body: Any

    @property
    def request_id(self) -> Optional[str]:
        return self.headers.get("x-request-id")


class _Session:
    """A signed-in person's tokens; refreshed ahead of expiry under a lock."""

    def __init__(self, answer: Mapping[str, Any], now: float) -> None:
        self.update(answer, now)

    def update(self, answer: Mapping[str, Any], now: float) -> None:
        self.access_token = str(answer["access_token"])
        self.refresh_token = answer.get("refresh_token")
        lifetime = float(answer.get("expires_in") or 900)
        # Refresh when less than a quarter of the lifetime (at most a minute) is left.
        self.refresh_at = now + lifetime - min(60.0, lifetime / 4)
        self.organization_id = answer.get("organization_id")
        self.role = answer.get("role")


class BaseClient:
    """Configuration and the request loop. Not used directly: see :class:`steward_client.Steward`."""

    def __init__(
        self,
        api_key: Optional[str] = None,
        base_url: Optional[str] = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        max_retries: int = DEFAULT_MAX_RETRIES,
        max_retry_after: float = 60.0,
        user_agent: Optional[str] = None,
        default_headers: Optional[Mapping[str, str]] = None,
    ) -> None:
        # api_key="" means "no key" (a client that will sign in), None "from the environment".
        self._api_key = (api_key or None) if api_key is not None else (os.environ.get("STEWARD_API_KEY") or None)
        url = base_url if base_url is not None else (os.environ.get("STEWARD_BASE_URL") or DEFAULT_BASE_URL)
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise ValueError("base_url must be an http:// or https:// URL")
        if parsed.username or parsed.password or parsed.query:
            # A credential or a query in the base URL would end up in every request line and log.
            raise ValueError("base_url must not hold a user, a password or a query: pass the key as api_key")
        self.base_url = url.rstrip("/")
        loopback = (parsed.hostname or "") in _LOOPBACK
        self._opener = _DIRECT if loopback else _OPENER
        # Kept-alive connections, unless a proxy from the environment must carry the requests.
        proxied = not loopback and parsed.scheme in urllib.request.getproxies() and not urllib.request.proxy_bypass(parsed.hostname or "")
        self._pool: Optional[ConnectionPool] = None if proxied else ConnectionPool(parsed.scheme, parsed.hostname or "", parsed.port)
        self._path_prefix = parsed.path.rstrip("/")
        self.timeout = timeout
        self.max_retries = max_retries
        self.max_retry_after = max_retry_after
        self._user_agent = user_agent or f"steward-python/{__version__} Python/{platform.python_version()}"
        self._default_headers = dict(default_headers or {})
        self._session: Optional[_Session] = None
        self._session_lock = threading.Lock()
        self._organization_id: Optional[str] = None
        self._sleep = time.sleep
        self._clock = time.time

    def __repr__(self) -> str:
        if self._session is not None:
            auth = "session"
        elif self._api_key:
            auth = "api_key=***"
        else:
            auth = "no credential"
        return f"{type(self).__name__}(base_url={self.base_url!r}, {auth})"

    # -- credentials -------------------------------------------------------------------------

    @property
    def api_key_prefix(self) -> Optional[str]:
        """The key's display prefix (as listed by ``GET /keys``), never the secret."""
        return self._api_key[:14] if self._api_key else None

    def _bearer(self) -> str:
        session = self._session
        if session is not None:
            if self._clock() >= session.refresh_at:
                self._refresh_session(session.access_token)
            return self._session.access_token  # type: ignore[union-attr]
        if not self._api_key:
            raise StewardError("No credential: set STEWARD_API_KEY, pass api_key=, or call sign_in()")
        return self._api_key

    def sign_in(self, email: str, password: str, organization_id: Optional[str] = None) -> Dict[str, Any]:
        """Signs a person in (``POST /auth/login``); from then on requests use the session's access
        token, refreshed (``POST /auth/refresh``) before it expires, transparently. Approving and
        denying approvals needs such a session. Returns the login answer without its tokens."""
        body: Dict[str, Any] = {"email": email, "password": password}
        if organization_id is not None:
            body["organization_id"] = organization_id
        answer = self.request("POST", "/auth/login", json_body=body, auth=False).body
        with self._session_lock:
            self._session = _Session(answer, self._clock())
            self._organization_id = None
        return {k: v for k, v in answer.items() if k not in ("access_token", "refresh_token")}

    def organization_id(self) -> str:
        """The credential's organization (from the session, or ``GET /organization`` once)."""
        if self._session is not None and self._session.organization_id:
            return str(self._session.organization_id)
        if self._organization_id is None:
            self._organization_id = str(self.get_json("/organization")["organization_id"])
        return self._organization_id

    def sign_out(self) -> None:
        """Forgets the session (the client goes back to its API key, if any)."""
        with self._session_lock:
            self._session = None

    def _refresh_session(self, stale_token: str) -> None:
        with self._session_lock:
            session = self._session
            # Another thread refreshed while this one waited for the lock.
            if session is None or session.access_token != stale_token:
                return
            if not session.refresh_token:
                raise AuthenticationError(401, "The session expired and has no refresh token: sign in again")
            answer = self.request("POST", "/auth/refresh", json_body={"refresh_token": session.refresh_token}, auth=False, safe_to_retry=True).body
            session.update(answer, self._clock())

    # -- one request -------------------------------------------------------------------------

    def _backoff(self, attempt: int, retry_after: Optional[float]) -> Optional[float]:
        """Seconds to wait before retry number ``attempt`` (0-based), or None not to retry."""
        if retry_after is not None:
            return retry_after if retry_after <= self.max_retry_after else None
        delay = min(INITIAL_RETRY_DELAY * (2 ** attempt), MAX_RETRY_DELAY)
        return delay * (1 - 0.25 * random.random())

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Optional[Mapping[str, Any]] = None,
        json_body: Any = None,
        auth: bool = True,
        safe_to_retry: Optional[bool] = None,
        timeout: Optional[float] = None,
        max_retries: Optional[int] = None,
    ) -> Response:
        """Sends one request (with its retries) and answers the decoded response, or raises.

        ``safe_to_retry`` says whether a non-GET may be sent again (GET always may)."""
        query = clean_params(params)
        url = self.base_url + path + ("?" + urllib.parse.urlencode(query) if query else "")
        data = None if json_body is None else json.dumps(json_body, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        retries = self.max_retries if max_retries is None else max_retries
        if method != "GET" and not safe_to_retry:
            retries = 0
        attempt = 0
        refreshed = False
        while True:
            headers = {"Accept": "application/json", "User-Agent": self._user_agent, **self._default_headers}
            if data is not None:
                headers["Content-Type"] = "application/json"
            if auth:
                headers["Authorization"] = "Bearer " + self._bearer()
            if attempt:
                headers["X-Steward-Retry-Count"] = str(attempt)
            try:
                response = self._send(method, url, headers, data, timeout if timeout is not None else self.timeout)
            except APIConnectionError:
                if attempt >= retries:
                    raise
                delay = self._backoff(attempt, None)
                attempt += 1
                self._sleep(delay or 0)
                continue
            if response.status < 400:
                return response
            if response.status == 401 and auth and self._session is not None and not refreshed and self._session.refresh_token:
                # The token died early (revoked, or a clock skew): refresh once and try again.
                refreshed = True
                self._refresh_session(self._session.access_token)
                continue
            retry_after = _retry_after_seconds(response.headers.get("retry-after"))
            error = status_error(response.status, response.body, response.request_id, retry_after)
            if attempt < retries and (response.status in RETRYABLE_STATUSES or response.status >= 500):
                delay = self._backoff(attempt, retry_after)
                if delay is not None:
                    attempt += 1
                    self._sleep(delay)
                    continue
            raise error

    def _send(self, method: str, url: str, headers: Dict[str, str], data: Optional[bytes], timeout: float) -> Response:
        if self._pool is not None:
            return self._send_kept_alive(method, url, headers, data, timeout)
        request = urllib.request.Request(url, data=data, method=method, headers=headers)
        try:
            with self._opener.open(request, timeout=timeout) as answer:
                return _decode(answer.status, answer.headers, answer.read())
        except urllib.error.HTTPError as answer:
            try:
                raw = answer.read()
            except (OSError, ValueError):
                raw = b""
            finally:
                answer.close()
            return _decode(answer.code, answer.headers, raw)
        except (socket.timeout, TimeoutError):
            # Never chained: a cause could carry the request (and its headers) into a traceback.
            raise APITimeoutError() from None
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, (socket.timeout, TimeoutError)):
                raise APITimeoutError() from None
            raise APIConnectionError(f"Could not reach the Steward server: {_reason(exc.reason)}") from None
        except (ConnectionError, OSError) as exc:
            raise APIConnectionError(f"The connection to the Steward server broke: {type(exc).__name__}") from None
        except Exception as exc:  # http.client.RemoteDisconnected, IncompleteRead…
            if type(exc).__module__ == "http.client":
                raise APIConnectionError(f"The connection to the Steward server broke: {type(exc).__name__}") from None
            raise

    def _send_kept_alive(self, method: str, url: str, headers: Dict[str, str], data: Optional[bytes], timeout: float) -> Response:
        assert self._pool is not None
        target = self._path_prefix + url[len(self.base_url):]
        if data is not None:
            headers = {**headers, "Content-Length": str(len(data))}
        try:
            status, answer_headers, raw = self._pool.request(method, target, headers, data, timeout)
        except (socket.timeout, TimeoutError):
            raise APITimeoutError() from None
        except ssl.SSLError as exc:
            raise APIConnectionError(f"TLS with the Steward server failed: {exc.reason or type(exc).__name__}") from None
        except (OSError, http.client.HTTPException) as exc:
            raise APIConnectionError(f"Could not reach the Steward server: {_reason(exc)}") from None
        return _decode(status, answer_headers, raw)

    def close(self) -> None:
        """Closes the kept-alive connections."""
        if self._pool is not None:
            self._pool.close()

    # -- helpers for the resources ------------------------------------------------------------

    def get_json(self, path: str, params: Optional[Mapping[str, Any]] = None, **kw: Any) -> Any:
        return self.request("GET", path, params=params, **kw).body

    def paginate(self, path: str, key: str, params: Optional[Mapping[str, Any]] = None) -> Paginator[Any]:
        """A lazy paginator over ``GET path`` whose items are the answer's ``key``."""
        base = dict(params or {})

        def fetch(cursor: Optional[str]) -> Page[Any]:
            query = dict(base)
            if cursor:
                query["cursor"] = cursor
            body = self.get_json(path, query) or {}
            return Page(items=list(body.get(key) or []), next_cursor=body.get("next_cursor"), raw=body)

        return Paginator(fetch)


def _reason(reason: Any) -> str:
    # The reason of a URLError is an OSError whose text never holds our headers; keep it short.
    text = getattr(reason, "strerror", None) or str(reason)
    return text[:200]


def _decode(status: int, headers: Any, raw: bytes) -> Response:
    lowered = {k.lower(): v for k, v in headers.items()} if headers is not None else {}
    body: Any = None
    if raw:
        try:
            body = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            body = {"error": raw[:500].decode("utf-8", "replace")} if status >= 400 else raw.decode("utf-8", "replace")
    return Response(status=status, headers=lowered, body=body)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Never follow a redirect: it would carry the Authorization header to wherever it points."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # type: ignore[no-untyped-def]
        return None


# A proxy from the environment (HTTPS_PROXY…) applies as urllib applies it, except to a server on
# this machine, which urllib would send through the proxy too; redirects are never followed.
_OPENER = urllib.request.build_opener(_NoRedirect)
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect)
_LOOPBACK = ("localhost", "127.0.0.1", "::1")


__all__ = ["BaseClient", "Paginator", "Page", "Response", "path_param", "clean_params"]
