"""steward-cli: every command group, tables and --json, exit codes, policies as code round trips."""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import pytest

from conftest import CLIENT_ROOT, OWNER_EMAIL, OWNER_PASSWORD, unique
from steward_client import _cli


@pytest.fixture
def cli(live, monkeypatch):
    monkeypatch.setenv("STEWARD_API_KEY", live.owner_key)
    monkeypatch.setenv("STEWARD_BASE_URL", live.url)
    monkeypatch.delenv("STEWARD_EMAIL", raising=False)
    monkeypatch.delenv("STEWARD_PASSWORD", raising=False)

    def run(*argv, key=None):
        if key:
            monkeypatch.setenv("STEWARD_API_KEY", key)
        out, err = io.StringIO(), io.StringIO()
        code = _cli.main(list(argv), stdout=out, stderr=err)
        monkeypatch.setenv("STEWARD_API_KEY", live.owner_key)
        return code, out.getvalue(), err.getvalue()

    return run


def test_help_everywhere(cli, capsys):
    for argv in (["--help"], ["decide", "--help"], ["approvals", "--help"], ["approvals", "wait", "--help"], ["agents", "create", "--help"],
                 ["policies", "plan", "--help"], ["policies", "apply", "--help"], ["audit", "export", "--help"], ["keys", "rotate", "--help"]):
        code, _, _ = cli(*argv)
        assert code == 0, argv
        assert "usage: steward-cli" in capsys.readouterr().out
    assert "Exit codes: 0 ok" in (lambda: (cli("--help"), capsys.readouterr().out)[1])()


def test_usage_errors_exit_2(cli, capsys):
    assert cli("bogus")[0] == 2
    assert cli("decide")[0] == 2
    code, _, err = cli("decide", "x.y", "--args", "{not json")
    assert code == 2 and "--args is not valid JSON" in err
    code, _, err = cli("policies", "plan", "-f", "/nonexistent/policies.json")
    assert code == 2 and "Cannot read" in err
    capsys.readouterr()


def test_decide_exit_codes_and_json(cli, steward):
    steward.policies.create(name=unique("cli-allow"), effect="allow", actions=["cli.allow.*"])
    steward.policies.create(name=unique("cli-approve"), effect="require_approval", actions=["cli.approve.*"])
    agent = steward.agents.create(unique("cli-bot"))["handle"]
    code, out, _ = cli("--json", "decide", "cli.deny.x", "--agent", agent, "--args", '{"a": 1}')
    assert code == 3 and json.loads(out)["reasons"] == [{"rule": "default_decision"}]
    code, out, _ = cli("decide", "cli.allow.x", "--agent", agent, "--resource", "r/1")
    assert code == 0 and "decision          allow" in out
    code, out, _ = cli("--json", "decide", "cli.approve.x", "--agent", agent)
    assert code == 4 and json.loads(out)["approval"]["status"] == "pending"
    code, out, err = cli("--json", "decide", "cli.approve.y", "--agent", agent, "--wait", "1")
    assert code == 4 and "still pending" in err and json.loads(out)["status"] == "pending"
    code, _, err = cli("agents", "get", "00000000-0000-4000-8000-000000000000")
    assert code == 1 and "404" in err


def test_approvals_commands(cli, steward, monkeypatch):
    steward.policies.create(name=unique("cli-approvals"), effect="require_approval", actions=["cli.vote.*"])
    agent = steward.agents.create(unique("cli-voter"))["handle"]
    yes = steward.decisions.decide("cli.vote.yes", agent=agent)["approval"]["approval_id"]
    no = steward.decisions.decide("cli.vote.no", agent=agent)["approval"]["approval_id"]
    gone = steward.decisions.decide("cli.vote.gone", agent=agent)["approval"]["approval_id"]
    code, out, _ = cli("approvals", "list", "--status", "pending")
    assert code == 0 and out.startswith("APPROVAL_ID") and yes in out
    code, out, _ = cli("--json", "approvals", "get", yes)
    assert json.loads(out)["approval_id"] == yes
    code, _, err = cli("approvals", "approve", yes)
    assert code == 1 and "403" in err  # a key cannot vote: a person must
    monkeypatch.setenv("STEWARD_PASSWORD", OWNER_PASSWORD)
    assert cli("--email", OWNER_EMAIL, "approvals", "approve", yes, "--note", "ok")[0] == 0
    assert cli("--email", OWNER_EMAIL, "approvals", "deny", no)[0] == 0
    assert cli("approvals", "cancel", gone)[0] == 0
    assert [cli("approvals", "wait", i, "--timeout", "5")[0] for i in (yes, no, gone)] == [0, 3, 3]


