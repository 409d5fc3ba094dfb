/* lc_fixture.h - what the libcairn integration tests share: a bootstrap
 * list of a cd_cluster, a blocking client with test-friendly retry timings,
 * and delivery bookkeeping. Linked into the tests that use libcairn (it
 * needs cairn_client, which cairn_testlib does not link). */
#ifndef CAIRN_TU_LC_FIXTURE_H
#define CAIRN_TU_LC_FIXTURE_H

#include "cairnd.h"

#include <cairn/cairn.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* "addr,addr,..." of every node set up in c (started or not). */
void lcf_bootstrap_list(const struct cd_cluster *c, char *buf, size_t len);

/* A blocking client (cairn_sync_new) on bootstrap: request and delivery
 * timeouts as given, a 2 s connect timeout, retry backoff 50..500 ms.
 * Returns owned (cairn_sync_free), or NULL with the reason on stderr. */
struct cairn_sync *lcf_connect_sync(const char *bootstrap, const char *client_id,
                                    uint32_t request_ms, uint32_t delivery_ms);

/* One message's outcome, filled by lcf_on_delivery (data: its lcf_sent). */
struct lcf_sent {
  int status;
  int32_t partition;
  int64_t offset;
  bool done;
};

/* A cairn_delivery_cb recording into data (a struct lcf_sent); a second
 * callback for one message aborts the test. */
void lcf_on_delivery(struct cairn_producer *p, int status, const struct cairn_delivery *d,
                     void *data);

/* Sends message i to topic with cairn_sync_send: key "k<i mod nkeys>",
 * value "m-<i>" (the number a read-back check parses), its outcome into
 * *sent through lcf_on_delivery. Returns cairn_sync_send's code. */
int lcf_send_numbered(struct cairn_sync *s, struct cairn_producer *p, const char *topic, int i,
                      int nkeys, struct lcf_sent *sent);

#endif
