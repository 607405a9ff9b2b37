"""What steward-cli prints (tables, records, JSON) and the files it reads (policy files, JSON arguments)."""
from __future__ import annotations

import json
from typing import Any, Dict, Iterable, List, Optional, Sequence, TextIO


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
