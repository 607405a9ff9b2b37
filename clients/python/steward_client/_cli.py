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
import sys
from typing import Optional, Sequence, TextIO

from ._client import Steward
from ._errors import ActionDenied, APIConnectionError, APIStatusError, ApprovalExpired, ApprovalPending, ApprovalTimeout, StewardError
from ._version import __version__

from ._cli_commands import cmd_agents, cmd_approvals, cmd_audit, cmd_decide, cmd_keys, cmd_members, cmd_organization, cmd_policies, cmd_reports
# load_policy_file is part of this module's surface (tests and scripts call steward_client._cli.load_policy_file).
from ._cli_output import EXIT_DENY, EXIT_ERROR, EXIT_PENDING, EXIT_USAGE, Output, UsageError, load_policy_file  # noqa: F401


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