def test_agents_commands(cli):
    handle = unique("cli-agent")
    code, out, _ = cli("--json", "agents", "create", handle, "--display-name", "CLI", "--label", "team=py")
    created = json.loads(out)
    assert code == 0 and created["labels"] == {"team": "py"}
    aid = created["agent_id"]
    assert handle in cli("agents", "list", "--limit", "500")[1]
    assert cli("agents", "get", aid)[0] == 0
    assert json.loads(cli("--json", "agents", "update", aid, "--description", "d")[1])["description"] == "d"
    assert cli("agents", "update", aid)[0] == 2
    assert json.loads(cli("--json", "agents", "suspend", aid)[1])["status"] == "suspended"
    assert json.loads(cli("--json", "agents", "activate", aid)[1])["status"] == "active"
    assert json.loads(cli("--json", "agents", "key", aid, "--name", "k")[1])["api_key"].startswith("stw_key_")
    assert cli("agents", "capabilities", aid)[1].startswith("ACTION")
    assert cli("agents", "delete", aid) == (0, f"deleted {aid}\n", "")


def test_keys_audit_and_organization(cli, live, tmp_path):
    code, out, _ = cli("--json", "keys", "create", "--role", "viewer", "--name", "cli")
    key = json.loads(out)
    assert code == 0 and key["api_key"].startswith("stw_key_")
    listed = cli("keys", "list")[1]
    assert key["key_id"] in listed and key["api_key"] not in listed
    rotated = json.loads(cli("--json", "keys", "rotate", key["key_id"])[1])
    assert cli("keys", "revoke", rotated["key_id"]) == (0, f"revoked {rotated['key_id']}\n", "")
    assert cli("audit", "list", "--limit", "3")[1].startswith("EVENT_ID")
    assert json.loads(cli("--json", "audit", "verify")[1])["ok"] is True
    target = tmp_path / "audit.jsonl"
    code, _, err = cli("audit", "export", "--type", "key.created", "-o", str(target))
    lines = [json.loads(line) for line in target.read_text().splitlines()]
    assert code == 0 and lines and {e["type"] for e in lines} == {"key.created"} and f"exported {len(lines)} events" in err
    assert json.loads(cli("--json", "organization")[1])["organization_id"] == live.org_id
    assert OWNER_EMAIL in cli("members")[1]
    code, out, _ = cli("reports", "denials", "--tz", "Europe/Paris")
    assert code == 0 and "agents:" in out and "actions:" in out
    assert json.loads(cli("--json", "reports", "decisions", "--bucket", "day", "--group", "agent")[1])["bucket"] == "day"
    assert cli("reports", "bogus")[0] == 2


POLICIES = {"policies": [
    {"name": "Refunds need approval", "effect": "require_approval", "actions": ["payments.refund"], "approval": {"timeout_seconds": 300}},
    {"name": "Reads are fine", "effect": "allow", "actions": ["*.read"]},
]}

TOML = '''
[[policies]]
name = "Refunds need approval"
effect = "require_approval"
actions = ["payments.refund"]
condition = "args.amount > 100"
approval = { timeout_seconds = 300 }
'''


