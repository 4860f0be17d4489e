import os
import subprocess
import sys
import textwrap

import pytest
from conftest import REPO

import mlbridge
from mlbridge.cli import main


def run_cli(*args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "mlbridge", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
    )


def test_help_explains_each_command():
    result = run_cli("--help")
    assert result.returncode == 0
    assert "build" in result.stdout and "plugin-path" in result.stdout
    assert "print the absolute path of a built pass plugin" in result.stdout


def test_version_prints_the_package_version(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"mlbridge {mlbridge.__version__}"


def test_build_help_lists_its_options(capsys):
    with pytest.raises(SystemExit):
        main(["build", "--help"])
    out = capsys.readouterr().out
    for option in ("--build-dir", "--source-dir", "--build-type", "-j", "--cmake-arg"):
        assert option in out


def test_plugin_path_when_unbuilt_fails_telling_to_build(tmp_path, capsys):
    assert main(["plugin-path", "llvm", "--build-dir", str(tmp_path)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("mlbridge: error: ")
    assert "MLBridgeLLVMPlugin.so" in captured.err and "mlbridge build" in captured.err


@pytest.mark.parametrize(
    ("kind", "name"),
    [("llvm", "MLBridgeLLVMPlugin.so"), ("llc", "MLBridgeLLCPlugin.so"),
     ("mlir", "MLBridgeMLIRPlugin.so")],
)  # fmt: skip
def test_plugin_path_prints_the_absolute_path_of_a_built_plugin(tmp_path, capsys, kind, name):
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / name).write_bytes(b"")
    assert main(["plugin-path", kind, "--build-dir", str(tmp_path)]) == 0
    assert capsys.readouterr().out == f"{tmp_path / 'lib' / name}\n"


def test_plugin_path_uses_the_build_dir_environment_variable(tmp_path):
    result = run_cli("plugin-path", "mlir", env={"MLBRIDGE_BUILD_DIR": str(tmp_path)})
    assert result.returncode == 1
    assert str(tmp_path / "lib" / "MLBridgeMLIRPlugin.so") in result.stderr


def test_plugin_path_rejects_unknown_kinds():
    result = run_cli("plugin-path", "gcc")
    assert result.returncode == 2
    assert "invalid choice" in result.stderr


def test_build_with_a_source_dir_without_cmakelists_is_an_error(tmp_path, capsys):
    assert main(["build", "--source-dir", str(tmp_path), "--build-dir", str(tmp_path)]) == 1
    assert "has no CMakeLists.txt" in capsys.readouterr().err


FAKE_TOOL = """\
#!/bin/sh
echo "$(basename "$0") $*" >> "{log}"
if [ "$1" = "-S" ]; then touch "$4/build.ninja" "$4/CMakeCache.txt"; fi
echo "fake $(basename "$0") output"
"""


@pytest.fixture
def fake_tools(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "calls.log"
    for tool in ("cmake", "ninja"):
        path = bin_dir / tool
        path.write_text(textwrap.dedent(FAKE_TOOL.format(log=log)))
        path.chmod(0o755)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}, log


def test_build_configures_then_builds_streaming_output_to_stderr(tmp_path, fake_tools):
    env, log = fake_tools
    build = tmp_path / "build"
    result = run_cli("build", "--build-dir", str(build), "-j", "2", env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    assert "step 1/2, configure" in result.stderr and "step 2/2, build" in result.stderr
    assert "fake cmake output" in result.stderr
    configure, build_call = log.read_text().splitlines()
    assert f"-S {REPO} -B {build} -G Ninja" in configure
    assert f"-DMLBRIDGE_ONNXRUNTIME_ROOT={REPO / '.deps' / 'onnxruntime'}" in configure
    assert build_call == f"cmake --build {build} -j 2"


def test_build_skips_configure_when_arguments_are_unchanged(tmp_path, fake_tools):
    env, log = fake_tools
    build = tmp_path / "build"
    assert run_cli("build", "--build-dir", str(build), env=env).returncode == 0
    second = run_cli("build", "--build-dir", str(build), env=env)
    assert "already configured" in second.stderr
    third = run_cli("build", "--build-dir", str(build), "--cmake-arg=-DX=1", env=env)
    assert third.returncode == 0
    calls = log.read_text().splitlines()
    assert [c.split()[1] for c in calls] == ["-S", "--build", "--build", "-S", "--build"]
    assert calls[3].endswith("-DX=1")


def test_build_failure_is_reported_as_an_error(tmp_path, fake_tools):
    env, _ = fake_tools
    (tmp_path / "bin" / "cmake").write_text("#!/bin/sh\necho boom\nexit 3\n")
    result = run_cli("build", "--build-dir", str(tmp_path / "b"), env=env)
    assert result.returncode == 1
    assert "boom" in result.stderr
    assert "mlbridge: error: step 1/2, configure failed (exit status 3)" in result.stderr
