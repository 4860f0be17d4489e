# Install rules and the CMake package of mlbridge, so that out-of-tree
# projects can do
#   find_package(MLBridge CONFIG REQUIRED)
#   target_link_libraries(app PRIVATE MLBridge::Core)           # or CoreStatic
#   target_link_libraries(app PRIVATE MLBridge::Pipe)           # core + a runner
#   target_link_libraries(app PRIVATE MLBridge::Runtime)        # every component
# Exported targets: one per runtime component (runtime/CMakeLists.txt), shared
# (MLBridge::<Name>) and static (MLBridge::<Name>Static): Core, Protobuf, Pipe,
# Grpc, Onnx, TFAOT, CAPI (those this build has); MLBridge::Runtime and
# MLBridge::RuntimeStatic link all of them.
# Install components:
#   mlbridge_dev      runtime libraries, headers, CMake package files
#   mlbridge_plugins  the opt/llc/mlir-opt plugins, their runner modules and
#                     the runtime libraries they load
# e.g. `cmake --install <build> --prefix <dir> --component mlbridge_dev`.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(MLBRIDGE_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/MLBridge" CACHE STRING
    "Where the MLBridge CMake package files are installed (relative to the prefix)")

set(_mlbridge_export_targets "")
foreach(_mlbridge_component ${MLBRIDGE_COMPONENTS})
  list(APPEND _mlbridge_export_targets MLBridge${_mlbridge_component}
    MLBridge${_mlbridge_component}Static)
endforeach()
foreach(_mlbridge_target MLBridgeRuntime MLBridgeRuntimeStatic)
  if(TARGET ${_mlbridge_target})
    list(APPEND _mlbridge_export_targets ${_mlbridge_target})
  endif()
endforeach()

if(_mlbridge_export_targets)
  install(TARGETS ${_mlbridge_export_targets}
    EXPORT MLBridgeTargets
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT mlbridge_dev
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT mlbridge_dev
    RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT mlbridge_dev
    INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  install(EXPORT MLBridgeTargets
    NAMESPACE MLBridge::
    DESTINATION ${MLBRIDGE_INSTALL_CMAKEDIR}
    COMPONENT mlbridge_dev)
  set(MLBRIDGE_PACKAGE_HAS_TARGETS TRUE)
else()
  message(STATUS "mlbridge: no runtime targets yet: the package exports no library")
  set(MLBRIDGE_PACKAGE_HAS_TARGETS FALSE)
endif()

# Public headers (include/mlbridge/**, the C API in include/mlbridge-c/), plus generated headers the runtime
# may place under <build>/include/mlbridge.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/mlbridge ${PROJECT_SOURCE_DIR}/include/mlbridge-c
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  COMPONENT mlbridge_dev
  FILES_MATCHING PATTERN "*.h" PATTERN "*.hpp" PATTERN "*.def" PATTERN "*.inc")
if(IS_DIRECTORY ${PROJECT_BINARY_DIR}/include/mlbridge)
  install(DIRECTORY ${PROJECT_BINARY_DIR}/include/mlbridge
    DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
    COMPONENT mlbridge_dev
    FILES_MATCHING PATTERN "*.h" PATTERN "*.inc")
endif()

# Plugins, with the runtime libraries they link and the runner modules, into
# one folder under the same file names as in the build tree: the plugins and
# modules find the runtime libraries through $ORIGIN, and the plugins find
# the modules beside themselves (docs/plugins.md, "Runner modules").
# libMLBridgeOnnx.so and the ONNX module find libonnxruntime.so.1 where this
# build found it, as in the build tree.
if(MLBRIDGE_BUILD_PLUGINS AND MLBRIDGE_PLUGIN_TARGETS)
  set_property(TARGET ${MLBRIDGE_PLUGIN_TARGETS} APPEND PROPERTY
    INSTALL_RPATH "$ORIGIN")
  if(MLBRIDGE_ENABLE_ONNX AND TARGET MLBridgeRunnerOnnx)
    # The module links libonnxruntime.so.1 directly too (MLBridge::Onnx
    # links with --no-as-needed, runtime/CMakeLists.txt).
    get_filename_component(_mlbridge_plugin_ort_dir
      "${MLBRIDGE_ONNXRUNTIME_LIBRARY}" DIRECTORY)
    set_property(TARGET MLBridgeRunnerOnnx APPEND PROPERTY
      INSTALL_RPATH "${_mlbridge_plugin_ort_dir}")
  endif()
  install(TARGETS ${MLBRIDGE_PLUGIN_TARGETS} ${MLBRIDGE_PLUGIN_COMPONENT_TARGETS}
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
    COMPONENT mlbridge_plugins)
endif()

# What the config file needs to re-find the runtime's dependencies.
set(MLBRIDGE_PACKAGE_LLVM_DIR "${LLVM_DIR}")
set(MLBRIDGE_PACKAGE_ONNXRUNTIME_LIBRARY "")
set(MLBRIDGE_PACKAGE_ONNXRUNTIME_INCLUDE_DIR "")
if(MLBRIDGE_ENABLE_ONNX)
  set(MLBRIDGE_PACKAGE_ONNXRUNTIME_LIBRARY "${MLBRIDGE_ONNXRUNTIME_LIBRARY}")
  set(MLBRIDGE_PACKAGE_ONNXRUNTIME_INCLUDE_DIR "${MLBRIDGE_ONNXRUNTIME_INCLUDE_DIR}")
endif()

# -- TF AOT: mlbridge_add_tf_aot_model() and mlbridge_add_native_model() (the
# TF AOT runner runs native models too) for installed users; they run
# `python -m mlbridge aot` / `python -m mlbridge compile` with the Python this
# build used, unless the project sets MLBRIDGE_AOT_PYTHON.
set(MLBRIDGE_PACKAGE_AOT_PYTHON "")
if(MLBRIDGE_ENABLE_TF_AOT)
  install(FILES ${CMAKE_CURRENT_LIST_DIR}/MLBridgeTFAOT.cmake
    ${CMAKE_CURRENT_LIST_DIR}/MLBridgeNative.cmake
    DESTINATION ${MLBRIDGE_INSTALL_CMAKEDIR}
    COMPONENT mlbridge_dev)
  if(EXISTS "${PROJECT_SOURCE_DIR}/.venv/bin/python")
    set(MLBRIDGE_PACKAGE_AOT_PYTHON "${PROJECT_SOURCE_DIR}/.venv/bin/python")
  endif()
endif()
# -- end TF AOT

configure_package_config_file(
  ${CMAKE_CURRENT_LIST_DIR}/MLBridgeConfig.cmake.in
  ${PROJECT_BINARY_DIR}/cmake/MLBridgeConfig.cmake
  INSTALL_DESTINATION ${MLBRIDGE_INSTALL_CMAKEDIR}
  PATH_VARS CMAKE_INSTALL_INCLUDEDIR CMAKE_INSTALL_LIBDIR)
# 0.x: minor versions may break compatibility.
write_basic_package_version_file(
  ${PROJECT_BINARY_DIR}/cmake/MLBridgeConfigVersion.cmake
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMinorVersion)
install(FILES
  ${PROJECT_BINARY_DIR}/cmake/MLBridgeConfig.cmake
  ${PROJECT_BINARY_DIR}/cmake/MLBridgeConfigVersion.cmake
  DESTINATION ${MLBRIDGE_INSTALL_CMAKEDIR}
  COMPONENT mlbridge_dev)
