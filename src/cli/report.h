// report.h — what generate prints besides the text's plain stream: the --show marks, the --stats line and the
// --compare run.
#ifndef SPECDEC_CLI_REPORT_H
#define SPECDEC_CLI_REPORT_H

#include <stdbool.h>

#include "cli/session.h"
#include "speculative/speculative.h"

// Prints tokens as they are decided: text through the streaming decoder (or ids), and with --show the kind of
// each token: accepted drafts in green, rejected drafts in red and struck through, the target's own tokens in
// blue (the paper's Figure 1); plain marks [-rejected-] and {+target+} when stdout is no terminal or NO_COLOR is
// set.
typedef struct {
    const Tokenizer *tok;   // NULL: print ids
    TokenStream stream;
    bool show, color;
    int printed;
    Err *err;
} Printer;

// The scheduler's on_token callback (ctx: a Printer).
void on_token(void *ctx, int id, TokenKind kind);

// The --stats line: one JSON object on stderr. The fingerprint of the final logits comes from a forward over the
// whole text, so that runs with other kernels, threads or draft lengths compare at a glance.
int print_stats(Session *s, const SpecStats *st, const int *prompt, int n_prompt, const int *out, int n_out,
                Err *err);

// --compare: the same prompt and settings decoded by the target alone; prints both speeds, the speedup Theorem
// 3.8 predicts from the measured α and c, and whether the outputs are the same (they must be when greedy).
int compare_with_target_only(Session *s, uint64_t seed, int max_tokens, const SpecParams *params,
                             const SpecStats *spec, const int *prompt, int n_prompt, const int *out, int n_out,
                             Err *err);

#endif
