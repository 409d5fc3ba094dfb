/* wire_err.h - the one table from the node's internal error codes
 * (common/err.h, negative errno) to the client protocol's stable ErrorCode
 * values (proto/client.proto), and the ErrorCode names for docs and logs. */
#ifndef CAIRN_WIRE_ERR_H
#define CAIRN_WIRE_ERR_H

#include "client.pb-c.h"

/* The wire code for an internal code: 0 gives OK; a code not in the table
 * gives UNKNOWN (the error message then carries cairn_strerror()).
 * Context: any thread. */
Cairn__Client__ErrorCode wire_err_from(int err);

/* The ErrorCode's name as client.proto spells it ("NOT_LEADER"); "?" for a
 * number the schema does not know. Returns a static string. Context: any
 * thread. */
const char *wire_err_name(Cairn__Client__ErrorCode code);

#endif
