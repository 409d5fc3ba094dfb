/* raft_err.c - RAFT_* codes to cairn codes. */
#include "cluster/raft_err.h"

#include "common/err.h"

#include <errno.h>
#include <raft.h>

int raft_err_to_cairn(int raft_rv)
{
  switch (raft_rv) {
  case 0:
    return 0;
  case RAFT_NOMEM:
    return CAIRN_ENOMEM;
  case RAFT_NOTLEADER:
    return CAIRN_ENOTLEADER;
  case RAFT_LEADERSHIPLOST:
    return CAIRN_EINDOUBT; /* appended, maybe replicated: a later leader may commit it */
  case RAFT_CANCELED:
  case RAFT_SHUTDOWN:
    return CAIRN_ESHUTDOWN;
  case RAFT_NOSPACE:
    return -ENOSPC;
  case RAFT_IOERR:
    return -EIO;
  case RAFT_CORRUPT:
    return CAIRN_ECORRUPT;
  case RAFT_TOOBIG:
    return CAIRN_ETOOLARGE;
  case RAFT_NOCONNECTION:
    return -ECONNREFUSED;
  default:
    return CAIRN_ERAFT;
  }
}
