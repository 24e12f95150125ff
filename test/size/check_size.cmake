# Strips a copy of BINARY with STRIP into COPY and fails when the copy is larger than BUDGET bytes.
# Run by ctest as `cmake -DBINARY=... -DSTRIP=... -DCOPY=... -DBUDGET=... -P check_size.cmake`.
file(COPY_FILE "${BINARY}" "${COPY}")
execute_process(COMMAND "${STRIP}" --strip-all "${COPY}" RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "runtime size: '${STRIP} --strip-all ${COPY}' failed (${rc}): ${err}")
endif()
file(SIZE "${COPY}" size)
math(EXPR kib "${size} / 1024")
math(EXPR budget_kib "${BUDGET} / 1024")
if(size GREATER BUDGET)
  message(FATAL_ERROR "runtime size: stripped ${BINARY} is ${size} bytes (${kib} KiB), over the budget of "
                      "${BUDGET} bytes (${budget_kib} KiB); see test/size/CMakeLists.txt")
endif()
message(STATUS "runtime size: stripped ${BINARY} is ${size} bytes (${kib} KiB), budget ${BUDGET} bytes")
