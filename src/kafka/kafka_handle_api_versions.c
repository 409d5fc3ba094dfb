/* kafka_handle_api_versions.c - ApiVersions v0-3: the table's apis and
 * versions. v3's request and answer bodies are flexible (compact arrays,
 * tagged fields); its response header stays v0, as Kafka defines it so
 * that any client can read the answer. An unsupported version is answered
 * in the v0 layout with UNSUPPORTED_VERSION and the list, so the client
 * can pick a version it shares. */
#include "kafka/kafka_handlers.h"

void kafka_handle_api_versions(struct kafka_req *kr)
{
  int16_t v = kr->h.api_version;
  bool supported = v >= 0 && v <= 3;
  if (supported && v >= 3) {
    /* client_software_name, client_software_version: informational */
    (void)kafka_get_compact_string(&kr->body);
    (void)kafka_get_compact_string(&kr->body);
    kafka_skip_tagged_fields(&kr->body);
  }
  /* A body that does not parse is no reason to withhold the list. */
  const struct kafka_api_range *ranges;
  size_t n = kafka_api_ranges(&ranges);
  struct kafka_buf b;
  kafka_buf_init(&b);
  kafka_put_err(&b, supported ? KAFKA_ERR_NONE : KAFKA_ERR_UNSUPPORTED_VERSION);
  bool flexible = supported && v >= 3;
  if (flexible) {
    kafka_put_compact_array_len(&b, (int32_t)n);
  } else {
    kafka_put_array_len(&b, (int32_t)n);
  }
  for (size_t i = 0; i < n; i++) {
    kafka_put_i16(&b, ranges[i].api_key);
    kafka_put_i16(&b, ranges[i].min_version);
    kafka_put_i16(&b, ranges[i].max_version);
    if (flexible) {
      kafka_put_empty_tagged_fields(&b);
    }
  }
  if (supported && v >= 1) {
    kafka_put_i32(&b, 0); /* throttle_time_ms */
  }
  if (flexible) {
    kafka_put_empty_tagged_fields(&b);
  }
  kafka_req_respond(kr, &b);
}
