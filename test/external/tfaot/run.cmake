# The ctest TFAOT.ExternalProject: install the build's development component
# into a fresh prefix, build test/external/tfaot against it (which runs
# `mlbridge aot` through mlbridge_add_tf_aot_model) and run the program.
#   cmake -DBUILD_DIR=... -DWORK_DIR=... -DSOURCE_DIR=... -DCXX=... -DLLVM_DIR=...
#         -DSAVED_MODEL=... -DANSWERS=... -DAOT_PYTHON=... [-DTF_PYTHON=...]
#         [-DSANITIZERS=address,undefined]
#         -P run.cmake
file(REMOVE_RECURSE "${WORK_DIR}")
function(step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE out TIMEOUT 600)
  message("${out}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}")
  endif()
endfunction()
step(${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${WORK_DIR}/prefix"
     --component mlbridge_dev)
set(_tf "")
if(TF_PYTHON)
  set(_tf "-DMLBRIDGE_TF_PYTHON=${TF_PYTHON}")
endif()
if(SANITIZERS)
  list(APPEND _tf "-DCMAKE_CXX_FLAGS=-fsanitize=${SANITIZERS}"
       "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=${SANITIZERS}")
endif()
step(${CMAKE_COMMAND} -S "${SOURCE_DIR}" -B "${WORK_DIR}/build" -G Ninja
     "-DCMAKE_CXX_COMPILER=${CXX}" -DCMAKE_BUILD_TYPE=Release
     "-DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix" "-DLLVM_DIR=${LLVM_DIR}"
     "-DMLBRIDGE_TEST_SAVED_MODEL=${SAVED_MODEL}"
     "-DMLBRIDGE_AOT_PYTHON=${AOT_PYTHON}" ${_tf})
step(${CMAKE_COMMAND} --build "${WORK_DIR}/build")
step("${WORK_DIR}/build/mlbridge-external-tfaot" "${ANSWERS}")
