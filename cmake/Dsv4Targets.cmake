# Helpers that turn a room's files into targets, so a new family registers nothing by hand.
include_guard(GLOBAL)
include(GoogleTest)

set(DSV4_WARNINGS -Wall -Wextra -Wno-unused-parameter)
# The test sources build at -Og in the optimised configurations: half the compile time of -O2 -g
# (the suite's cost on a 2-core CI machine), while the libraries they test keep the preset's level.
option(DSV4_TEST_OG "Compile the GoogleTest sources at -Og in RelWithDebInfo and Release" ON)
set(DSV4_TEST_OPT "")
if(DSV4_TEST_OG AND CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
  set(DSV4_TEST_OPT "$<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CONFIG:RelWithDebInfo,Release>>:-Og>")
endif()

# Marks .hip sources for the configured backend: CUDA under nvcc, HIP under ROCm clang, and plain
# C++ (host-only stubs, launches report "no GPU backend") in the cpu preset.
function(dsv4_gpu_sources)
  foreach(src IN LISTS ARGN)
    if(DSV4_GPU_BACKEND STREQUAL "cuda")
      set_source_files_properties(${src} PROPERTIES LANGUAGE CUDA)
    elseif(DSV4_GPU_BACKEND STREQUAL "hip")
      set_source_files_properties(${src} PROPERTIES LANGUAGE HIP)
    else()
      set_source_files_properties(${src} PROPERTIES LANGUAGE CXX)
    endif()
  endforeach()
endfunction()

# How ctest runs a GPU test executable. Sharded (the default), each executable is a few CTest
# tests "<executable>/shard-<i>-of-<N>" that run its GoogleTest tests under GTEST_TOTAL_SHARDS /
# GTEST_SHARD_INDEX, one GPU slot each, every GoogleTest result in <build>/junit/<test name>.xml:
# a process pays for its CUDA/HIP context once per shard instead of once per test (context
# creation is serialised in the driver and dominated the suite: docs/DESIGN.md). per-test: one
# CTest test per GoogleTest test, "<room>/<Suite.Test>", as gtest_discover_tests names them.
# DSV4_GPU_TEST_SHARDS and DSV4_GPU_TESTS_PER_SHARD in ctest's environment override the cache
# values without reconfiguring.
set(DSV4_GPU_TEST_SHARDS "auto" CACHE STRING
    "GPU test executables in CTest: auto (one shard per DSV4_GPU_TESTS_PER_SHARD tests), a number of shards per executable, or per-test")
set(DSV4_GPU_TESTS_PER_SHARD 16 CACHE STRING "GoogleTest tests per shard when DSV4_GPU_TEST_SHARDS is auto")
if(NOT DSV4_GPU_TEST_SHARDS MATCHES "^(auto|per-test|[1-9][0-9]*)$")
  message(FATAL_ERROR "DSV4_GPU_TEST_SHARDS='${DSV4_GPU_TEST_SHARDS}' is not auto, per-test or a positive number")
endif()
if(NOT DSV4_GPU_TESTS_PER_SHARD MATCHES "^[1-9][0-9]*$")
  message(FATAL_ERROR "DSV4_GPU_TESTS_PER_SHARD='${DSV4_GPU_TESTS_PER_SHARD}' is not a positive number")
endif()
# The ctest-time registration travels with the build tree.
configure_file(${CMAKE_CURRENT_LIST_DIR}/Dsv4GpuTests.cmake ${CMAKE_BINARY_DIR}/cmake/Dsv4GpuTests.cmake
               COPYONLY)
set(DSV4_GTEST_LIST_SCRIPT ${CMAKE_CURRENT_LIST_DIR}/Dsv4GtestList.cmake)

# Registers the GPU test executable `target`: after each build its test list is written next to
# it; when ctest reads the build, cmake/Dsv4GpuTests.cmake turns the list into shards (or per-test
# tests) with the labels `labels` and one GPU slot each.
function(dsv4_gpu_tests target room labels)
  set(list_file ${CMAKE_CURRENT_BINARY_DIR}/${target}_gtest_tests.cmake)
  add_custom_command(TARGET ${target} POST_BUILD
                     COMMAND ${CMAKE_COMMAND} -D EXE=$<TARGET_FILE:${target}> -D OUT=${list_file}
                             -D WORKDIR=${CMAKE_CURRENT_BINARY_DIR} -P ${DSV4_GTEST_LIST_SCRIPT}
                     BYPRODUCTS ${list_file} VERBATIM)
  set(include_file ${CMAKE_CURRENT_BINARY_DIR}/${target}_shards_include.cmake)
  file(WRITE ${include_file}
       "set(dsv4_target [==[${target}]==])\n"
       "set(dsv4_room [==[${room}]==])\n"
       "set(dsv4_labels [==[${labels}]==])\n"
       "set(dsv4_workdir [==[${CMAKE_CURRENT_BINARY_DIR}]==])\n"
       "set(dsv4_junit_dir [==[${CMAKE_BINARY_DIR}/junit]==])\n"
       "set(dsv4_list [==[${list_file}]==])\n"
       "set(dsv4_default_shards [==[${DSV4_GPU_TEST_SHARDS}]==])\n"
       "set(dsv4_per_shard [==[${DSV4_GPU_TESTS_PER_SHARD}]==])\n"
       "include([==[${CMAKE_BINARY_DIR}/cmake/Dsv4GpuTests.cmake]==])\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${include_file})
endfunction()

# One GoogleTest executable per test_*.cpp in the calling directory, its main() from
# fixtures/main/test_main.cpp (rerun commands, skip marker, device log). Every test gets the
# directory's LABELS; GPU suites (GPU, label gpu) are registered by dsv4_gpu_tests, one GPU slot
# per CTest test. In a cpu directory, files named test_*_device.cpp hold the tests that need a
# GPU: they are labelled gpu (not the directory's labels) and registered the same way.
#   dsv4_test_directory(LIBS lib... [LABELS l...] [GPU])
function(dsv4_test_directory)
  cmake_parse_arguments(ARG "GPU" "" "LIBS;LABELS" ${ARGN})
  file(GLOB tests CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/test_*.cpp)
  foreach(src IN LISTS tests)
    get_filename_component(name ${src} NAME_WE)
    get_filename_component(room ${CMAKE_CURRENT_SOURCE_DIR} NAME)
    set(target ${room}_${name})
    add_executable(${target} ${src})
    target_link_libraries(${target} PRIVATE ${ARG_LIBS} dsv4_test_main GTest::gmock GTest::gtest)
    target_compile_options(${target} PRIVATE ${DSV4_WARNINGS} ${DSV4_TEST_OPT})
    set(labels ${ARG_LABELS})
    set(gpu ${ARG_GPU})
    if(name MATCHES "_device$")
      set(labels gpu)
      set(gpu TRUE)
    endif()
    if(gpu)
      dsv4_gpu_tests(${target} ${room} "${labels}")
    else()
      gtest_discover_tests(${target} TEST_PREFIX "${room}/" DISCOVERY_TIMEOUT 60
                           XML_OUTPUT_DIR ${CMAKE_BINARY_DIR}/junit
                           PROPERTIES TIMEOUT 600 LABELS "${labels}")
    endif()
  endforeach()
endfunction()
