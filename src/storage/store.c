/* store.c - the parts of the store interface shared by every
 * implementation. */
#include "storage/store.h"

#include <string.h>

void store_region_release(struct store_region *r)
{
  if (r->release != NULL) {
    r->release(r);
  }
  memset(r, 0, sizeof *r);
  r->fd = -1;
}
