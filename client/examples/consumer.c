/* consumer.c - libcairn example: read a partition from the beginning with
 * the blocking API.
 *
 *   cairn-example-consumer HOST:PORT[,HOST:PORT...] TOPIC [PARTITION [COUNT]]
 *
 * Prints "offset key value" for each record until COUNT records were read
 * (default: until nothing arrives for 2 seconds). */
#include <cairn/cairn.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
  if (argc < 3) {
    fprintf(stderr, "usage: %s HOST:PORT[,HOST:PORT...] TOPIC [PARTITION [COUNT]]\n", argv[0]);
    return 2;
  }
  int32_t partition = argc > 3 ? (int32_t)strtol(argv[3], NULL, 10) : 0;
  long count = argc > 4 ? strtol(argv[4], NULL, 10) : -1;
  struct cairn_sync *s;
  char err[512];
  int rv = cairn_sync_new(argv[1], NULL, &s, err, sizeof err);
  if (rv != 0) {
    fprintf(stderr, "cannot reach the cluster: %s\n", err);
    return 1;
  }
  struct cairn_consumer *cons;
  if ((rv = cairn_sync_consumer_new(s, NULL, &cons)) != 0 ||
      (rv = cairn_consumer_assign(cons, argv[2], partition, CAIRN_OFFSET_EARLIEST)) != 0) {
    fprintf(stderr, "consumer: %s\n", cairn_strerror(rv));
    cairn_sync_free(s);
    return 1;
  }
  long n = 0;
  while (count < 0 || n < count) {
    const struct cairn_record *r;
    rv = cairn_sync_poll(s, cons, 2000, &r, NULL, NULL);
    if (rv == UV_ETIMEDOUT && count < 0) {
      rv = 0;
      break;
    }
    if (rv != 0) {
      fprintf(stderr, "poll: %s (%s)\n", cairn_strerror(rv), cairn_sync_errmsg(s));
      break;
    }
    printf("%" PRId64 " %.*s %.*s\n", r->offset, (int)r->key_len,
           r->key != NULL ? (const char *)r->key : "", (int)r->value_len,
           r->value != NULL ? (const char *)r->value : "");
    n++;
  }
  cairn_sync_free(s);
  return rv == 0 ? 0 : 1;
}
