# Finds every dependency of the C++ side, with errors that name the package to
# install. `make setup` (scripts/setup.sh) installs all of them.

# LLVM's and MLIR's package configs each look for the optional libraries Debian's
# LLVM was built with (LibEdit, zstd, CURL, ...) and print "Could NOT find X" for
# every one that is not installed, once per config. mlbridge links libLLVM.so and
# needs none of them, so those searches run without STATUS output and one line
# below names what is absent. Errors and warnings still show.
macro(mlbridge_find_package_quietly)
  if(DEFINED CMAKE_MESSAGE_LOG_LEVEL)
    set(_mlbridge_log_level "${CMAKE_MESSAGE_LOG_LEVEL}")
  else()
    unset(_mlbridge_log_level)
  endif()
  set(CMAKE_MESSAGE_LOG_LEVEL NOTICE)
  find_package(${ARGN})
  if(DEFINED _mlbridge_log_level)
    set(CMAKE_MESSAGE_LOG_LEVEL "${_mlbridge_log_level}")
  else()
    unset(CMAKE_MESSAGE_LOG_LEVEL)
  endif()
endmacro()

mlbridge_find_package_quietly(LLVM 22.1 CONFIG HINTS /usr/lib/llvm-22/lib/cmake/llvm)
if(NOT LLVM_FOUND)
  message(FATAL_ERROR
    "LLVM 22 not found. Install it with `apt-get install llvm-22-dev` "
    "(or run `make setup`), or point LLVM_DIR at its lib/cmake/llvm folder.")
endif()
message(STATUS "mlbridge: LLVM ${LLVM_PACKAGE_VERSION} from ${LLVM_DIR}")
set(_mlbridge_llvm_absent)
foreach(_dep FFI LibEdit ZLIB zstd LibXml2 CURL httplib)
  if(DEFINED ${_dep}_FOUND AND NOT ${_dep}_FOUND)
    list(APPEND _mlbridge_llvm_absent ${_dep})
  endif()
endforeach()
if(_mlbridge_llvm_absent)
  list(JOIN _mlbridge_llvm_absent ", " _mlbridge_llvm_absent)
  message(STATUS "mlbridge: LLVM's optional libraries ${_mlbridge_llvm_absent} are not "
                 "installed: harmless, mlbridge does not use them")
endif()
set(MLBRIDGE_LLVM_TOOLS_DIR "${LLVM_TOOLS_BINARY_DIR}" CACHE PATH
    "Folder of the LLVM 22 tools (opt, llc, FileCheck) used by the tests")

# Plugins take LLVM's symbols from the host tool; everything else links the
# one shared libLLVM that Debian ships.
if(TARGET LLVM)
  set(MLBRIDGE_LLVM_LIBS LLVM)
else()
  llvm_map_components_to_libnames(MLBRIDGE_LLVM_LIBS support)
endif()

if(MLBRIDGE_ENABLE_MLIR)
  mlbridge_find_package_quietly(MLIR 22.1 CONFIG HINTS /usr/lib/llvm-22/lib/cmake/mlir)
  if(NOT MLIR_FOUND)
    message(FATAL_ERROR
      "MLIR 22 not found. Install it with `apt-get install libmlir-22-dev "
      "mlir-22-tools` (or run `make setup`), point MLIR_DIR at its "
      "lib/cmake/mlir folder, or configure with -DMLBRIDGE_ENABLE_MLIR=OFF.")
  endif()
  message(STATUS "mlbridge: MLIR from ${MLIR_DIR}")
endif()

if(MLBRIDGE_ENABLE_PROTOBUF)
  find_package(Protobuf)
  if(NOT Protobuf_FOUND OR NOT Protobuf_PROTOC_EXECUTABLE)
    message(FATAL_ERROR
      "Protobuf not found. Install it with `apt-get install libprotobuf-dev "
      "protobuf-compiler` (or run `make setup`), or configure with "
      "-DMLBRIDGE_ENABLE_PROTOBUF=OFF -DMLBRIDGE_ENABLE_GRPC=OFF.")
  endif()
endif()

if(MLBRIDGE_ENABLE_GRPC)
  find_package(PkgConfig REQUIRED)
  pkg_check_modules(GRPCPP IMPORTED_TARGET grpc++)
  find_program(MLBRIDGE_GRPC_CPP_PLUGIN grpc_cpp_plugin)
  if(NOT GRPCPP_FOUND OR NOT MLBRIDGE_GRPC_CPP_PLUGIN)
    message(FATAL_ERROR
      "gRPC C++ not found. Install it with `apt-get install libgrpc++-dev "
      "protobuf-compiler-grpc` (or run `make setup`), or configure with "
      "-DMLBRIDGE_ENABLE_GRPC=OFF.")
  endif()
endif()

if(MLBRIDGE_ENABLE_ONNX)
  set(MLBRIDGE_ONNXRUNTIME_ROOT "${CMAKE_SOURCE_DIR}/.deps/onnxruntime" CACHE PATH
      "Folder with include/ (ONNX Runtime headers) and lib/ (libonnxruntime.so)")
  find_path(MLBRIDGE_ONNXRUNTIME_INCLUDE_DIR onnxruntime_cxx_api.h
            PATHS "${MLBRIDGE_ONNXRUNTIME_ROOT}/include"
                  "${MLBRIDGE_ONNXRUNTIME_ROOT}/include/onnxruntime"
            NO_DEFAULT_PATH)
  find_library(MLBRIDGE_ONNXRUNTIME_LIBRARY onnxruntime
               PATHS "${MLBRIDGE_ONNXRUNTIME_ROOT}/lib" NO_DEFAULT_PATH)
  if(NOT MLBRIDGE_ONNXRUNTIME_INCLUDE_DIR OR NOT MLBRIDGE_ONNXRUNTIME_LIBRARY)
    message(FATAL_ERROR
      "ONNX Runtime not found under ${MLBRIDGE_ONNXRUNTIME_ROOT}. Run "
      "`make setup` (it unpacks the headers and links the library of the "
      "onnxruntime wheel there), set MLBRIDGE_ONNXRUNTIME_ROOT, or configure "
      "with -DMLBRIDGE_ENABLE_ONNX=OFF.")
  endif()
  add_library(MLBridge_onnxruntime SHARED IMPORTED GLOBAL)
  set_target_properties(MLBridge_onnxruntime PROPERTIES
    IMPORTED_LOCATION "${MLBRIDGE_ONNXRUNTIME_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${MLBRIDGE_ONNXRUNTIME_INCLUDE_DIR}")
  message(STATUS "mlbridge: ONNX Runtime ${MLBRIDGE_ONNXRUNTIME_LIBRARY}")
endif()

if(MLBRIDGE_BUILD_TESTS)
  find_package(GTest)
  if(NOT GTest_FOUND)
    message(FATAL_ERROR
      "GoogleTest not found. Install it with `apt-get install libgtest-dev` "
      "(or run `make setup`), or configure with -DMLBRIDGE_BUILD_TESTS=OFF.")
  endif()
endif()
