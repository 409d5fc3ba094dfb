/* tls_uv.c - a TLS session's ciphertext read buffer and its own writes to
 * a libuv stream (tls_uv.h). */
#include "net/tls_uv.h"

#include "common/err.h"
#include "net/tls.h"

#include <stdint.h>
#include <stdlib.h>

/* One write of ciphertext: the request and its bytes in one allocation. */
struct tls_uv_wr {
  uv_write_t req;
  uint8_t bytes[];
};

void tls_uv_in_buf(uint8_t **in, uv_buf_t *buf)
{
  if (*in == NULL) {
    *in = malloc(TLS_UV_IN_SIZE);
  }
  *buf = uv_buf_init((char *)*in, *in != NULL ? TLS_UV_IN_SIZE : 0);
}

static void tls_uv_on_write(uv_write_t *req, int status)
{
  (void)status; /* a failure shows as a read error or a close */
  free(req->data);
}

int tls_uv_flush(struct tls_session *s, uv_stream_t *stream)
{
  size_t n = tls_out_pending(s);
  if (n == 0) {
    return 0;
  }
  struct tls_uv_wr *wr = malloc(sizeof *wr + n);
  if (wr == NULL) {
    return CAIRN_ENOMEM;
  }
  n = tls_take_out(s, wr->bytes, n);
  wr->req.data = wr;
  uv_buf_t b = uv_buf_init((char *)wr->bytes, (unsigned)n);
  int rv = uv_write(&wr->req, stream, &b, 1, tls_uv_on_write);
  if (rv != 0) {
    free(wr);
  }
  return rv;
}
