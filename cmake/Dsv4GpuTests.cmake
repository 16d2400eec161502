# Read by ctest (a TEST_INCLUDE_FILES entry per GPU test executable, written by dsv4_gpu_tests):
# registers the executable's GoogleTest tests as shards "<target>/shard-<i>-of-<N>" (or, with
# DSV4_GPU_TEST_SHARDS=per-test, one test "<room>/<Suite.Test>" each), labelled, one GPU slot each.
# Inputs: dsv4_target dsv4_room dsv4_labels dsv4_workdir dsv4_junit_dir dsv4_list
# dsv4_default_shards dsv4_per_shard (DSV4_GPU_TEST_SHARDS and DSV4_GPU_TESTS_PER_SHARD in ctest's
# environment override the last two); the list file sets dsv4_exe and dsv4_tests.
if(NOT EXISTS "${dsv4_list}")
  add_test("${dsv4_target}_NOT_BUILT" "${dsv4_target}_NOT_BUILT")
  return()
endif()
include("${dsv4_list}")
set(dsv4_mode "$ENV{DSV4_GPU_TEST_SHARDS}")
if(dsv4_mode STREQUAL "")
  set(dsv4_mode "${dsv4_default_shards}")
endif()
if("$ENV{DSV4_GPU_TESTS_PER_SHARD}" MATCHES "^[1-9][0-9]*$")
  set(dsv4_per_shard "$ENV{DSV4_GPU_TESTS_PER_SHARD}")
endif()
list(LENGTH dsv4_tests dsv4_count)

if(dsv4_mode STREQUAL "per-test")
  foreach(dsv4_test IN LISTS dsv4_tests)
    set(dsv4_name "${dsv4_room}/${dsv4_test}")
    add_test("${dsv4_name}" "${dsv4_exe}" "--gtest_filter=${dsv4_test}"
             "--gtest_output=xml:${dsv4_junit_dir}/${dsv4_room}/${dsv4_test}.xml")
    set_tests_properties("${dsv4_name}" PROPERTIES WORKING_DIRECTORY "${dsv4_workdir}"
                         SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]" TIMEOUT 600
                         LABELS "${dsv4_labels}" RESOURCE_GROUPS "gpus:1")
  endforeach()
  return()
endif()

if(dsv4_mode MATCHES "^[1-9][0-9]*$")
  set(dsv4_shards ${dsv4_mode})
else()
  if(NOT dsv4_mode STREQUAL "auto")
    message(WARNING "DSV4_GPU_TEST_SHARDS='${dsv4_mode}' is not auto, per-test or a positive "
                    "number; ${dsv4_target} is sharded as with auto")
  endif()
  math(EXPR dsv4_shards "(${dsv4_count} + ${dsv4_per_shard} - 1) / ${dsv4_per_shard}")
endif()
if(dsv4_shards GREATER dsv4_count)
  set(dsv4_shards ${dsv4_count})
endif()
if(dsv4_shards LESS 1)
  set(dsv4_shards 1)
endif()
foreach(dsv4_i RANGE 1 ${dsv4_shards})
  math(EXPR dsv4_index "${dsv4_i} - 1")
  set(dsv4_name "${dsv4_target}/shard-${dsv4_i}-of-${dsv4_shards}")
  add_test("${dsv4_name}" "${dsv4_exe}" "--gtest_output=xml:${dsv4_junit_dir}/${dsv4_name}.xml")
  # The skip line comes from fixtures/main/test_main.cpp when no test of the shard passed or
  # failed and some skipped (no GPU).
  set_tests_properties("${dsv4_name}" PROPERTIES
                       ENVIRONMENT "GTEST_TOTAL_SHARDS=${dsv4_shards};GTEST_SHARD_INDEX=${dsv4_index}"
                       WORKING_DIRECTORY "${dsv4_workdir}"
                       SKIP_REGULAR_EXPRESSION "\\[dsv4\\] every test skipped" TIMEOUT 1800
                       LABELS "${dsv4_labels}" RESOURCE_GROUPS "gpus:1")
endforeach()
