"""A live Steward for the client's tests: one server per test session, started the way an
operator starts it (``node cli/launch.mjs start``) on an ephemeral port, on embedded PGlite in a
temporary DATA_DIR, or on a fresh database of TEST_DATABASE_URL's PostgreSQL when that is set.
The organization, its Owner and the first key are made with the operator commands, as
tests/cli/*.test.ts do. Every request the client sends is recorded, so the last test can check
that each route of the route table was called at least once."""
from __future__ import annotations

import base64
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from typing import Dict, Iterator, List, Set, Tuple

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
CLIENT_ROOT = os.path.dirname(HERE)
REPO = os.path.dirname(os.path.dirname(CLIENT_ROOT))
sys.path.insert(0, CLIENT_ROOT)

from steward_client import Steward  # noqa: E402
from steward_client._base import BaseClient  # noqa: E402
from steward_client._routes import route_table  # noqa: E402

OWNER_EMAIL = "owner@py-client.example"
OWNER_PASSWORD = "correct horse battery staple"
START_LIMIT = 120

# (method, path template) of every request sent during the session.
CALLED: Set[Tuple[str, str]] = set()
_TEMPLATES = [(r["method"], r["path"], re.compile("^" + re.sub(r"\{[^}]+\}", "[^/]+", r["path"]) + "$")) for r in route_table()]
_original_request = BaseClient.request


def _recording_request(self, method, path, **kwargs):  # type: ignore[no-untyped-def]
    for m, template, pattern in _TEMPLATES:
        if m == method and pattern.match(path):
            # A literal path beats a template (/agents/me/capabilities vs /agents/{agent_id}/…).
            CALLED.add((m, template))
            break
    return _original_request(self, method, path, **kwargs)


BaseClient.request = _recording_request  # type: ignore[assignment]
_TEMPLATES.sort(key=lambda t: t[1].count("{"))


def _node_env(data_dir: str, database_url: str | None) -> Dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "NODE_OPTIONS", "STEWARD_PASSWORD", "STEWARD_API_KEY", "STEWARD_BASE_URL")}
    env.update({
        "DATA_DIR": data_dir, "PORT": "0", "HOST": "127.0.0.1", "LOG_LEVEL": "info", "PASSWORD_HASH_COST": "10",
        "API_RATE_LIMIT": "100000/60", "API_ORG_RATE_LIMIT": "100000/60", "LOGIN_RATE_LIMIT": "1000/60",
    })
    if database_url:
        env["DATABASE_URL"] = database_url
        # On PostgreSQL the key that seals stored secrets (MCP headers, CAPTCHA secrets) is required.
        env["SECRETS_KEY"] = base64.urlsafe_b64encode(secrets.token_bytes(32)).rstrip(b"=").decode()
    return env


def _operator(args: List[str], env: Dict[str, str], password: str | None = None) -> str:
    run_env = dict(env)
    if password is not None:
        run_env["STEWARD_PASSWORD"] = password
    done = subprocess.run(["node", "cli/launch.mjs", *args], cwd=REPO, env=run_env, capture_output=True, text=True, timeout=START_LIMIT)
    if done.returncode != 0:
        raise RuntimeError(f"operator command {args[:2]} failed ({done.returncode}): {done.stderr[-2000:]}")
    return done.stdout.strip()


def _psql(url: str, sql: str) -> None:
    subprocess.run(["psql", url, "-qtAc", sql], check=True, capture_output=True, timeout=60)


class Live:
    """What the tests need of the running server."""

    def __init__(self, url: str, org_id: str, owner_key: str, env: Dict[str, str]) -> None:
        self.env = env
        self.url = url
        self.org_id = org_id
        self.owner_key = owner_key

    def client(self, key: str | None = None, **options) -> Steward:  # type: ignore[no-untyped-def]
        return Steward(api_key=key or self.owner_key, base_url=self.url, **options)


