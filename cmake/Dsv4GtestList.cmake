# Build step of a GPU test executable (cmake -P): lists its GoogleTest tests into a CMake file
# that cmake/Dsv4GpuTests.cmake reads when ctest runs. -D EXE=<executable> -D OUT=<file>
# -D WORKDIR=<dir>. Disabled tests are left out; a listing that fails fails the build.
execute_process(COMMAND "${EXE}" --gtest_list_tests WORKING_DIRECTORY "${WORKDIR}"
                OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc TIMEOUT 60)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "listing the tests of ${EXE} failed (${rc}):\n${out}${err}")
endif()
# "Suite." lines, then "  Test" lines; parameter comments ("  # GetParam() = ...") dropped.
string(REGEX REPLACE "#[^\n]*" "" out "${out}")
string(REPLACE ";" "" out "${out}")
string(REPLACE "\n" ";" lines "${out}")
set(suite "")
set(tests "")
foreach(line IN LISTS lines)
  string(STRIP "${line}" name)
  if(name STREQUAL "")
    continue()
  elseif(line MATCHES "^[^ ]")
    set(suite "${name}")
  elseif(NOT "${suite}${name}" MATCHES "(^|/|\\.)DISABLED_")
    list(APPEND tests "${suite}${name}")
  endif()
endforeach()
file(WRITE "${OUT}" "set(dsv4_exe [==[${EXE}]==])\nset(dsv4_tests [==[${tests}]==])\n")
