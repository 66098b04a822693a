# Test helpers. Every test carries one of the labels:
#   unit     pure in-process tests (GoogleTest)
#   preload  real programs run under LD_PRELOAD on the simulated driver
#   gpu      needs an NVIDIA GPU; `ctest -LE gpu` skips them
#
# gswap_add_gtest(NAME name SOURCES ... [LIBS ...] [LABELS ...] [ENV ...])
#   Builds a GoogleTest binary and registers it as one CTest test.
function(gswap_add_gtest)
  cmake_parse_arguments(T "" "NAME;TIMEOUT" "SOURCES;LIBS;LABELS;ENV" ${ARGN})
  if(NOT T_LABELS)
    set(T_LABELS unit)
  endif()
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main Threads::Threads)
  add_test(NAME ${T_NAME} COMMAND ${T_NAME})
  set_tests_properties(${T_NAME} PROPERTIES LABELS "${T_LABELS}" TIMEOUT ${T_TIMEOUT})
  if(T_ENV)
    set_tests_properties(${T_NAME} PROPERTIES ENVIRONMENT "${T_ENV}")
  endif()
endfunction()
