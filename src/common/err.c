/* err.c - cairn_strerror() over the table in err.h and negative errno. */
#include "common/err.h"

#include <string.h>
#include <uv.h>

const char *cairn_strerror(int err)
{
  if (err == 0) {
    return "success";
  }
  switch (err) {
#define CAIRN_ERR_TEXT(name, value, text) \
  case name:                              \
    return text;
    CAIRN_ERR_TABLE(CAIRN_ERR_TEXT)
#undef CAIRN_ERR_TEXT
  default:
    break;
  }
  if (err <= -3000 && err > -3100) {
    /* libuv's getaddrinfo codes (UV_EAI_*), not errno values. */
    return uv_strerror(err);
  }
  if (err < 0 && err > -4096) {
    return strerror(-err); /* glibc: static strings for known codes */
  }
  return "unknown error";
}

const char *cairn_errname(int err)
{
  if (err == 0) {
    return "OK";
  }
  switch (err) {
#define CAIRN_ERR_NAME(name, value, text) \
  case name:                              \
    return #name;
    CAIRN_ERR_TABLE(CAIRN_ERR_NAME)
#undef CAIRN_ERR_NAME
  default:
    break;
  }
  if (err < 0 && err > -4096) {
    const char *n = strerrorname_np(-err);
    return n ? n : "errno";
  }
  return "unknown";
}
