import os
import subprocess
import sys

import pytest

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


TINY_PROJECT = """\
cmake_minimum_required(VERSION 3.20)
project(tiny NONE)
message(STATUS "tiny: configured with X=${X}")
add_custom_target(hello ALL COMMAND ${CMAKE_COMMAND} -E echo "tiny: built")
"""


@pytest.fixture
def tiny_source(tmp_path):
    """A real (tiny) CMake project: `mlbridge build` runs real cmake and ninja on it."""
    source = tmp_path / "src"
    source.mkdir()
    (source / "CMakeLists.txt").write_text(TINY_PROJECT)
    return source


def test_build_configures_then_builds_streaming_output_to_stderr(tmp_path, tiny_source):
    build = tmp_path / "build"
    result = run_cli(
        "build", "--source-dir", str(tiny_source), "--build-dir", str(build), "-j", "2"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    assert "step 1/2, configure" in result.stderr and "step 2/2, build" in result.stderr
    assert "tiny: built" in result.stderr
    assert (build / "build.ninja").is_file()
    cache = (build / "CMakeCache.txt").read_text()
    onnx_root = tiny_source / ".deps" / "onnxruntime"
    assert f"MLBRIDGE_ONNXRUNTIME_ROOT:UNINITIALIZED={onnx_root}" in cache


def test_build_skips_configure_when_arguments_are_unchanged(tmp_path, tiny_source):
    build = tmp_path / "build"
    args = ("build", "--source-dir", str(tiny_source), "--build-dir", str(build))
    assert run_cli(*args).returncode == 0
    second = run_cli(*args)
    assert second.returncode == 0
    assert "already configured" in second.stderr
    third = run_cli(*args, "--cmake-arg=-DX=1")
    assert third.returncode == 0
    assert "already configured" not in third.stderr
    assert "tiny: configured with X=1" in third.stderr


def test_build_failure_is_reported_as_an_error(tmp_path, tiny_source):
    (tiny_source / "CMakeLists.txt").write_text(
        'cmake_minimum_required(VERSION 3.20)\nproject(tiny NONE)\nmessage(FATAL_ERROR "boom")\n'
    )
    result = run_cli("build", "--source-dir", str(tiny_source), "--build-dir", str(tmp_path / "b"))
    assert result.returncode == 1
    assert "boom" in result.stderr
    assert "mlbridge: error: step 1/2, configure failed (exit status 1)" in result.stderr


def _walk(parser, path=()):
    """Every (command path, parser) of the argparse tree, the top-level parser first."""
    import argparse

    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _walk(sub, (*path, name))


def test_every_option_and_subcommand_has_help():
    import argparse

    from mlbridge.cli import build_parser

    missing = []
    for path, parser in _walk(build_parser()):
        where = " ".join(("mlbridge", *path))
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                helps = {a.dest: a.help for a in action._choices_actions}
                missing += [f"{where} {name}" for name in action.choices if not helps.get(name)]
            elif not action.help or action.help == argparse.SUPPRESS:
                missing.append(f"{where} {'/'.join(action.option_strings) or action.dest}")
    assert not missing, "options without help text:\n" + "\n".join(missing)


def test_serve_help_says_how_policy_modules_are_found():
    result = run_cli("serve", "--help")
    assert result.returncode == 0
    text = " ".join(result.stdout.split())
    assert "a class (instantiated with no arguments) whose instances are callable" in text
    assert "the current folder first" in text


def test_a_reader_closing_the_pipe_early_ends_the_command_quietly(tmp_path):
    # `mlbridge models show NAME | head`: head exits, the next write gets EPIPE.
    import numpy as np

    from mlbridge import ElementType, TensorSpec
    from mlbridge.export import Dense, export_numpy_dense

    specs = [TensorSpec(f"feature_{i}", ElementType.INT64, (1,)) for i in range(40)]
    decision = TensorSpec("inlining_decision", ElementType.INT64, (1,))
    onnx_file = export_numpy_dense(
        specs, [Dense(np.ones((40, 2)))], tmp_path / "m.onnx", output=decision, argmax=True
    )
    registry = tmp_path / "registry"
    register = run_cli(
        "models", "register", "m", str(onnx_file), "--registry", str(registry),
    )  # fmt: skip
    assert register.returncode == 0, register.stderr
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first byte
    try:
        show = subprocess.run(
            [sys.executable, "-m", "mlbridge", "models", "show", "m", "--registry", str(registry)],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
        )
    finally:
        os.close(write)
    assert show.returncode == 141, show.stderr
    assert show.stderr == ""


def test_a_missing_optional_dependency_is_a_one_line_error_naming_the_extra(tmp_path):
    # onnx made unimportable: install-builtin needs it to build the ONNX models.
    code = (
        "import sys; sys.modules['onnx'] = None\n"
        "from mlbridge.cli import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, "models", "install-builtin", "--no-tfaot",
         "--registry", str(tmp_path / "registry")],
        capture_output=True, text=True,
    )  # fmt: skip
    assert result.returncode == 1
    assert result.stderr == (
        "mlbridge: error: this command needs the Python package 'onnx', which is not "
        "installed: pip install 'mlbridge[export]'\n"
    )
