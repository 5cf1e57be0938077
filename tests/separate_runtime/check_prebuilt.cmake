# Passes when a separate-runtime program's own file calls the built-in model's, optimiser's and
# trainer's code
# compiled in the run-time file (LOCUS_DETAIL_PREBUILT, config.hpp) instead of compiling it: the
# symbols below are undefined in USER_OBJECT and defined in RUNTIME_OBJECT. Run with -DNM=<nm>
# -DUSER_OBJECT=<object of test_separate.cpp> -DRUNTIME_OBJECT=<object of the run-time file>.
set(_symbols
    "locus::train::detail::model_core<locus::train::mlp<float>, locus::any_gpu>::gradient("
    "locus::train::detail::model_core<locus::train::mlp<float>, locus::any_gpu>::make("
    "void locus::train::apply_step<locus::train::sgd, locus::any_gpu>("
    "locus::train::detail::trainer<locus::train::basic_sync_average<locus::dist::automatic>, locus::train::replica_set<locus::dist::any_group<false, false>, locus::any_gpu> >::fit(")
foreach(_which USER RUNTIME)
  execute_process(COMMAND ${NM} -C ${${_which}_OBJECT} RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _err)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "${NM} -C ${${_which}_OBJECT} failed: ${_err}")
  endif()
  string(REPLACE "\n" ";" _lines "${_out}")
  foreach(_symbol IN LISTS _symbols)
    set(_kind)
    foreach(_line IN LISTS _lines)
      string(FIND "${_line}" "${_symbol}" _at)
      if(_at GREATER -1)
        string(REGEX MATCH " ([A-Za-z]) " _m "${_line}")
        set(_kind ${CMAKE_MATCH_1})
        break()
      endif()
    endforeach()
    if(_which STREQUAL "USER" AND NOT _kind STREQUAL "U")
      message(FATAL_ERROR "${_symbol}...) is '${_kind}' in ${USER_OBJECT}: the program's file compiles it (expected U: "
                          "declared extern, called in the run-time file)")
    elseif(_which STREQUAL "RUNTIME" AND NOT _kind MATCHES "^[TW]$")
      message(FATAL_ERROR "${_symbol}...) is '${_kind}' in ${RUNTIME_OBJECT}: the run-time file does not define it")
    endif()
  endforeach()
endforeach()
message(STATUS "the built-in model, optimiser and trainer are compiled in the run-time file only")
