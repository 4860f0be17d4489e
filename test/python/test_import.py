import json
import os
import subprocess
import sys

PROBE = r"""
import json, sys
events = []
def hook(event, args):
    if event in ("open", "os.listdir", "os.scandir", "ctypes.dlopen", "subprocess.Popen"):
        events.append((event, str(args[0]) if args else ""))
sys.addaudithook(hook)
import mlbridge, mlbridge.serdes, mlbridge.cli, mlbridge.paths
from mlbridge.serdes import get_serdes
get_serdes("json"); get_serdes("bitstream"); get_serdes("protobuf")
print(json.dumps({"events": events}))
"""


def test_import_touches_no_build_folder_and_loads_no_cpp(tmp_path):
    build = tmp_path / "build-that-must-not-be-touched"
    env = {**os.environ, "MLBRIDGE_BUILD_DIR": str(build), "PATH": "/usr/bin:/bin"}
    env.pop("LD_LIBRARY_PATH", None)
    result = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, check=True
    )
    report = json.loads(result.stdout)
    touched = [e for e in report["events"] if "build" in e[1] and "site-packages" not in e[1]]
    assert touched == []
    # Third-party modules may dlopen(None) (the interpreter itself); nothing else is loaded.
    assert [e for e in report["events"] if e[0] == "ctypes.dlopen" and e[1] != "None"] == []
    assert [e for e in report["events"] if e[0] == "subprocess.Popen"] == []
    assert result.stderr == ""
