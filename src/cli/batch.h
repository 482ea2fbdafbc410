// batch.h — specdec batch: offline jobs, each line of a JSONL file a /v1/completions or /v1/chat/completions body,
// generated --parallel at a time in one batch (speculative/batch.h), each answered by the response object the server
// would send, in input order.
#ifndef SPECDEC_CLI_BATCH_H
#define SPECDEC_CLI_BATCH_H

#include "cli/args.h"

int cmd_batch(const Args *args, Err *err);

#endif
