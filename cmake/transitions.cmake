# SPDX-License-Identifier: MIT
# A model's table of transitions (model/service.transitions: every
# state-word change the service model makes; model/purgatory.transitions:
# every change of an op's state the purgatory model makes) as C rows for
# src/service/transitions.c or src/purgatory/transitions.c:
#   cmake -DIN=model/service.transitions -DOUT=service_transitions.inc -P transitions.cmake
file(STRINGS "${IN}" lines)
set(rows "")
foreach(line ${lines})
  if(line MATCHES "^([a-z_]+) +([0-9]+) +([0-9]+)")
    string(APPEND rows "TW_STEP(${CMAKE_MATCH_1}, ${CMAKE_MATCH_2}, ${CMAKE_MATCH_3})\n")
  endif()
endforeach()
if(rows STREQUAL "")
  message(FATAL_ERROR "${IN}: no transitions")
endif()
file(WRITE "${OUT}" "/* Generated from ${IN} by cmake/transitions.cmake. */\n${rows}")
