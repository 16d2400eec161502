# Helpers that turn a room's files into targets, so a new family registers nothing by hand.
include_guard(GLOBAL)
include(GoogleTest)

set(DSV4_WARNINGS -Wall -Wextra -Wno-unused-parameter)

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

# One GoogleTest executable per test_*.cpp in the calling directory. Every test gets the
# directory's LABELS; GPU suites (GPU, label gpu) also ask CTest for one GPU slot. In a cpu
# directory, files named test_*_device.cpp hold the tests that need a GPU: they are labelled gpu
# (not the directory's labels) and ask for a GPU slot too.
#   dsv4_test_directory(LIBS lib... [LABELS l...] [GPU])
function(dsv4_test_directory)
  cmake_parse_arguments(ARG "GPU" "" "LIBS;LABELS" ${ARGN})
  file(GLOB tests CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/test_*.cpp)
  foreach(src IN LISTS tests)
    get_filename_component(name ${src} NAME_WE)
    get_filename_component(room ${CMAKE_CURRENT_SOURCE_DIR} NAME)
    set(target ${room}_${name})
    add_executable(${target} ${src})
    target_link_libraries(${target} PRIVATE ${ARG_LIBS} GTest::gmock GTest::gtest GTest::gtest_main)
    target_compile_options(${target} PRIVATE ${DSV4_WARNINGS})
    set(labels ${ARG_LABELS})
    set(gpu ${ARG_GPU})
    if(name MATCHES "_device$")
      set(labels gpu)
      set(gpu TRUE)
    endif()
    set(props TIMEOUT 600 LABELS "${labels}")
    if(gpu)
      list(APPEND props RESOURCE_GROUPS "gpus:1")
    endif()
    gtest_discover_tests(${target} TEST_PREFIX "${room}/" DISCOVERY_TIMEOUT 60
                         XML_OUTPUT_DIR ${CMAKE_BINARY_DIR}/junit PROPERTIES ${props})
  endforeach()
endfunction()
