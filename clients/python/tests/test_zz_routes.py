"""The route table covers every product route of the live server's OpenAPI document, each
entry's call is a method, and the session called every one of them at least once."""
import functools
import json
import subprocess
import sys

from conftest import CALLED, CLIENT_ROOT
from steward_client import Steward
from steward_client._routes import route_table

# Not the product API: public lead capture, discovery documents, health, the MCP transport.
NOT_PRODUCT_TAGS = {"Lead capture", "Discovery", "Health", "MCP", "Console"}


def product_routes(steward):
    document = steward.request("GET", "/openapi.json", auth=False).body
    routes = set()
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            if method in ("get", "post", "put", "patch", "delete") and not NOT_PRODUCT_TAGS & set(operation.get("tags") or []):
                routes.add((method.upper(), path))
    return routes


def test_every_product_route_has_a_callable_method(steward):
    table = {(r["method"], r["path"]) for r in route_table()}
    missing = sorted(f"{m} {p}" for m, p in product_routes(steward) - table)
    assert missing == [], "\n".join(missing)
    client = Steward(api_key="x", base_url="http://127.0.0.1:1")
    for row in route_table():
        assert callable(functools.reduce(getattr, row["call"].split("."), client)), row


def test_every_route_was_called_during_the_session(request):
    files = {item.fspath.basename for item in request.session.items}
    if not {"test_resources.py", "test_guard.py", "test_cli.py"} <= files:
        import pytest

        pytest.skip("only the whole suite calls every route")
    missing = sorted(f"{r['method']} {r['path']}" for r in route_table() if (r["method"], r["path"]) not in CALLED)
    assert missing == []


def test_the_contract_command_prints_the_table():
    out = subprocess.run([sys.executable, "-c", "import json; from steward_client._routes import route_table; print(json.dumps(route_table()))"],
                         env={"PYTHONPATH": CLIENT_ROOT}, capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == route_table()
