# -*- Python -*-
# lit configuration of mlbridge's plugin tests. Run through the build:
#   ninja -C <build> check-mlbridge-lit
# (the build writes lit.site.cfg.py with the paths used here).
import os

import lit.formats

config.name = "mlbridge"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".ll", ".mlir", ".test"]
# Inputs/ holds shared inputs (features.ll, loops.mlir), not tests.
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py.in"]
config.test_source_root = os.path.dirname(__file__)

if not hasattr(config, "mlbridge_obj_root"):
    lit_config.fatal(
        "run the suite from the build folder (ninja check-mlbridge-lit): "
        "lit.site.cfg.py is generated there by CMake"
    )
config.test_exec_root = config.mlbridge_lit_obj_root

# LLVM 22's tools, always by full path: /usr/bin/opt may be an older LLVM.
tools_dir = config.mlbridge_llvm_tools_dir
for tool in ("opt", "llc", "mlir-opt", "FileCheck", "not"):
    if not os.path.isfile(os.path.join(tools_dir, tool)):
        lit_config.fatal(f"{tool} not found in {tools_dir} (MLBRIDGE_LLVM_TOOLS_DIR)")

# The plugins the tests load must exist (ninja check-mlbridge-lit builds them).
plugins = [config.mlbridge_llvm_plugin, config.mlbridge_llc_plugin]
if config.mlbridge_enable_mlir:
    plugins.append(config.mlbridge_mlir_plugin)
for plugin in plugins:
    if not os.path.isfile(plugin):
        lit_config.fatal(f"plugin {plugin} is missing: build it first")

# Keep a minimal, predictable environment; LLVM 22's tools come first in PATH
# so that a bare `not` or `FileCheck` also resolves to them.
config.environment["PATH"] = os.pathsep.join(
    [tools_dir, config.environment.get("PATH", os.environ.get("PATH", ""))]
)
for var in ("HOME", "TMPDIR", "TMP", "TEMP", "LANG", "LC_ALL"):
    if var in os.environ:
        config.environment[var] = os.environ[var]


def tool(name):
    return os.path.join(tools_dir, name)


# Longer names first: lit replaces in order and %llc would eat %llc_plugin.
config.substitutions.extend(
    [
        ("%llvm_plugin", config.mlbridge_llvm_plugin),
        ("%llc_plugin", config.mlbridge_llc_plugin),
        ("%mlir_plugin", config.mlbridge_mlir_plugin),
        ("%mlir-opt", tool("mlir-opt")),
        ("%opt", tool("opt")),
        ("%llc", tool("llc")),
        ("%FileCheck", tool("FileCheck")),
        ("%not", tool("not")),
        ("%llvm-nm", tool("llvm-nm")),
        ("%clang", tool("clang")),
        ("%ld_lld", tool("ld.lld")),
        ("%python", config.python_executable),
        ("%cmake_generator", config.cmake_generator),
        ("%cmake", config.cmake_command),
        ("%make_program", config.cmake_make_program),
        ("%cxx", config.cxx_compiler),
        ("%cc", config.c_compiler),
        ("%llvm_dir", config.mlbridge_llvm_dir),
        ("%mlbridge_src_root", config.mlbridge_src_root),
        ("%mlbridge_obj_root", config.mlbridge_obj_root),
    ]
)

if config.mlbridge_enable_mlir:
    config.available_features.add("mlir")
if os.path.isfile(tool("clang")):
    config.available_features.add("clang")
if os.path.isfile(tool("ld.lld")):
    config.available_features.add("lld")
if config.mlbridge_have_package:
    config.available_features.add("mlbridge-package")
