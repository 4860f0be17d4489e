# The ctest Native.ExternalProject: write a small ONNX model with
# mlbridge.export.numpy_dense (make_model.py), install the build's development
# component into a fresh prefix, build test/external/native against it (which
# runs `mlbridge compile` through mlbridge_add_native_model) and run the
# program, which checks the model's answers against its own computation.
#   cmake -DBUILD_DIR=... -DWORK_DIR=... -DSOURCE_DIR=... -DCXX=... -DLLVM_DIR=...
#         -DAOT_PYTHON=... [-DSANITIZERS=address,undefined] -P run.cmake
file(REMOVE_RECURSE "${WORK_DIR}")
function(step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE out TIMEOUT 600)
  message("${out}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}")
  endif()
endfunction()
step("${AOT_PYTHON}" "${SOURCE_DIR}/make_model.py" "${WORK_DIR}/model")
step(${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${WORK_DIR}/prefix"
     --component mlbridge_dev)
set(_flags "")
if(SANITIZERS)
  list(APPEND _flags "-DCMAKE_CXX_FLAGS=-fsanitize=${SANITIZERS}"
       "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=${SANITIZERS}")
endif()
step(${CMAKE_COMMAND} -S "${SOURCE_DIR}" -B "${WORK_DIR}/build" -G Ninja
     "-DCMAKE_CXX_COMPILER=${CXX}" -DCMAKE_BUILD_TYPE=Release
     "-DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix" "-DLLVM_DIR=${LLVM_DIR}"
     "-DMLBRIDGE_TEST_ONNX_MODEL=${WORK_DIR}/model/dense.onnx"
     "-DMLBRIDGE_AOT_PYTHON=${AOT_PYTHON}" ${_flags})
step(${CMAKE_COMMAND} --build "${WORK_DIR}/build")
step("${WORK_DIR}/build/mlbridge-external-native" "${WORK_DIR}/model/dense.json")
