"""The in-tree build backend makes a wheel with every module and the console script (CI also
installs it with pip --no-index into a fresh venv)."""
import importlib.util
import os
import zipfile

from conftest import CLIENT_ROOT


def test_the_wheel_holds_the_package_and_the_console_script(tmp_path):
    spec = importlib.util.spec_from_file_location("steward_build_backend", os.path.join(CLIENT_ROOT, "_build", "backend.py"))
    backend = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(backend)
    assert backend.get_requires_for_build_wheel() == []
    name = backend.build_wheel(str(tmp_path))
    assert name == "steward_client-0.1.0-py3-none-any.whl"
    with zipfile.ZipFile(tmp_path / name) as wheel:
        names = set(wheel.namelist())
        modules = {f"steward_client/{f}" for f in os.listdir(os.path.join(CLIENT_ROOT, "steward_client")) if f.endswith(".py")}
        assert modules <= names and "steward_client/py.typed" in names
        assert wheel.read("steward_client-0.1.0.dist-info/entry_points.txt").decode() == "[console_scripts]\nsteward-cli = steward_client._cli:run\n"
        assert b"Requires-Python: >=3.9" in wheel.read("steward_client-0.1.0.dist-info/METADATA")
        record = wheel.read("steward_client-0.1.0.dist-info/RECORD").decode().splitlines()
        assert len(record) == len(names)
    sdist = backend.build_sdist(str(tmp_path))
    assert sdist == "steward_client-0.1.0.tar.gz"
