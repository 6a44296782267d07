# Writes OUT, the header of `loom --version` (src/driver/json_output.cpp), at every build:
# the project VERSION and `git describe --tags --always --dirty` of SOURCE_DIR (empty
# outside a git clone, or without git). The file is rewritten only when its text changes,
# so an unchanged tree recompiles nothing.
execute_process(COMMAND git describe --tags --always --dirty
  WORKING_DIRECTORY ${SOURCE_DIR}
  OUTPUT_VARIABLE describe OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  set(describe "")
endif()
set(text "// Generated at build time by cmake/version_header.cmake; do not edit.\n#pragma once\n#define LOOM_VERSION \"${VERSION}\"\n#define LOOM_GIT_DESCRIBE \"${describe}\"\n")
if(EXISTS ${OUT})
  file(READ ${OUT} old)
else()
  set(old "")
endif()
if(NOT old STREQUAL text)
  file(WRITE ${OUT} "${text}")
endif()
