# Finds every third-party dependency from Debian's packages; a missing one names its apt package.
include_guard(GLOBAL)
find_package(PkgConfig QUIET)

macro(dsv4_require_package name apt)
  find_package(${name} ${ARGN} QUIET)
  if(NOT ${name}_FOUND)
    message(FATAL_ERROR "dependency ${name} not found: install the Debian package '${apt}' "
                        "(apt-get install -y ${apt}), or run ci/deps.sh")
  endif()
endmacro()

find_package(Threads REQUIRED)
dsv4_require_package(GTest libgtest-dev)
dsv4_require_package(Eigen3 libeigen3-dev NO_MODULE)
dsv4_require_package(nlohmann_json nlohmann-json3-dev)

# Command lines (dsv4-eval, dsv4-nightly, dsv4-replay) and the JUnit reader of dsv4-nightly.
if(NOT DSV4_GPU_BACKEND STREQUAL "hip-compile")
  dsv4_require_package(cxxopts libcxxopts-dev)
  dsv4_require_package(pugixml libpugixml-dev)
endif()

if(DSV4_BUILD_E2E AND NOT DSV4_GPU_BACKEND STREQUAL "hip-compile")
  dsv4_require_package(CURL libcurl4-openssl-dev)
  dsv4_require_package(OpenSSL libssl-dev)
  if(NOT PkgConfig_FOUND)
    message(FATAL_ERROR "pkg-config not found: install the Debian package 'pkg-config'")
  endif()
  pkg_check_modules(HTTPLIB QUIET IMPORTED_TARGET cpp-httplib)
  if(NOT HTTPLIB_FOUND)
    message(FATAL_ERROR "dependency cpp-httplib not found: install the Debian package "
                        "'libcpp-httplib-dev' (apt-get install -y libcpp-httplib-dev)")
  endif()
  # Oniguruma: the regex engine Hugging Face tokenizers run their pre-tokenizer patterns with.
  pkg_check_modules(ONIG QUIET IMPORTED_TARGET oniguruma)
  if(NOT ONIG_FOUND)
    message(FATAL_ERROR "dependency oniguruma not found: install the Debian package "
                        "'libonig-dev' (apt-get install -y libonig-dev)")
  endif()
endif()