def test_policies_as_code_round_trip(cli, other_org, tmp_path):
    key = other_org.owner_key
    file = tmp_path / "policies.json"
    file.write_text(json.dumps(POLICIES))
    code, out, _ = cli("policies", "plan", "-f", str(file), key=key)
    assert code == 0 and "+ create   'Refunds need approval'" in out and "+ create   'Reads are fine'" in out and "= 0 unchanged" in out
    code, out, _ = cli("policies", "apply", "-f", str(file), key=key)
    assert code == 0 and "applied: 2 created, 0 changed, 0 archived" in out
    code, out, _ = cli("--json", "policies", "plan", "-f", str(file), key=key)
    plan = json.loads(out)
    assert (plan["create"], plan["change"], plan["archive"], plan["unchanged"]) == ([], [], [], 2)
    code, out, _ = cli("policies", "apply", "-f", str(file), key=key)
    assert code == 0 and "nothing to apply" in out
    # The TOML file changes one policy and drops the other.
    toml = tmp_path / "policies.toml"
    toml.write_text(TOML)
    code, out, _ = cli("--json", "policies", "plan", "-f", str(toml), key=key)
    plan = json.loads(out)
    assert [c["name"] for c in plan["change"]] == ["Refunds need approval"]
    assert plan["change"][0]["fields"]["condition"] == {"from": None, "to": "args.amount > 100"}
    assert [a["name"] for a in plan["archive"]] == ["Reads are fine"]
    stale = plan["base"]
    code, out, _ = cli("--json", "policies", "apply", "-f", str(toml), "--base", stale, key=key)
    applied = json.loads(out)
    assert code == 0 and applied["applied"] is True and len(applied["change"]) == 1 and len(applied["archive"]) == 1
    # A second apply against the old plan's base is refused: the set changed since.
    code, _, err = cli("policies", "apply", "-f", str(file), "--base", stale, key=key)
    assert code == 1 and "409" in err and "plan again" in err
    listed = json.loads(cli("--json", "policies", "list", key=key)[1])
    assert [p["name"] for p in listed] == ["Refunds need approval"]
    pid = listed[0]["policy_id"]
    assert cli("policies", "get", pid, key=key)[0] == 0
    assert cli("policies", "versions", pid, key=key)[1].startswith("VERSION")
    assert json.loads(cli("--json", "policies", "rollback", pid, "1", key=key)[1])["condition"] is None
    code, out, _ = cli("--json", "policies", "replay", "-f", str(file), key=key)
    assert code == 0 and json.loads(out)["evaluated"] == 0
    # Exported, the set in force is a file whose plan changes nothing.
    exported = tmp_path / "exported.json"
    code, _, err = cli("policies", "export", "-o", str(exported), key=key)
    assert code == 0 and err == f"wrote 1 policies to {exported}\n"
    assert [p["name"] for p in json.loads(exported.read_text())["policies"]] == ["Refunds need approval"]
    plan = json.loads(cli("--json", "policies", "plan", "-f", str(exported), key=key)[1])
    assert (plan["create"], plan["change"], plan["archive"], plan["unchanged"]) == ([], [], [], 1)


def test_toml_needs_python_3_11(tmp_path, monkeypatch):
    file = tmp_path / "p.toml"
    file.write_text(TOML)
    monkeypatch.setitem(sys.modules, "tomllib", None)
    with pytest.raises(_cli.UsageError, match="Python 3.11 or later"):
        _cli.load_policy_file(str(file))


def test_the_module_and_its_exit_code_from_a_real_process(live, steward):
    agent = steward.agents.create(unique("proc-bot"))["handle"]
    env = {**os.environ, "PYTHONPATH": CLIENT_ROOT, "STEWARD_API_KEY": live.owner_key, "STEWARD_BASE_URL": live.url}
    done = subprocess.run([sys.executable, "-m", "steward_client", "--json", "decide", "proc.x", "--agent", agent], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 3 and json.loads(done.stdout)["decision"] == "deny"
    assert live.owner_key not in done.stdout + done.stderr
