# Builds TARGET in BUILD_DIR; passes when the build fails and its output holds every
# "// expect:" text of SOURCE, and every "// expect-gcc:" (GNU) or "// expect-clang:" (Clang) text
# for the compiler COMPILER. Locus's own rules are pinned by their message alone ("// expect:"),
# which every compiler prints; only the language's own errors need a text per compiler.
set(_tag gcc)
if(COMPILER STREQUAL "Clang")
  set(_tag clang)
endif()
file(STRINGS ${SOURCE} _expects REGEX "^// expect(-${_tag})?: ")
if(NOT _expects)
  message(FATAL_ERROR "${SOURCE} has no '// expect:' line for ${COMPILER}")
endif()
set(_cfg)
if(CONFIG)
  set(_cfg --config ${CONFIG})
endif()
# LC_ALL=C: plain quotes in the compiler's messages, whatever the caller's locale.
execute_process(COMMAND ${CMAKE_COMMAND} -E env LC_ALL=C LANG=C ${CMAKE_COMMAND} --build ${BUILD_DIR} --target ${TARGET} ${_cfg}
                RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _out)
if(_rc EQUAL 0)
  message(FATAL_ERROR "${TARGET} compiled, but it must not:\n${_out}")
endif()
set(_missing)
foreach(line IN LISTS _expects)
  string(REGEX REPLACE "^// expect(-${_tag})?: " "" _text "${line}")
  string(FIND "${_out}" "${_text}" _at)
  if(_at EQUAL -1)
    list(APPEND _missing "${_text}")
  endif()
endforeach()
if(_missing)
  message(FATAL_ERROR "${TARGET} failed to compile, but its diagnostics lack:\n  ${_missing}\n--- output ---\n${_out}")
endif()
message(STATUS "${TARGET}: rejected with the expected diagnostic")
