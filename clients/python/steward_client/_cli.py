"""``steward-cli`` (also ``python -m steward_client``): the API from a shell.

The key comes from ``STEWARD_API_KEY`` (never from an argument: arguments show in process
lists), the server from ``STEWARD_BASE_URL`` or ``--base-url``. Approving and denying need a
signed-in person: ``--email`` (or ``STEWARD_EMAIL``) with ``STEWARD_PASSWORD`` or a prompt.

Exit codes: 0 done (and, for decide, allowed); 1 an error (the API's, the network's, a broken
audit chain, a refused apply); 2 bad usage or an unreadable file; 3 denied (a deny decision, a
denied or cancelled approval); 4 an approval that is pending, expired or not decided in time.
"""
from __future__ import annotations

import argparse
import getpass
import json
import os
import sys
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, TextIO

from ._client import Steward
from ._errors import ActionDenied, APIConnectionError, APIStatusError, ApprovalExpired, ApprovalPending, ApprovalTimeout, StewardError
from ._version import __version__

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_DENY, EXIT_PENDING = 0, 1, 2, 3, 4


class UsageError(Exception):
    """Bad input found after parsing (a file that cannot be read, bad JSON): exit 2."""


# -- output ---------------------------------------------------------------------------------------


def _cell(value: Any, width: int = 48) -> str:
    if value is None:
        return "-"
    if isinstance(value, (dict, list)):
        text = json.dumps(value, separators=(",", ":"))
    else:
        text = str(value)
    text = text.replace("\n", " ")
    return text if len(text) <= width else text[: width - 1] + "…"


def table(rows: Iterable[Dict[str, Any]], columns: Sequence[str], out: TextIO) -> None:
    cells = [[_cell(row.get(col)) for col in columns] for row in rows]
    widths = [max([len(col)] + [len(r[i]) for r in cells]) for i, col in enumerate(columns)]
    out.write("  ".join(col.upper().ljust(widths[i]) for i, col in enumerate(columns)).rstrip() + "\n")
    for r in cells:
        out.write("  ".join(r[i].ljust(widths[i]) for i in range(len(columns))).rstrip() + "\n")
    if not cells:
        out.write("(none)\n")


def record(obj: Dict[str, Any], out: TextIO) -> None:
    width = max([len(k) for k in obj] + [1])
    for key, value in obj.items():
        out.write(f"{key.ljust(width)}  {_cell(value, 200)}\n")


class Output:
    def __init__(self, as_json: bool, out: TextIO, err: TextIO) -> None:
        self.json = as_json
        self.out = out
        self.err = err

    def emit(self, value: Any, columns: Optional[Sequence[str]] = None) -> None:
        if self.json:
            self.out.write(json.dumps(value, indent=2, ensure_ascii=False) + "\n")
        elif isinstance(value, list):
            table(value, columns or (list(value[0].keys())[:6] if value else ["id"]), self.out)
        elif isinstance(value, dict):
            record(value, self.out)
        elif value is not None:
            self.out.write(f"{value}\n")


# -- input ------------------------------------------------------------------------------------------


