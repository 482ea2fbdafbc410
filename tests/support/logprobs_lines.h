// logprobs_lines.h — `specdec generate --logprobs K`'s lines (one JSON object per generated token) read back, and
// checked against `specdec logits`: the CLI's tests (tests/cli/test_logprobs_cli.c) and the server's
// (tests/serve/test_server.c), whose responses must carry the same values. A failure is a test failure (CHECK).
#ifndef SPECDEC_LOGPROBS_LINES_H
#define SPECDEC_LOGPROBS_LINES_H

#include <jansson.h>

// The lines of text (JSONL) as a JSON array of their objects; NULL (and a failure) if a line is not JSON.
json_t *logprobs_lines_read(const char *text);

// Checks each line i — {"i", "kind", "id", "token", "logprob", "bytes", "top_logprobs": [{"id", "logprob", …}]} —
// against the log-softmax of the logits `specdec logits -m model_dir --all` prints for prompt_ids (the prompt's ids,
// space-separated) and the lines' ids before it: its logprob and its alternatives' to the printed precision of the
// logits (%.7g), the alternatives the k largest in order. Adds each line's kind to kinds ("accepted", "resampled",
// "bonus", "target": counts [4] in that order).
void logprobs_lines_check(const json_t *lines, const char *model_dir, const char *prompt_ids, int kinds[4]);

#endif
