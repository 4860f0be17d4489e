# mlbridge_add_native_model(): compile an ONNX model to native code through
# MLIR 22 at build time (`mlbridge compile`, docs/native.md) and get a target
# to link it into a plugin or program, as mlbridge_add_tf_aot_model() does for
# a TensorFlow SavedModel.
#
#   mlbridge_add_native_model(TARGET my_model MODEL ${file}.onnx
#     [NAME name]              # model name, a C identifier (default: TARGET)
#     [DIMS SYMBOL=N...]       # values of the model's symbolic dimensions
#     [PYTHON python]          # a Python with mlbridge installed
#                              # (default: MLBRIDGE_AOT_PYTHON, else Python3)
#     [OUTPUT_DIR dir]         # default ${CMAKE_CURRENT_BINARY_DIR}/<name>.native
#     [DEPENDS files...])      # if the ONNX file is made at build time: the
#                              # file itself (its rule's OUTPUT) or its target
#
# It runs `mlbridge compile --static` when the ONNX file changes, and
# `mlbridge compile` once more for the shared object. TARGET is an INTERFACE
# library: linking it links lib<name>_native.a (and libm, which the model's
# code calls) and adds the folder with <name>_mlbridge.h, whose
# mlbridge_aot::<name>_functions() feeds mlbridge::TFAOTModelRunner::create().
# Link mlbridge's runtime as well (MLBridge::TFAOT or MLBridge::Runtime). The
# shared object of the same model is the target property
# MLBRIDGE_NATIVE_SHARED_OBJECT (for TFAOTModelRunner::load() or a plugin's
# model option), and its specs sidecar is MLBRIDGE_NATIVE_SPECS. The LLVM 22
# tools are found as `mlbridge compile` finds them ($MLBRIDGE_LLVM_TOOLS_DIR at
# build time, else <tool>-22 on PATH, else /usr/lib/llvm-22/bin); the CMake
# variable MLBRIDGE_LLVM_TOOLS_DIR, if set, is passed as that variable.
include_guard(GLOBAL)

function(mlbridge_add_native_model)
  cmake_parse_arguments(PARSE_ARGV 0 ARG ""
    "TARGET;MODEL;NAME;PYTHON;OUTPUT_DIR" "DIMS;DEPENDS")
  if(ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "mlbridge_add_native_model: unknown arguments "
                        "${ARG_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT ARG_TARGET OR NOT ARG_MODEL)
    message(FATAL_ERROR "mlbridge_add_native_model: TARGET and MODEL are "
                        "required")
  endif()
  if(NOT ARG_NAME)
    set(ARG_NAME "${ARG_TARGET}")
  endif()
  if(NOT ARG_NAME MATCHES "^[A-Za-z_][A-Za-z0-9_]*$")
    message(FATAL_ERROR "mlbridge_add_native_model: NAME '${ARG_NAME}' must "
                        "be a C identifier (pass NAME when TARGET is not one)")
  endif()
  if(NOT ARG_PYTHON)
    if(MLBRIDGE_AOT_PYTHON)
      set(ARG_PYTHON "${MLBRIDGE_AOT_PYTHON}")
    else()
      find_package(Python3 COMPONENTS Interpreter REQUIRED)
      set(ARG_PYTHON "${Python3_EXECUTABLE}")
    endif()
  endif()
  if(NOT ARG_OUTPUT_DIR)
    set(ARG_OUTPUT_DIR "${CMAKE_CURRENT_BINARY_DIR}/${ARG_NAME}.native")
  endif()
  get_filename_component(_model "${ARG_MODEL}" ABSOLUTE)
  set(_out "${ARG_OUTPUT_DIR}")
  set(_archive "${_out}/lib${ARG_NAME}_native.a")
  set(_shared "${_out}/${ARG_NAME}.so")
  set(_outputs "${_archive}" "${_out}/${ARG_NAME}_mlbridge.h"
               "${_out}/lib${ARG_NAME}_native.specs.json" "${_shared}"
               "${_out}/${ARG_NAME}.specs.json")
  set(_dims "")
  foreach(_dim ${ARG_DIMS})
    list(APPEND _dims --dim "${_dim}")
  endforeach()
  set(_compile "${ARG_PYTHON}" -m mlbridge compile "${_model}"
               --name "${ARG_NAME}" ${_dims})
  if(MLBRIDGE_LLVM_TOOLS_DIR)
    set(_compile ${CMAKE_COMMAND} -E env
                 "MLBRIDGE_LLVM_TOOLS_DIR=${MLBRIDGE_LLVM_TOOLS_DIR}" ${_compile})
  endif()
  # An ONNX file made at build time has no file yet: depend on what makes it.
  set(_depends ${ARG_DEPENDS})
  if(EXISTS "${_model}")
    list(APPEND _depends "${_model}")
  endif()
  add_custom_command(
    OUTPUT ${_outputs}
    COMMAND ${_compile} --static -o "${_archive}"
    COMMAND ${_compile} -o "${_shared}"
    DEPENDS ${_depends}
    COMMENT "mlbridge compile: compiling the ONNX model ${ARG_NAME} to native code"
    VERBATIM)
  add_custom_target(${ARG_TARGET}_native_build DEPENDS ${_outputs})
  add_library(${ARG_TARGET} INTERFACE)
  add_dependencies(${ARG_TARGET} ${ARG_TARGET}_native_build)
  target_include_directories(${ARG_TARGET} INTERFACE "${_out}")
  target_link_libraries(${ARG_TARGET} INTERFACE "${_archive}" m)
  set_target_properties(${ARG_TARGET} PROPERTIES
    MLBRIDGE_NATIVE_SHARED_OBJECT "${_shared}"
    MLBRIDGE_NATIVE_SPECS "${_out}/${ARG_NAME}.specs.json")
endfunction()
