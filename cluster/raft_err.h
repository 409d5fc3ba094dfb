/* raft_err.h - the one place where canonical/raft's positive RAFT_* codes
 * become the project's negative codes (src/common/err.h). */
#ifndef CAIRN_RAFT_ERR_H
#define CAIRN_RAFT_ERR_H

/* Maps a raft return code (0 or RAFT_*) to 0 or a negative cairn code. */
int raft_err_to_cairn(int raft_rv);

#endif
