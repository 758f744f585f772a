# Script mode (cmake -P), run on every build by the target xstage_version_info: writes OUT, a header with the
# project's version and the source tree's git revision, and touches it only when its text changes, so a build
# after a commit recompiles one file. SRC: the source tree; OUT: the header; VERSION: project(VERSION).
# The revision is `git rev-parse --short=12 HEAD`, "+dirty" when tracked files differ from it, "unknown" where
# the tree is no git checkout (a tarball) or git is missing.
set(rev "unknown")
find_program(GIT git)
if(GIT)
  execute_process(COMMAND ${GIT} -C ${SRC} rev-parse --short=12 HEAD
                  OUTPUT_VARIABLE head RESULT_VARIABLE rc OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(rc EQUAL 0 AND head)
    set(rev ${head})
    execute_process(COMMAND ${GIT} -C ${SRC} status --porcelain --untracked-files=no
                    OUTPUT_VARIABLE changes RESULT_VARIABLE rc OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    if(rc EQUAL 0 AND changes)
      string(APPEND rev "+dirty")
    endif()
  endif()
endif()
set(text "// Written by cmake/version_info.cmake at build time; not edited by hand.\n#pragma once\n#define XSTAGE_VERSION_STRING \"${VERSION}\"\n#define XSTAGE_GIT_REVISION \"${rev}\"\n")
set(old "")
if(EXISTS ${OUT})
  file(READ ${OUT} old)
endif()
if(NOT old STREQUAL text)
  file(WRITE ${OUT} "${text}")
endif()
