# packaging:debian_thrust: locus from Debian's packages alone. With the CUDA Toolkit hidden (its
# environment variables unset, its folders dropped from PATH and ignored by every find_package), it
# configures and installs locus, then builds and runs tests/consumer through find_package (the
# installed locusConfig.cmake), add_subdirectory and pkg-config, and checks that each found the
# system's Thrust 1.x (libthrust-dev, libcub-dev), not CCCL.
#   cmake -DSOURCE_DIR=<locus> -DWORK=<scratch> -DGENERATOR=<gen> -DCXX=<compiler> [-DTOOLKIT_ROOTS=<dirs>]
#         -P debian-thrust-check.cmake
# Prints "debian-thrust-check: skipped" (ctest's SKIP_REGULAR_EXPRESSION) when the system has no
# Thrust 1.x package.
cmake_minimum_required(VERSION 3.25)
foreach(v SOURCE_DIR WORK GENERATOR CXX)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "debian-thrust-check: ${v} is not set")
  endif()
endforeach()

file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")

# Every place a CUDA Toolkit can be found from, and the real folders behind them.
set(_roots /usr/local/cuda ${TOOLKIT_ROOTS})
foreach(var CUDA_HOME CUDA_PATH CUDAToolkit_ROOT CUDA_ROOT)
  if(DEFINED ENV{${var}} AND NOT "$ENV{${var}}" STREQUAL "")
    list(APPEND _roots "$ENV{${var}}")
  endif()
endforeach()
set(_ignore)
foreach(r IN LISTS _roots)
  file(REAL_PATH "${r}" _real)
  foreach(p IN ITEMS "${r}" "${_real}")
    list(APPEND _ignore "${p}" "${p}/lib64/cmake" "${p}/lib/cmake")
  endforeach()
endforeach()
list(REMOVE_DUPLICATES _ignore)
set(_path)
string(REPLACE ":" ";" _entries "$ENV{PATH}")
foreach(e IN LISTS _entries)
  set(_keep TRUE)
  foreach(p IN LISTS _ignore)
    string(FIND "${e}/" "${p}/" _at)
    if(_at EQUAL 0)
      set(_keep FALSE)
    endif()
  endforeach()
  if(_keep)
    list(APPEND _path "${e}")
  endif()
endforeach()
string(REPLACE ";" ":" _path "${_path}")
set(_env ${CMAKE_COMMAND} -E env --unset=CUDA_HOME --unset=CUDA_PATH --unset=CUDAToolkit_ROOT --unset=CUDA_ROOT
         "PATH=${_path}")
# An initial cache rather than -D: a list would not survive being passed through run()'s ARGN.
file(WRITE "${WORK}/hide-cuda.cmake" "set(CMAKE_IGNORE_PREFIX_PATH \"${_ignore}\" CACHE STRING \"\")\n"
                                     "set(CMAKE_FIND_USE_PACKAGE_REGISTRY OFF CACHE BOOL \"\")\n")
set(_hide -C "${WORK}/hide-cuda.cmake")

function(run what)
  execute_process(COMMAND ${_env} ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "debian-thrust-check: ${what} failed (${rc}):\n${out}")
  endif()
  set(out "${out}" PARENT_SCOPE)
endfunction()

# The Thrust a build tree found: the system's 1.x, or the check proves nothing.
function(expect_system_thrust build)
  file(STRINGS "${build}/CMakeCache.txt" _dir REGEX "^Thrust_DIR:")
  string(REGEX REPLACE "^Thrust_DIR:[A-Z]+=" "" _dir "${_dir}")
  if(NOT EXISTS "${_dir}/thrust-config.cmake")
    message(FATAL_ERROR "debian-thrust-check: ${build} found no Thrust (Thrust_DIR '${_dir}')")
  endif()
  foreach(p IN LISTS _ignore)
    string(FIND "${_dir}/" "${p}/" _at)
    if(_at EQUAL 0)
      message(FATAL_ERROR "debian-thrust-check: ${build} found the CUDA Toolkit's Thrust (${_dir}): it was not hidden")
    endif()
  endforeach()
  message(STATUS "${build}: Thrust from ${_dir}")
endfunction()


# Is there a system Thrust at all? (Debian 12: apt-get install libthrust-dev libcub-dev)
file(WRITE "${WORK}/probe/CMakeLists.txt"
     "cmake_minimum_required(VERSION 3.25)\nproject(probe LANGUAGES NONE)\n"
     "find_package(Thrust 1.17 CONFIG QUIET)\nif(NOT Thrust_FOUND)\n  message(FATAL_ERROR \"no Thrust 1.x\")\nendif()\n")
execute_process(COMMAND ${_env} ${CMAKE_COMMAND} -S "${WORK}/probe" -B "${WORK}/probe/build" ${_hide}
                RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
if(NOT rc EQUAL 0)
  message("debian-thrust-check: skipped: no Thrust 1.x package on this system (apt-get install libthrust-dev libcub-dev)")
  return()
endif()

set(_gen -G "${GENERATOR}" "-DCMAKE_CXX_COMPILER=${CXX}" -DCMAKE_BUILD_TYPE=Release)

# locus itself, configured and installed without the toolkit.
run("configuring locus" ${CMAKE_COMMAND} -S "${SOURCE_DIR}" -B "${WORK}/locus" ${_gen} ${_hide}
    -DLOCUS_BUILD_TESTS=OFF -DLOCUS_BUILD_EXAMPLES=OFF "-DCMAKE_INSTALL_PREFIX=${WORK}/prefix")
expect_system_thrust("${WORK}/locus")
run("installing locus" ${CMAKE_COMMAND} --install "${WORK}/locus")

# The consumer through the installed package and as a subdirectory, then with pkg-config's flags.
foreach(mode find_package subdirectory)
  set(_build "${WORK}/consumer-${mode}")
  run("configuring the ${mode} consumer" ${CMAKE_COMMAND} -S "${SOURCE_DIR}/tests/consumer" -B "${_build}" ${_gen}
      ${_hide} -DLOCUS_CONSUMER_MODE=${mode} "-Dlocus_ROOT=${WORK}/prefix" "-DLOCUS_SOURCE_DIR=${SOURCE_DIR}")
  expect_system_thrust("${_build}")
  run("building the ${mode} consumer" ${CMAKE_COMMAND} --build "${_build}")
  run("running the ${mode} consumer" "${_build}/consumer")
  if(NOT out MATCHES "consumer: ok")
    message(FATAL_ERROR "debian-thrust-check: the ${mode} consumer printed:\n${out}")
  endif()
  message(STATUS "${mode}: ${out}")
endforeach()
run("the pkg-config consumer" ${CMAKE_COMMAND} "-DPREFIX=${WORK}/prefix" "-DCXX=${CXX}"
    "-DSOURCE=${SOURCE_DIR}/tests/consumer/main.cpp" "-DWORK=${WORK}/consumer-pc"
    -P "${SOURCE_DIR}/tests/consumer/pkg_config.cmake")
message(STATUS "${out}")
message(STATUS "debian-thrust-check: locus builds and runs with the system's Thrust alone")
