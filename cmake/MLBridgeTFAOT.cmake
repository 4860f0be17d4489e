# mlbridge_add_tf_aot_model(): compile a TensorFlow SavedModel ahead of time at
# build time and get a target to link it into a plugin or program.
#
#   mlbridge_add_tf_aot_model(TARGET my_model SAVED_MODEL ${dir}
#     [NAME name]              # model name, a C identifier (default: TARGET)
#     [SIGNATURE key]          # default serving_default
#     [TAG tags]               # default serve
#     [PYTHON python]          # a Python with mlbridge installed
#                              # (default: MLBRIDGE_AOT_PYTHON, else Python3)
#     [TF_PYTHON python]       # the TensorFlow environment's interpreter
#                              # (default: MLBRIDGE_TF_PYTHON, else `mlbridge aot`
#                              # finds or creates one)
#     [OUTPUT_DIR dir]         # default ${CMAKE_CURRENT_BINARY_DIR}/<name>.aot
#     [DEPENDS files...])      # what the SavedModel is made from, if built
#
# It runs `mlbridge aot` (docs/tfaot.md) when the SavedModel changes. TARGET is
# an INTERFACE library: linking it links lib<name>_aot.a and adds the folder
# with <name>_mlbridge.h, whose mlbridge_aot::<name>_functions() feeds
# mlbridge::TFAOTModelRunner::create(). Link mlbridge's runtime as well. The
# self-contained shared object of the same model is the target property
# MLBRIDGE_AOT_SHARED_OBJECT (for TFAOTModelRunner::load()), and the specs
# sidecar is MLBRIDGE_AOT_SPECS.
include_guard(GLOBAL)

function(mlbridge_add_tf_aot_model)
  cmake_parse_arguments(PARSE_ARGV 0 ARG ""
    "TARGET;SAVED_MODEL;NAME;SIGNATURE;TAG;PYTHON;TF_PYTHON;OUTPUT_DIR"
    "DEPENDS")
  if(ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "mlbridge_add_tf_aot_model: unknown arguments "
                        "${ARG_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT ARG_TARGET OR NOT ARG_SAVED_MODEL)
    message(FATAL_ERROR "mlbridge_add_tf_aot_model: TARGET and SAVED_MODEL "
                        "are required")
  endif()
  if(NOT ARG_NAME)
    set(ARG_NAME "${ARG_TARGET}")
  endif()
  if(NOT ARG_NAME MATCHES "^[A-Za-z_][A-Za-z0-9_]*$")
    message(FATAL_ERROR "mlbridge_add_tf_aot_model: NAME '${ARG_NAME}' must be "
                        "a C identifier (pass NAME when TARGET is not one)")
  endif()
  if(NOT ARG_SIGNATURE)
    set(ARG_SIGNATURE serving_default)
  endif()
  if(NOT ARG_TAG)
    set(ARG_TAG serve)
  endif()
  if(NOT ARG_PYTHON)
    if(MLBRIDGE_AOT_PYTHON)
      set(ARG_PYTHON "${MLBRIDGE_AOT_PYTHON}")
    else()
      find_package(Python3 COMPONENTS Interpreter REQUIRED)
      set(ARG_PYTHON "${Python3_EXECUTABLE}")
    endif()
  endif()
  if(NOT ARG_TF_PYTHON AND MLBRIDGE_TF_PYTHON)
    set(ARG_TF_PYTHON "${MLBRIDGE_TF_PYTHON}")
  endif()
  if(NOT ARG_OUTPUT_DIR)
    set(ARG_OUTPUT_DIR "${CMAKE_CURRENT_BINARY_DIR}/${ARG_NAME}.aot")
  endif()
  get_filename_component(_saved "${ARG_SAVED_MODEL}" ABSOLUTE)
  set(_out "${ARG_OUTPUT_DIR}")
  set(_archive "${_out}/lib${ARG_NAME}_aot.a")
  set(_outputs "${_archive}" "${_out}/${ARG_NAME}.so"
               "${_out}/${ARG_NAME}_mlbridge.h" "${_out}/${ARG_NAME}.specs.json")
  set(_command "${ARG_PYTHON}" -m mlbridge aot "${_saved}" --name "${ARG_NAME}"
               --output-dir "${_out}" --signature "${ARG_SIGNATURE}"
               --tag "${ARG_TAG}")
  if(ARG_TF_PYTHON)
    list(APPEND _command --tf-python "${ARG_TF_PYTHON}")
  endif()
  if(CMAKE_CXX_COMPILER)
    # The wrapper and runtime are built with this project's compiler.
    set(_command ${CMAKE_COMMAND} -E env "CXX=${CMAKE_CXX_COMPILER}" ${_command})
  endif()
  # A SavedModel made at build time has no files yet: depend on what makes it.
  set(_depends ${ARG_DEPENDS})
  if(EXISTS "${_saved}/saved_model.pb")
    list(APPEND _depends "${_saved}/saved_model.pb")
  endif()
  add_custom_command(
    OUTPUT ${_outputs}
    COMMAND ${_command}
    DEPENDS ${_depends}
    COMMENT "mlbridge aot: compiling the TensorFlow model ${ARG_NAME}"
    VERBATIM)
  add_custom_target(${ARG_TARGET}_aot_build DEPENDS ${_outputs})
  add_library(${ARG_TARGET} INTERFACE)
  add_dependencies(${ARG_TARGET} ${ARG_TARGET}_aot_build)
  target_include_directories(${ARG_TARGET} INTERFACE "${_out}")
  target_link_libraries(${ARG_TARGET} INTERFACE "${_archive}")
  set_target_properties(${ARG_TARGET} PROPERTIES
    MLBRIDGE_AOT_SHARED_OBJECT "${_out}/${ARG_NAME}.so"
    MLBRIDGE_AOT_SPECS "${_out}/${ARG_NAME}.specs.json")
endfunction()
