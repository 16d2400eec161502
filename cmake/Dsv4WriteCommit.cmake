# Writes OUT with the source tree's commit (git describe --always --dirty) as DSV4_SOURCE_COMMIT,
# rewriting it only when the commit changed, so a build names the commit it was built from.
execute_process(COMMAND git describe --always --dirty --abbrev=7 WORKING_DIRECTORY ${SRC}
                OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT commit)
  set(commit "unknown")
endif()
set(text "// Generated at build time by cmake/Dsv4WriteCommit.cmake.\n#pragma once\n#define DSV4_SOURCE_COMMIT \"${commit}\"\n")
set(old "")
if(EXISTS ${OUT})
  file(READ ${OUT} old)
endif()
if(NOT old STREQUAL text)
  file(WRITE ${OUT} "${text}")
endif()
