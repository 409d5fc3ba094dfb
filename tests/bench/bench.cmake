# bench.cmake - included at the end of CMakeLists.txt: cairn-bench (load
# through libcairn), the programs bench/compare runs for the peers and the
# machine's limits, and their tests.

# cairn-bench, with the log-linear latency histogram its tests also link.
add_library(cairn_bench_hist STATIC tests/bench/hist.c)
target_include_directories(cairn_bench_hist PUBLIC ${CMAKE_SOURCE_DIR}/tests/bench)
add_executable(cairn-bench tests/bench/cairn_bench.c)
target_link_libraries(cairn-bench PRIVATE cairn_client cairn_bench_hist pthread)

# Its histogram, and a tiny workload against one real cairnd (native and Kafka port).
cairn_unit_test(test_hist tests/unit/bench/test_hist.c 30)
target_link_libraries(test_hist PRIVATE cairn_bench_hist m)
add_test(NAME test_cairn_bench COMMAND bash ${CMAKE_SOURCE_DIR}/tests/bench/bench_smoke.sh
  $<TARGET_FILE:cairnd> $<TARGET_FILE:cairn-bench> $<TARGET_FILE:cairn-kafka-bench>)
set_tests_properties(test_cairn_bench PROPERTIES TIMEOUT 120)

# The peers' side of bench/compare: a JetStream client on libnats, and the
# machine's limits (fdatasync, synced writes, loopback). Built only where
# libnats is installed (deploy/setup.sh installs it).
find_library(CAIRN_NATS_LIB nats)
if(CAIRN_NATS_LIB AND EXISTS /usr/include/nats/nats.h)
  add_executable(cairn-nats-bench tests/bench/nats_bench.c tests/bench/hist.c)
  target_include_directories(cairn-nats-bench PRIVATE ${CMAKE_SOURCE_DIR}/tests/bench)
  target_link_libraries(cairn-nats-bench PRIVATE ${CAIRN_NATS_LIB} pthread)
endif()
add_executable(cairn-limits-bench tests/bench/limits_bench.c tests/bench/hist.c)
target_include_directories(cairn-limits-bench PRIVATE ${CMAKE_SOURCE_DIR}/tests/bench)
target_link_libraries(cairn-limits-bench PRIVATE pthread)

# bench/compare's results parsed into its table, against fixture files.
add_test(NAME test_compare_parse COMMAND python3 ${CMAKE_SOURCE_DIR}/bench/compare_table.py
  --self-test ${CMAKE_SOURCE_DIR}/tests/bench/fixtures)
set_tests_properties(test_compare_parse PROPERTIES TIMEOUT 60)

# The Kafka-protocol side of bench/compare's kafka stage: librdkafka
# producers and consumers against the Kafka port.
add_executable(cairn-kafka-bench tests/bench/kafka_bench.c)
target_link_libraries(cairn-kafka-bench PRIVATE PkgConfig::RDKAFKA pthread)
