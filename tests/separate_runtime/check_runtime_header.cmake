# Fails unless include/locus/runtime.hpp includes every header that has run-time definitions
# (an #if or #elif on LOCUS_RUNTIME_DEFINITIONS) or names a configuration the run-time file compiles
# (LOCUS_DETAIL_PREBUILT: the program's other files declare it extern). Run with
# -DINCLUDE_DIR=<the include folder>.
file(READ ${INCLUDE_DIR}/locus/runtime.hpp _runtime)
file(GLOB_RECURSE _headers RELATIVE ${INCLUDE_DIR} ${INCLUDE_DIR}/locus/*.hpp)
set(_missing)
set(_found 0)
list(REMOVE_ITEM _headers locus/runtime.hpp)
foreach(h IN LISTS _headers)
  file(READ ${INCLUDE_DIR}/${h} _text)
  # Any #if that tests it: "#if LOCUS_RUNTIME_DEFINITIONS", "#  if LOCUS_RUNTIME_DEFINITIONS && ...".
  string(REGEX MATCH "#[ \t]*(el)?if[^\n]*LOCUS_RUNTIME_DEFINITIONS|\nLOCUS_DETAIL_PREBUILT" _at "${_text}")
  if(_at)
    math(EXPR _found "${_found} + 1")
    string(FIND "${_runtime}" "\n#include <${h}>\n" _inc)
    if(_inc LESS 0)
      list(APPEND _missing ${h})
    endif()
  endif()
endforeach()
if(_found EQUAL 0)
  message(FATAL_ERROR "no header tests LOCUS_RUNTIME_DEFINITIONS: the check looks for the wrong text")
endif()
if(_missing)
  message(FATAL_ERROR "locus/runtime.hpp does not include these headers with run-time definitions: ${_missing}")
endif()
message(STATUS "${_found} headers with run-time definitions, all included by locus/runtime.hpp")
