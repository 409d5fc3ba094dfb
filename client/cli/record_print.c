/* record_print.c - see record_print.h. */
#include "record_print.h"
#include "cli.h"
#include "output.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

const char rp_format_help[] =
    "  -f, --format FORMAT    print each record through FORMAT instead of \"%v\\n\":\n"
    "                           %v value    %k key      %o offset   %p partition\n"
    "                           %t timestamp (ms)       %T topic\n"
    "                           %h headers as name=value,name=value\n"
    "                           %S value length, %K key length (-1: null)\n"
    "                           %% a percent sign; escapes \\n \\t \\r \\0 \\\\ \\xHH\n"
    "                         keys and values are printed as raw bytes: to read\n"
    "                         back values with any bytes use e.g. -f '%v\\0' or\n"
    "                         -f '%S %v', or --json\n"
    "  --json                 one JSON object per line (JSON Lines): topic,\n"
    "                         partition, offset, timestamp, key, value, headers;\n"
    "                         a key or value that is not UTF-8 text is null, its\n"
    "                         bytes in key_base64 / value_base64\n";

int rp_format_parse(const char *cmd, const char *arg, struct rp_format *f)
{
  if (strlen(arg) >= sizeof f->text) {
    return cli_usage_error(cmd, "-f: the format is longer than %d bytes", RP_FORMAT_MAX - 1);
  }
  if (cli_unescape(cmd, "-f", arg, f->text, &f->len) != 0) {
    return CLI_USAGE;
  }
  /* Check the conversions now rather than at the first record. */
  for (size_t i = 0; i < f->len; i++) {
    if (f->text[i] != '%') {
      continue;
    }
    if (++i == f->len || f->text[i] == '\0' || strchr("vkoptThSK%", f->text[i]) == NULL) {
      return cli_usage_error(cmd,
                             "-f: '%%%c' is not a conversion (%%v %%k %%o %%p %%t %%T %%h %%S "
                             "%%K %%%%)",
                             i == f->len ? ' ' : f->text[i]);
    }
  }
  return CLI_OK;
}

/* Writes bytes (NULL: nothing). */
static void rp_put(const void *p, size_t len)
{
  if (p != NULL && len > 0) {
    fwrite(p, 1, len, stdout);
  }
}

static void rp_headers(const struct cairn_record *r)
{
  for (size_t h = 0; h < r->header_count; h++) {
    if (h > 0) {
      putchar(',');
    }
    rp_put(r->headers[h].key, r->headers[h].key_len);
    putchar('=');
    rp_put(r->headers[h].value, r->headers[h].value_len);
  }
}

/* One conversion (the character after '%'). */
static void rp_conversion(char conv, const struct cairn_record *r)
{
  switch (conv) {
  case 'v': rp_put(r->value, r->value_len); break;
  case 'k': rp_put(r->key, r->key_len); break;
  case 'o': printf("%" PRId64, r->offset); break;
  case 'p': printf("%" PRId32, r->partition); break;
  case 't': printf("%" PRId64, r->timestamp_ms); break;
  case 'T': fputs(r->topic, stdout); break;
  case 'S': printf("%lld", r->value == NULL ? -1LL : (long long)r->value_len); break;
  case 'K': printf("%lld", r->key == NULL ? -1LL : (long long)r->key_len); break;
  case 'h': rp_headers(r); break;
  default: putchar('%'); break; /* %% */
  }
}

static void rp_json(const struct cairn_record *r)
{
  struct oj j;
  oj_init(&j, stdout, false);
  oj_object_begin(&j);
  oj_key(&j, "topic");
  oj_str(&j, r->topic);
  oj_key(&j, "partition");
  oj_int(&j, r->partition);
  oj_key(&j, "offset");
  oj_int(&j, r->offset);
  oj_key(&j, "timestamp");
  oj_int(&j, r->timestamp_ms);
  oj_bytes_member(&j, "key", r->key, r->key_len);
  oj_bytes_member(&j, "value", r->value, r->value_len);
  oj_key(&j, "headers");
  oj_array_begin(&j);
  for (size_t h = 0; h < r->header_count; h++) {
    oj_object_begin(&j);
    oj_bytes_member(&j, "name", r->headers[h].key, r->headers[h].key_len);
    oj_bytes_member(&j, "value", r->headers[h].value, r->headers[h].value_len);
    oj_object_end(&j);
  }
  oj_array_end(&j);
  oj_object_end(&j);
  oj_end(&j);
}

void rp_print(const struct rp_format *f, bool json, const struct cairn_record *r)
{
  if (json) {
    rp_json(r);
    return;
  }
  if (f == NULL || f->len == 0) {
    rp_put(r->value, r->value_len);
    putchar('\n');
    return;
  }
  for (size_t i = 0; i < f->len; i++) {
    if (f->text[i] != '%') {
      putchar(f->text[i]);
      continue;
    }
    rp_conversion(f->text[++i], r);
  }
}
