# xstage_add_test(NAME <name> SOURCES <files...> LIBS <targets...> LABEL cpu|gpu)
# One GoogleTest executable; each TEST becomes a CTest test carrying the label.
# GPU tests call GTEST_SKIP() when no device is present; CTest reports them as skipped.
# Tests are listed at build time (POST_BUILD): the generated CTest files are plain add_test() calls that
# refer to no CMake module, so a build folder carried to a GPU host runs under that host's ctest, whatever
# its CMake version (PRE_TEST discovery included the build machine's GoogleTestAddTests.cmake).
function(xstage_add_test)
  cmake_parse_arguments(T "" "NAME;LABEL" "SOURCES;LIBS" ${ARGN})
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main)
  gtest_discover_tests(${T_NAME}
    DISCOVERY_MODE POST_BUILD
    PROPERTIES LABELS ${T_LABEL} SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]"
    TEST_PREFIX "${T_LABEL}.")
endfunction()
