# bench.cmake - included at the end of CMakeLists.txt: cairn-bench (load
# through libcairn), the programs bench/compare runs for the peers and the
# machine's limits, and their tests.

# cairn-bench, with the log-linear latency histogram its tests also link.
add_library(cairn_bench_hist STATIC tests/bench/hist.c)
target_include_directories(cairn_bench_hist PUBLIC ${CMAKE_SOURCE_DIR}/tests/bench)
add_executable(cairn-bench tests/bench/cairn_bench.c)
target_link_libraries(cairn-bench PRIVATE cairn_client cairn_bench_hist pthread)

# Its histogram, and a tiny workload against one real cairnd.
cairn_unit_test(test_hist tests/unit/bench/test_hist.c 30)
target_link_libraries(test_hist PRIVATE cairn_bench_hist m)
add_test(NAME test_cairn_bench COMMAND bash ${CMAKE_SOURCE_DIR}/tests/bench/bench_smoke.sh
  $<TARGET_FILE:cairnd> $<TARGET_FILE:cairn-bench>)
set_tests_properties(test_cairn_bench PROPERTIES TIMEOUT 120)
