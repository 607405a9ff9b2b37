"""A PEP 517 build backend in the standard library only, so ``pip install ./clients/python``
works on a machine that reaches no package index: setuptools would need ``wheel`` (and, with
build isolation, an index to fetch both from). It builds exactly one thing: a pure-Python wheel
of ``steward_client`` with its console script (and an sdist, and an editable wheel)."""
from __future__ import annotations

import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile
from typing import Dict, List, Optional, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "steward_client"
NAME = "steward_client"
DIST = "steward-client"
SUMMARY = "Python client, guard decorator and command line for Steward, the policy engine for AI agents' actions"
SCRIPTS = {"steward-cli": "steward_client._cli:run"}
TAG = "py3-none-any"


def _version() -> str:
    with open(os.path.join(ROOT, PACKAGE, "_version.py"), encoding="utf-8") as handle:
        match = re.search(r'__version__\s*=\s*"([^"]+)"', handle.read())
    if not match:
        raise RuntimeError("steward_client/_version.py holds no __version__")
    return match.group(1)


def _metadata() -> str:
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as handle:
        readme = handle.read()
    return (
        f"Metadata-Version: 2.1\nName: {DIST}\nVersion: {_version()}\nSummary: {SUMMARY}\n"
        "Requires-Python: >=3.9\nDescription-Content-Type: text/markdown\n\n" + readme
    )


def _package_files() -> List[Tuple[str, str]]:
    out = []
    base = os.path.join(ROOT, PACKAGE)
    for folder, dirs, files in os.walk(base):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith((".py", ".typed")):
                path = os.path.join(folder, name)
                out.append((path, os.path.relpath(path, ROOT).replace(os.sep, "/")))
    return out


def _record_line(arcname: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{arcname},sha256={digest},{len(data)}"


def _write_wheel(directory: str, files: Dict[str, bytes]) -> str:
    version = _version()
    info = f"{NAME}-{version}.dist-info"
    files = dict(files)
    files[f"{info}/METADATA"] = _metadata().encode()
    files[f"{info}/WHEEL"] = f"Wheel-Version: 1.0\nGenerator: steward-build\nRoot-Is-Purelib: true\nTag: {TAG}\n".encode()
    files[f"{info}/entry_points.txt"] = ("[console_scripts]\n" + "".join(f"{k} = {v}\n" for k, v in SCRIPTS.items())).encode()
    files[f"{info}/top_level.txt"] = f"{PACKAGE}\n".encode()
    record = [_record_line(name, data) for name, data in files.items()] + [f"{info}/RECORD,,"]
    files[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    filename = f"{NAME}-{version}-{TAG}.whl"
    with zipfile.ZipFile(os.path.join(directory, filename), "w", zipfile.ZIP_DEFLATED) as wheel:
        for name, data in files.items():
            entry = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
            entry.external_attr = 0o644 << 16
            wheel.writestr(entry, data, zipfile.ZIP_DEFLATED)
    return filename


def get_requires_for_build_wheel(config_settings: Optional[dict] = None) -> List[str]:
    return []


get_requires_for_build_sdist = get_requires_for_build_wheel
get_requires_for_build_editable = get_requires_for_build_wheel


def build_wheel(wheel_directory: str, config_settings: Optional[dict] = None, metadata_directory: Optional[str] = None) -> str:
    files = {}
    for path, arcname in _package_files():
        with open(path, "rb") as handle:
            files[arcname] = handle.read()
    return _write_wheel(wheel_directory, files)


def build_editable(wheel_directory: str, config_settings: Optional[dict] = None, metadata_directory: Optional[str] = None) -> str:
    # A .pth file puts this folder on sys.path: edits take effect without reinstalling.
    return _write_wheel(wheel_directory, {f"__editable__.{NAME}.pth": (ROOT + "\n").encode()})


def build_sdist(sdist_directory: str, config_settings: Optional[dict] = None) -> str:
    base = f"{NAME}-{_version()}"
    filename = f"{base}.tar.gz"
    extra = ["pyproject.toml", "README.md", "_build/backend.py"]
    with tarfile.open(os.path.join(sdist_directory, filename), "w:gz", format=tarfile.PAX_FORMAT) as tar:
        for path, arcname in _package_files() + [(os.path.join(ROOT, p), p) for p in extra]:
            tar.add(path, arcname=f"{base}/{arcname}", recursive=False)
        pkg_info = _metadata().encode()
        entry = tarfile.TarInfo(f"{base}/PKG-INFO")
        entry.size = len(pkg_info)
        tar.addfile(entry, io.BytesIO(pkg_info))
    return filename
