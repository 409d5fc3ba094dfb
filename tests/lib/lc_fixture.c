/* lc_fixture.c - libcairn helpers shared by the integration tests. */
#include "lc_fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void lcf_bootstrap_list(const struct cd_cluster *c, char *buf, size_t len)
{
  buf[0] = '\0';
  for (int i = 0; i < c->n; i++) {
    size_t used = strlen(buf);
    snprintf(buf + used, len - used, "%s%s", used > 0 ? "," : "", c->nodes[i].client_addr);
  }
}

struct cairn_sync *lcf_connect_sync(const char *bootstrap, const char *client_id,
                                    uint32_t request_ms, uint32_t delivery_ms)
{
  struct cairn_options o;
  cairn_options_init(&o);
  o.client_id = client_id;
  o.request_timeout_ms = request_ms;
  o.connect_timeout_ms = 2000;
  o.delivery_timeout_ms = delivery_ms;
  o.retry_backoff_ms = 50;
  o.retry_backoff_max_ms = 500;
  struct cairn_sync *s;
  char err[512];
  int rv = cairn_sync_new(bootstrap, &o, &s, err, sizeof err);
  if (rv != 0) {
    fprintf(stderr, "cairn_sync_new(%s): %s: %s\n", bootstrap, cairn_errname(rv), err);
    return NULL;
  }
  return s;
}

void lcf_on_delivery(struct cairn_producer *p, int status, const struct cairn_delivery *d,
                     void *data)
{
  (void)p;
  struct lcf_sent *s = data;
  if (s->done) {
    fprintf(stderr, "a second delivery callback for one message\n");
    abort();
  }
  s->done = true;
  s->status = status;
  s->partition = d->partition;
  s->offset = d->offset;
}

int lcf_send_numbered(struct cairn_sync *s, struct cairn_producer *p, const char *topic, int i,
                      int nkeys, struct lcf_sent *sent)
{
  char key[16], value[16];
  int kl = snprintf(key, sizeof key, "k%d", i % nkeys);
  int vl = snprintf(value, sizeof value, "m-%d", i);
  struct cairn_message m;
  cairn_message_init(&m);
  m.topic = topic;
  m.key = key;
  m.key_len = (size_t)kl;
  m.value = value;
  m.value_len = (size_t)vl;
  return cairn_sync_send(s, p, &m, lcf_on_delivery, sent);
}
