# SPDX-License-Identifier: MIT
# Run tw-trace ARGS SCENARIO; check its exit status (RC), its stdout against
# EXPECTED (if given) and that its stderr contains STDERR (if given).
separate_arguments(args UNIX_COMMAND "${ARGS}")
execute_process(COMMAND ${TRACE} ${args} ${SCENARIO}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL RC)
  message(FATAL_ERROR "exit status ${rc}, expected ${RC}\nstderr: ${err}")
endif()
if(EXPECTED)
  file(READ ${EXPECTED} want)
  if(NOT out STREQUAL want)
    file(WRITE ${OUT} "${out}")
    execute_process(COMMAND diff -u ${EXPECTED} ${OUT})
    message(FATAL_ERROR "output differs from ${EXPECTED}")
  endif()
endif()
if(STDERR)
  string(FIND "${err}" "${STDERR}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "stderr lacks '${STDERR}':\n${err}")
  endif()
endif()