@pytest.fixture(scope="session")
def live() -> Iterator[Live]:
    tmp = tempfile.mkdtemp(prefix="steward-py-")
    test_db = os.environ.get("TEST_DATABASE_URL")
    database_url = None
    database = None
    if test_db:
        # A database of its own (not a schema): the server's migrator looks for its tables in
        # every schema on the search path, and other test runs leave theirs in the shared one.
        database = f"steward_py_{os.getpid()}_{secrets.token_hex(4)}"
        _psql(test_db, f"create database {database}")
        parts = urllib.parse.urlsplit(test_db)
        database_url = urllib.parse.urlunsplit(parts._replace(path="/" + database))
    env = _node_env(os.path.join(tmp, "data"), database_url)
    server = None
    try:
        # Started first, so the operator commands are carried out by it (over DATA_DIR's socket
        # on PGlite) instead of each opening the database again. The organization is the first
        # one of its database, so it is also the installation's leads organization.
        log = open(os.path.join(tmp, "server.log"), "w+")
        server = subprocess.Popen(["node", "cli/launch.mjs", "start"], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=log, text=True)
        url = _await_listening(server, log)
        # Keep draining stdout so the server never blocks on a full pipe.
        threading.Thread(target=lambda: [None for _ in server.stdout], daemon=True).start()  # type: ignore[union-attr]
        org_id = _operator(["org", "create", "--name", "Python client", "--owner-email", OWNER_EMAIL], env, OWNER_PASSWORD).splitlines()[-1]
        owner_key = _operator(["key", "create", "--org", org_id, "--role", "owner", "--name", "pytest"], env).splitlines()[-1]
        yield Live(url, org_id, owner_key, env)
    finally:
        if server is not None and server.poll() is None:
            server.terminate()
            try:
                server.wait(timeout=20)
            except subprocess.TimeoutExpired:
                server.kill()
        if database and test_db:
            try:
                _psql(test_db, f"drop database if exists {database} with (force)")
            except Exception:  # noqa: BLE001 - the database is throwaway; a failed drop only leaves litter
                pass
        shutil.rmtree(tmp, ignore_errors=True)


def _await_listening(server: subprocess.Popen, log) -> str:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + START_LIMIT
    assert server.stdout is not None
    while time.monotonic() < deadline:
        line = server.stdout.readline()
        if not line:
            log.seek(0)
            raise RuntimeError(f"the server exited ({server.wait()}) before listening: {log.read()[-2000:]}")
        try:
            parsed = json.loads(line)
        except ValueError:
            continue
        if parsed.get("msg") == "listening":
            return str(parsed["url"])
    raise RuntimeError("the server did not listen in time")


@pytest.fixture(scope="session")
def steward(live: Live) -> Steward:
    """A client with the organization's Owner key."""
    return live.client()


@pytest.fixture(scope="session")
def person(live: Live) -> Steward:
    """A client signed in as the organization's Owner (a person: may vote on approvals)."""
    client = Steward(api_key=None, base_url=live.url)
    client.sign_in(OWNER_EMAIL, OWNER_PASSWORD)
    return client


def unique(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(4)}"


@pytest.fixture(scope="session")
def other_org(live: Live) -> Live:
    """A second organization (its own Owner key), for policies as code: apply replaces a whole set."""
    org_id = _operator(["org", "create", "--name", "Policies as code", "--owner-email", "pac@py-client.example"], live.env, OWNER_PASSWORD).splitlines()[-1]
    key = _operator(["key", "create", "--org", org_id, "--role", "owner", "--name", "pac"], live.env).splitlines()[-1]
    return Live(live.url, org_id, key, live.env)


# An approval left to expire runs beside the whole session (the shortest approval timeout is
# 30 s): test_00 starts guard waiting on it, test_zz checks that guard raised ApprovalExpired.
EXPIRY: Dict[str, object] = {}


@pytest.fixture(scope="session")
def expiring(steward: Steward) -> Dict[str, object]:
    if EXPIRY:
        return EXPIRY
    steward.policies.create(name=unique("expire"), effect="require_approval", actions=["py.expire.*"], approval={"timeout_seconds": 30})
    handle = steward.agents.create(unique("expiring-bot"))["handle"]

    def wait() -> None:
        try:
            with steward.guard("py.expire.now", agent=handle, args={"n": 1}, timeout=120, on_approval=lambda a: EXPIRY.update(approval=dict(a))):
                EXPIRY["ran"] = True
        except BaseException as exc:  # noqa: BLE001 - the test inspects what was raised
            EXPIRY["raised"] = exc

    thread = threading.Thread(target=wait, daemon=True)
    EXPIRY["thread"] = thread
    EXPIRY["started"] = time.monotonic()
    thread.start()
    return EXPIRY
