/* memlog.h - a partition store held in memory: for topics declared
 * ephemeral and for unit tests of the layers above. Same contract as
 * plog (store.h) except that nothing is durable: flush only moves the
 * durable marks, and everything is gone at close. */
#ifndef CAIRN_MEMLOG_H
#define CAIRN_MEMLOG_H

#include "storage/store.h"

#include <stdint.h>

struct memlog_opts {
  uint64_t retention_bytes; /* 0: no limit */
  int64_t retention_ms;     /* 0: no limit */
  uint32_t max_batch_bytes; /* 0: default */
};

/* Creates an empty store starting at offset 0. On success *out is owned by
 * the caller (free with store_close()). Returns 0 or CAIRN_ENOMEM. */
__attribute__((warn_unused_result)) int memlog_new(const struct memlog_opts *opts,
                                                   struct store **out);

#endif
