"""steward-cli's commands, one function per command group: call the API, print, answer an exit code."""
from __future__ import annotations

import argparse
import getpass
import json
import os
from typing import Any, Dict, List, Mapping, Optional, TextIO

from ._client import Steward

from ._cli_output import EXIT_DENY, EXIT_ERROR, EXIT_OK, EXIT_PENDING, Output, UsageError, _cell, _json_arg, load_policy_file, table


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
