"""`pip install .` gives the pure-Python model side: no LLVM, no build folder."""

import os
import shutil
import subprocess
import sys
import zipfile

from conftest import REPO

USE_INSTALLED = r"""
import numpy as np
import mlbridge
from mlbridge.serdes import Message, MessageKind, get_serdes
from mlbridge.tensor import Tensor
from mlbridge.tensor_spec import ElementType

x = Tensor("x", ElementType.FLOAT, np.array([2.0], np.float32))
msg = Message(MessageKind.OBSERVATION, 0, [x])
for kind in ("bitstream", "json", "protobuf"):
    serdes = get_serdes(kind)
    if kind == "bitstream":
        from mlbridge.serdes import Header
        from mlbridge.tensor_spec import TensorSpec
        data = serdes.encode_stream([Header([TensorSpec("x", ElementType.FLOAT, (1,))]), msg])
    else:
        data = serdes.encode_stream([msg])
    assert serdes.decode_stream(data)[-1] == msg, kind
print(mlbridge.__file__)
"""


def test_wheel_is_pure_python_and_works_in_a_fresh_environment(tmp_path):
    # Build from a copy of what the package is made of: setuptools writes its
    # build tree and egg-info next to the sources, which must not race with
    # another run in the checkout.
    source = tmp_path / "source"
    shutil.copytree(
        REPO / "mlbridge", source / "mlbridge", ignore=shutil.ignore_patterns("__pycache__")
    )
    for name in ("pyproject.toml", "setup.cfg", "README.md"):
        shutil.copy(REPO / name, source / name)
    wheels = tmp_path / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(source)],
        check=True,
        capture_output=True,
    )
    (wheel,) = wheels.glob("mlbridge-*.whl")
    assert wheel.name.endswith("-py3-none-any.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert not [n for n in names if n.endswith((".so", ".dylib", ".dll"))]
    assert "mlbridge/serdes/_proto/mlbridge/v1/tensor_pb2.py" in names

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    # Dependencies come from the package's own metadata, as for any user.
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(wheel)],
        check=True,
        capture_output=True,
    )
    result = subprocess.run(
        [str(python), "-c", USE_INSTALLED], cwd=tmp_path, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert str(venv) in result.stdout  # the installed copy, not the checkout

    # Without a build folder (run_tests.py sets MLBRIDGE_BUILD_DIR for pytest).
    env = {k: v for k, v in os.environ.items() if k != "MLBRIDGE_BUILD_DIR"}
    cli = subprocess.run(
        [str(venv / "bin" / "mlbridge"), "plugin-path", "llvm"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
    )
    assert cli.returncode == 1
    assert "mlbridge: error:" in cli.stderr
