/* producer.c - libcairn example: produce messages with the blocking API.
 *
 *   cairn-example-producer HOST:PORT[,HOST:PORT...] TOPIC [COUNT]
 *
 * Creates TOPIC (one partition, one replica) if it does not exist, sends
 * COUNT messages ("message-0", ...; keys "key-0", ...) to it, then flushes
 * and prints how many were delivered. */
#include <cairn/cairn.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

struct tally {
  long delivered;
  long failed;
};

static void on_delivery(struct cairn_producer *p, int status, const struct cairn_delivery *d,
                        void *data)
{
  struct tally *t = data;
  if (status == 0) {
    t->delivered++;
  } else {
    t->failed++;
    fprintf(stderr, "delivery to %s failed: %s\n", d->topic, cairn_strerror(status));
  }
}

int main(int argc, char **argv)
{
  if (argc < 3) {
    fprintf(stderr, "usage: %s HOST:PORT[,HOST:PORT...] TOPIC [COUNT]\n", argv[0]);
    return 2;
  }
  long count = argc > 3 ? strtol(argv[3], NULL, 10) : 10;
  struct cairn_options o;
  cairn_options_init(&o);
  o.client_id = "example-producer";
  o.request_timeout_ms = 10000;
  struct cairn_sync *s;
  char err[512];
  int rv = cairn_sync_new(argv[1], &o, &s, err, sizeof err);
  if (rv != 0) {
    fprintf(stderr, "cannot reach the cluster: %s\n", err);
    return 1;
  }
  struct cairn_topic_info *info;
  rv = cairn_sync_describe_topic(s, argv[2], &info);
  if (rv == CAIRN_EUNKNOWN_TOPIC) {
    rv = cairn_sync_create_topic(s, argv[2], 1, 1, NULL);
  } else if (rv == 0) {
    printf("topic %s: %u partitions\n", info->name, info->partition_count);
    cairn_topic_info_free(info);
  }
  if (rv != 0) {
    fprintf(stderr, "topic %s: %s\n", argv[2], cairn_sync_errmsg(s));
    cairn_sync_free(s);
    return 1;
  }
  struct cairn_producer_options po;
  cairn_producer_options_init(&po);
  po.compression = CAIRN_COMPRESSION_LZ4;
  struct cairn_producer *p;
  if ((rv = cairn_sync_producer_new(s, &po, &p)) != 0) {
    fprintf(stderr, "producer: %s\n", cairn_strerror(rv));
    cairn_sync_free(s);
    return 1;
  }
  struct tally t = {0, 0};
  for (long i = 0; i < count; i++) {
    char key[32], value[64];
    int kl = snprintf(key, sizeof key, "key-%ld", i);
    int vl = snprintf(value, sizeof value, "message-%ld", i);
    struct cairn_message m;
    cairn_message_init(&m);
    m.topic = argv[2];
    m.key = key;
    m.key_len = (size_t)kl;
    m.value = value;
    m.value_len = (size_t)vl;
    if ((rv = cairn_sync_send(s, p, &m, on_delivery, &t)) != 0) {
      fprintf(stderr, "send: %s\n", cairn_strerror(rv));
      break;
    }
  }
  if ((rv = cairn_sync_flush(s, p)) != 0) {
    fprintf(stderr, "flush: %s\n", cairn_strerror(rv));
  }
  printf("delivered %ld, failed %ld\n", t.delivered, t.failed);
  cairn_sync_free(s);
  return t.failed == 0 && rv == 0 ? 0 : 1;
}