def _json_arg(text: Optional[str], name: str) -> Optional[Dict[str, Any]]:
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise UsageError(f"{name} is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise UsageError(f"{name} must be a JSON object")
    return value


def load_policy_file(path: str) -> List[Dict[str, Any]]:
    """Reads ``{"policies": [...]}`` from a .json file or ``[[policies]]`` tables from a .toml file."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except OSError as exc:
        raise UsageError(f"Cannot read {path}: {exc.strerror}") from None
    if path.endswith(".toml"):
        try:
            import tomllib  # type: ignore[import-not-found]
        except ImportError:
            raise UsageError("Reading TOML needs Python 3.11 or later (tomllib); write the file as JSON or use a newer Python") from None
        try:
            data: Any = tomllib.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise UsageError(f"{path} is not valid TOML: {exc}") from None
    else:
        try:
            data = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise UsageError(f"{path} is not valid JSON: {exc}") from None
    policies = data.get("policies") if isinstance(data, dict) else data
    if not isinstance(policies, list) or not all(isinstance(p, dict) for p in policies):
        raise UsageError(f'{path} must hold {{"policies": [ {{...}}, ... ]}} (in TOML: [[policies]] tables)')
    return policies


# -- commands ---------------------------------------------------------------------------------------


def _items(paginator: Any, limit: Optional[int]) -> List[Dict[str, Any]]:
    return paginator.to_list(limit)


def _decision_exit(decision: Mapping[str, Any]) -> int:
    outcome = decision.get("decision")
    return EXIT_OK if outcome == "allow" else EXIT_PENDING if outcome == "require_approval" else EXIT_DENY


def cmd_decide(c: Steward, a: argparse.Namespace, o: Output) -> int:
    args = _json_arg(a.args, "--args")
    context = _json_arg(a.context, "--context")
    if a.wait is not None:
        guard = c.guard(a.action, resource=a.resource, agent=a.agent, context=context, args=args or {}, timeout=a.wait, approval_id=a.approval_id)
        decision = guard.__enter__()
        o.emit(decision)
        return EXIT_OK
    decision = c.decisions.decide(a.action, resource=a.resource, args=args, context=context, agent=a.agent, approval_id=a.approval_id)
    o.emit(decision)
    return _decision_exit(decision)


APPROVAL_COLUMNS = ["approval_id", "status", "agent", "action", "resource", "expires_at"]


def _approval_exit(approval: Mapping[str, Any]) -> int:
    status = approval.get("status")
    if status in ("approved", "consumed"):
        return EXIT_OK
    if status in ("denied", "cancelled"):
        return EXIT_DENY
    return EXIT_PENDING


def cmd_approvals(c: Steward, a: argparse.Namespace, o: Output) -> int:
    if a.sub == "list":
        o.emit(_items(c.approvals.list(status=a.status), a.limit), APPROVAL_COLUMNS)
        return EXIT_OK
    if a.sub == "get":
        o.emit(c.approvals.get(a.approval_id))
        return EXIT_OK
    if a.sub == "wait":
        approval = c.approvals.wait(a.approval_id, timeout=a.timeout)
        o.emit(approval)
        return _approval_exit(approval)
    if a.sub in ("approve", "deny"):
        _ensure_person(c, a)
        method = c.approvals.approve if a.sub == "approve" else c.approvals.deny
        o.emit(method(a.approval_id, note=a.note))
        return EXIT_OK
    o.emit(c.approvals.cancel(a.approval_id))
    return EXIT_OK


AGENT_COLUMNS = ["agent_id", "handle", "status", "display_name", "last_seen_at"]


def cmd_agents(c: Steward, a: argparse.Namespace, o: Output) -> int:
    if a.sub == "list":
        o.emit(_items(c.agents.list(status=a.status), a.limit), AGENT_COLUMNS)
    elif a.sub == "get":
        o.emit(c.agents.get(a.agent_id))
    elif a.sub == "create":
        labels = dict(_label(x) for x in a.label or [])
        o.emit(c.agents.create(a.handle, display_name=a.display_name, description=a.description, labels=labels or None))
    elif a.sub == "update":
        fields: Dict[str, Any] = {}
        if a.display_name is not None:
            fields["display_name"] = a.display_name
        if a.description is not None:
            fields["description"] = a.description
        if a.label:
            fields["labels"] = dict(_label(x) for x in a.label)
        if not fields:
            raise UsageError("Nothing to change: give --display-name, --description or --label")
        o.emit(c.agents.update(a.agent_id, **fields))
    elif a.sub == "suspend":
        o.emit(c.agents.suspend(a.agent_id))
    elif a.sub == "activate":
        o.emit(c.agents.activate(a.agent_id))
    elif a.sub == "delete":
        c.agents.delete(a.agent_id)
        if not o.json:
            o.out.write(f"deleted {a.agent_id}\n")
        else:
            o.emit({"deleted": a.agent_id})
    elif a.sub == "key":
        o.emit(c.agents.create_key(a.agent_id, name=a.name))
    elif a.sub == "capabilities":
        o.emit(c.agents.capabilities(a.agent_id), ["action", "decision", "condition", "otherwise"])
    return EXIT_OK


def _label(text: str) -> tuple:
    if "=" not in text:
        raise UsageError(f"--label takes key=value, not {text!r}")
    key, value = text.split("=", 1)
    return key, value


POLICY_COLUMNS = ["policy_id", "name", "effect", "mode", "version", "actions"]


def _show_plan(plan: Mapping[str, Any], out: TextIO) -> None:
    for item in plan.get("create") or []:
        policy = item.get("policy") or {}
        out.write(f"+ create   {item.get('name')!r}  ({policy.get('effect')}, actions {_cell(policy.get('actions'))})\n")
    for item in plan.get("change") or []:
        out.write(f"~ change   {item.get('name')!r}  (v{item.get('version')}, {item.get('policy_id')})\n")
        for field, diff in (item.get("fields") or {}).items():
            out.write(f"      {field}: {_cell(diff.get('from'), 80)} -> {_cell(diff.get('to'), 80)}\n")
    for item in plan.get("archive") or []:
        out.write(f"- archive  {item.get('name')!r}  (v{item.get('version')}, {item.get('policy_id')})\n")
    out.write(f"= {plan.get('unchanged', 0)} unchanged\n")
    replay = plan.get("replay")
    if replay:
        changed = replay.get("changed") or {}
        what = ", ".join(f"{k}: {v}" for k, v in changed.items()) or "no decision would change"
        out.write(f"replay: {replay.get('evaluated', 0)} logged decisions decided again; {what}\n")
    out.write(f"base: {plan.get('base')}\n")


def _plan_is_empty(plan: Mapping[str, Any]) -> bool:
    return not (plan.get("create") or plan.get("change") or plan.get("archive"))


def cmd_policies(c: Steward, a: argparse.Namespace, o: Output) -> int:
    if a.sub == "list":
        o.emit(_items(c.policies.list(archived=True if a.archived else None), a.limit), POLICY_COLUMNS)
    elif a.sub == "get":
        o.emit(c.policies.get(a.policy_id))
    elif a.sub == "versions":
        o.emit(_items(c.policies.versions.list(a.policy_id), a.limit), ["version", "name", "effect", "mode", "enabled", "archived", "updated_at"])
    elif a.sub == "rollback":
        o.emit(c.policies.rollback(a.policy_id, a.version))
    elif a.sub == "replay":
        o.emit(c.policies.replay(load_policy_file(a.file), from_=a.from_, to=a.to, limit=a.replay_limit))
    elif a.sub == "plan":
        replay = {k: v for k, v in {"from": a.from_, "to": a.to, "limit": a.replay_limit}.items() if v is not None}
        plan = c.policies.plan(load_policy_file(a.file), replay=replay or None)
        if o.json:
            o.emit(plan)
        else:
            _show_plan(plan, o.out)
    elif a.sub == "export":
        # The policies in force as a file for plan/apply: only the fields a POST /policies takes.
        fields = ("name", "description", "effect", "agents", "actions", "resources", "condition", "approval", "mode", "enabled", "limits")
        policies = [{k: p[k] for k in fields if p.get(k) is not None} for p in c.policies.list()]
        text = json.dumps({"policies": policies}, indent=2, ensure_ascii=False) + "\n"
        if a.output:
            with open(a.output, "w", encoding="utf-8") as handle:
                handle.write(text)
            o.err.write(f"wrote {len(policies)} policies to {a.output}\n")
        else:
            o.out.write(text)
    elif a.sub == "apply":
        policies = load_policy_file(a.file)
        base = a.base
        if base is None:
            plan = c.policies.plan(policies)
            if not o.json:
                _show_plan(plan, o.out)
            if _plan_is_empty(plan) and not o.json:
                o.out.write("nothing to apply\n")
            base = plan["base"]
        result = c.policies.apply(policies, base=base)
        if o.json:
            o.emit(result)
        elif result.get("applied"):
            o.out.write(f"applied: {len(result.get('create') or [])} created, {len(result.get('change') or [])} changed, {len(result.get('archive') or [])} archived\n")
        elif a.base is not None:
            o.out.write("nothing to apply\n")
    return EXIT_OK


AUDIT_COLUMNS = ["event_id", "occurred_at", "type", "actor", "target"]


def cmd_audit(c: Steward, a: argparse.Namespace, o: Output) -> int:
    if a.sub == "list":
        o.emit(_items(c.audit.list(type=a.type, from_=a.from_, to=a.to), a.limit), AUDIT_COLUMNS)
        return EXIT_OK
    if a.sub == "verify":
        result = c.audit.verify()
        o.emit(result)
        if not result.get("ok"):
            o.err.write("steward-cli: the audit chain does not verify\n")
            return EXIT_ERROR
        return EXIT_OK
    # export: every event in the window, one JSON object a line (newest first, as listed).
    target = open(a.output, "w", encoding="utf-8") if a.output else o.out
    count = 0
    try:
        for event in c.audit.list(type=a.type, from_=a.from_, to=a.to, limit=100):
            target.write(json.dumps(event, ensure_ascii=False, separators=(",", ":")) + "\n")
            count += 1
    finally:
        if a.output:
            target.close()
    if a.output:
        o.err.write(f"exported {count} events to {a.output}\n")
    return EXIT_OK


KEY_COLUMNS = ["key_id", "prefix", "role", "name", "expires_at", "revoked_at", "last_used_at"]


def cmd_keys(c: Steward, a: argparse.Namespace, o: Output) -> int:
    if a.sub == "list":
        o.emit(c.keys.list(), KEY_COLUMNS)
    elif a.sub == "create":
        o.emit(c.keys.create(a.role, name=a.name))
    elif a.sub == "rotate":
        o.emit(c.keys.rotate(a.key_id, expires_in=a.expires_in))
    elif a.sub == "revoke":
        c.keys.revoke(a.key_id)
        o.emit({"revoked": a.key_id} if o.json else f"revoked {a.key_id}")
    return EXIT_OK


def cmd_organization(c: Steward, a: argparse.Namespace, o: Output) -> int:
    o.emit(c.organization.get())
    return EXIT_OK


def cmd_members(c: Steward, a: argparse.Namespace, o: Output) -> int:
    o.emit(c.members.list(), ["user_id", "email", "role", "created_at"])
    return EXIT_OK


def cmd_reports(c: Steward, a: argparse.Namespace, o: Output) -> int:
    window = {"from_": a.from_, "to": a.to, "tz": a.tz}
    method = getattr(c.reports, a.sub)
    extra = {"bucket": a.bucket, "group": a.group} if a.sub == "decisions" else {}
    report = method(**window, **extra)
    if o.json:
        o.emit(report)
        return EXIT_OK
    o.out.write(f"{report.get('from')} to {report.get('to')}\n")
    for key, value in report.items():
        if key in ("from", "to", "tz"):
            continue
        if isinstance(value, list) and value and isinstance(value[0], dict):
            o.out.write(f"\n{key}:\n")
            table(value, [k for k in value[0].keys() if k != "points"][:6], o.out)
        else:
            o.out.write(f"{key}: {_cell(value, 200)}\n")
    return EXIT_OK


def _ensure_person(c: Steward, a: argparse.Namespace) -> None:
    email = a.email or os.environ.get("STEWARD_EMAIL")
    if not email:
        return  # the server answers 403 for a key; its message says a person must vote
    password = os.environ.get("STEWARD_PASSWORD")
    if password is None:
        password = getpass.getpass(f"Password for {email}: ")
    c.sign_in(email, password)


# -- parser -----------------------------------------------------------------------------------------


def _list_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--limit", type=int, default=100, help="at most this many items (pages are followed; default 100)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="steward-cli",
        description="Steward from the command line. The key comes from STEWARD_API_KEY, the server from STEWARD_BASE_URL.",
        epilog="Exit codes: 0 ok (decide: allowed), 1 error, 2 usage, 3 denied, 4 approval pending, expired or not decided in time.",
    )
    parser.add_argument("--version", action="version", version=f"steward-cli {__version__}")
    parser.add_argument("--base-url", help="the server (default STEWARD_BASE_URL)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per request (default 60)")
    parser.add_argument("--email", help="sign in as this person (for approve/deny); password from STEWARD_PASSWORD or a prompt")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = commands.add_parser("decide", help="ask whether an agent may act now", description="Ask for a decision. Exit 0 allow, 3 deny, 4 approval required (or, with --wait, not granted in time).")
    p.add_argument("action", help="the action, e.g. payments.refund")
    p.add_argument("--agent", help="the agent's handle (default: the key's own agent)")
    p.add_argument("--resource", help="the resource, e.g. order/8812")
    p.add_argument("--args", help="the arguments as a JSON object")
    p.add_argument("--context", help="the context as a JSON object")
    p.add_argument("--approval-id", help="use a granted approval")
    p.add_argument("--wait", type=float, metavar="SECONDS", help="on require_approval, wait this long for the people, then decide again with the approval")
    p.set_defaults(run=cmd_decide)

    p = commands.add_parser("approvals", help="list, wait for, approve, deny or cancel approvals", description="Approvals asked for by require_approval decisions.")
    sub = p.add_subparsers(dest="sub", metavar="SUBCOMMAND", required=True)
    q = sub.add_parser("list", help="list approvals (oldest first)")
    q.add_argument("--status", choices=["pending", "approved", "denied", "expired", "cancelled", "consumed"])
    _list_options(q)
    q = sub.add_parser("get", help="one approval")
    q.add_argument("approval_id")
    q = sub.add_parser("wait", help="wait until an approval is decided (exit 0 approved, 3 denied/cancelled, 4 expired/still pending)")
    q.add_argument("approval_id")
    q.add_argument("--timeout", type=float, default=900.0, help="seconds to wait (default 900)")
    for name in ("approve", "deny"):
        q = sub.add_parser(name, help=f"{name} (a signed-in person: --email)")
        q.add_argument("approval_id")
        q.add_argument("--note", help="a note for the record (at most 1000 characters)")
    q = sub.add_parser("cancel", help="cancel a pending approval")
    q.add_argument("approval_id")
    p.set_defaults(run=cmd_approvals)

    p = commands.add_parser("agents", help="list, create, change, suspend or delete agents", description="The organization's agents.")
    sub = p.add_subparsers(dest="sub", metavar="SUBCOMMAND", required=True)
    q = sub.add_parser("list", help="list agents (newest first)")
    q.add_argument("--status", choices=["active", "suspended", "discovered"])
    _list_options(q)
    for name, text in (("get", "one agent"), ("suspend", "suspend: its next decision is a deny"), ("activate", "make active"), ("delete", "delete it and its keys"), ("capabilities", "what it may do")):
        q = sub.add_parser(name, help=text)
        q.add_argument("agent_id")
    q = sub.add_parser("create", help="register an agent")
    q.add_argument("handle")
    q.add_argument("--display-name")
    q.add_argument("--description")
    q.add_argument("--label", action="append", metavar="KEY=VALUE")
    q = sub.add_parser("update", help="change an agent")
    q.add_argument("agent_id")
    q.add_argument("--display-name")
    q.add_argument("--description")
    q.add_argument("--label", action="append", metavar="KEY=VALUE", help="replaces the labels")
    q = sub.add_parser("key", help="create a key bound to the agent (the secret is shown once)")
    q.add_argument("agent_id")
    q.add_argument("--name")
    p.set_defaults(run=cmd_agents)

    p = commands.add_parser("policies", help="list, read, replay, plan and apply policies", description="Policies; plan and apply keep them as code in a file.")
    sub = p.add_subparsers(dest="sub", metavar="SUBCOMMAND", required=True)
    q = sub.add_parser("list", help="the policies in force")
    q.add_argument("--archived", action="store_true", help="the archived ones instead")
    _list_options(q)
    q = sub.add_parser("get", help="one policy")
    q.add_argument("policy_id")
    q = sub.add_parser("versions", help="a policy's versions")
    q.add_argument("policy_id")
    _list_options(q)
    q = sub.add_parser("rollback", help="a new version equal to an old one")
    q.add_argument("policy_id")
    q.add_argument("version", type=int)
    for name, text in (("replay", "decide logged decisions again against the file's policies as drafts"),
                       ("plan", "show the difference between the file and the policies in force"),
                       ("apply", "make the file the policies in force, atomically (plans first unless --base)")):
        q = sub.add_parser(name, help=text, description=text + ". The file: JSON {\"policies\": [...]} or TOML [[policies]] tables (Python 3.11+).")
        q.add_argument("-f", "--file", required=True, help="policies.json or policies.toml")
        if name != "apply":
            q.add_argument("--from", dest="from_", help="replay decisions from (ISO 8601)")
            q.add_argument("--to", help="replay decisions until (ISO 8601)")
            q.add_argument("--replay-limit", type=int, help="replay at most this many decisions")
        else:
            q.add_argument("--base", help="the base of a plan you reviewed: refuse (exit 1) if the policies changed since")
    q = sub.add_parser("export", help="the policies in force as a policies.json to plan and apply from")
    q.add_argument("-o", "--output", help="write to this file instead of stdout")
    p.set_defaults(run=cmd_policies)

    p = commands.add_parser("audit", help="list, verify or export the audit log", description="The organization's audit log.")
    sub = p.add_subparsers(dest="sub", metavar="SUBCOMMAND", required=True)
    for name, text in (("list", "events, newest first"), ("export", "every event as JSON lines")):
        q = sub.add_parser(name, help=text)
        q.add_argument("--type", help="event types, comma-separated")
        q.add_argument("--from", dest="from_", help="from (ISO 8601, inclusive)")
        q.add_argument("--to", help="to (ISO 8601, exclusive)")
        if name == "list":
            _list_options(q)
        else:
            q.add_argument("-o", "--output", help="write to this file instead of stdout")
    sub.add_parser("verify", help="check the seal chain (exit 1 when broken)")
    p.set_defaults(run=cmd_audit)

    p = commands.add_parser("keys", help="list, create, rotate or revoke API keys", description="Organization API keys.")
    sub = p.add_subparsers(dest="sub", metavar="SUBCOMMAND", required=True)
    sub.add_parser("list", help="the keys (never their secrets)")
    q = sub.add_parser("create", help="a new key (the secret is shown once)")
    q.add_argument("--role", required=True, choices=["owner", "admin", "manager", "member", "viewer"])
    q.add_argument("--name")
    q = sub.add_parser("rotate", help="a new key; the old one stops (at once or after --expires-in seconds)")
    q.add_argument("key_id")
    q.add_argument("--expires-in", type=int)
    q = sub.add_parser("revoke", help="revoke a key and what it made")
    q.add_argument("key_id")
    p.set_defaults(run=cmd_keys)

    p = commands.add_parser("organization", help="the organization and its decision settings")
    p.set_defaults(run=cmd_organization)

    p = commands.add_parser("members", help="the organization's members and their roles")
    p.set_defaults(run=cmd_members)

    p = commands.add_parser("reports", help="decisions, denials, approvals, policies, agents over a window", description="Reports over a window (the last 7 days by default).")
    sub = p.add_subparsers(dest="sub", metavar="REPORT", required=True)
    for name, text in (("decisions", "decisions over time"), ("denials", "the most denied agents and actions"), ("approvals", "outcomes, time to decision, what waits"),
                       ("policies", "hits per policy, unmatched policies"), ("agents", "agents active, discovered and gone"), ("leads", "leads per day, source and list")):
        q = sub.add_parser(name, help=text)
        q.add_argument("--from", dest="from_", help="from (ISO 8601)")
        q.add_argument("--to", help="to (ISO 8601)")
        q.add_argument("--tz", help="an IANA time zone (default UTC)")
        if name == "decisions":
            q.add_argument("--bucket", choices=["hour", "day"])
            q.add_argument("--group", choices=["outcome", "agent", "action", "policy"])
    p.set_defaults(run=cmd_reports)
    return parser


def main(argv: Optional[Sequence[str]] = None, *, stdout: Optional[TextIO] = None, stderr: Optional[TextIO] = None) -> int:
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    parser = build_parser()
    try:
        a = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    output = Output(a.json, out, err)
    try:
        client = Steward(base_url=a.base_url, timeout=a.timeout)
        return a.run(client, a, output)
    except UsageError as exc:
        err.write(f"steward-cli: {exc}\n")
        return EXIT_USAGE
    except ValueError as exc:
        err.write(f"steward-cli: {exc}\n")
        return EXIT_USAGE
    except (ApprovalPending, ApprovalExpired, ApprovalTimeout) as exc:
        if a.json and exc.approval:
            output.emit(exc.approval)
        err.write(f"steward-cli: {exc}\n")
        return EXIT_PENDING
    except ActionDenied as exc:
        if a.json and exc.decision:
            output.emit(exc.decision)
        err.write(f"steward-cli: {exc}\n")
        return EXIT_DENY
    except APIStatusError as exc:
        err.write(f"steward-cli: {exc}\n")
        return EXIT_ERROR
    except (APIConnectionError, StewardError) as exc:
        err.write(f"steward-cli: {exc}\n")
        return EXIT_ERROR
    except KeyboardInterrupt:
        err.write("steward-cli: interrupted\n")
        return 130


def run() -> None:
    """The console script's entry point."""
    sys.exit(main())
