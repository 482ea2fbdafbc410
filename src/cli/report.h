// report.h — what generate prints besides the text's plain stream: the --show marks, the --stats line and the
// --compare run.
#ifndef SPECDEC_CLI_REPORT_H
#define SPECDEC_CLI_REPORT_H

#include <stdbool.h>

#include "chat/text_out.h"
#include "cli/session.h"
#include "speculative/speculative.h"

// Prints tokens as they are decided: text through the streaming decoder (or ids), and with --show the kind of
// each token (the paper's Figure 1). Output is flushed at the end of each round (after the target's token), so
// the text streams as rounds are accepted.
//
// --show on a terminal (NO_COLOR unset): each token coloured, accepted drafts green, rejected drafts red and
// struck through, the target's own tokens blue. Otherwise plain marks in whole words, as `git diff --word-diff`
// prints them, so that no mark cuts a word: a word (a run of non-whitespace) that holds a byte of a target token
// is printed {+word+}, and a rejected draft [-word-] just before the word its correction went into, as the text
// would have read with the draft: the word's start, then the draft's text (whitespace in it written \n, \t, …).
// A rejected draft that, like its correction, starts a new word shows without its leading whitespace. So
// `for i in` + rejected " range" + the target's " base" prints `for i in [-range-]{+base+}`, and `enum` +
// rejected "era" + the target's "erate" prints `[-enumera-]{+enumerate+}`. A word is printed once whitespace
// ends it, so the last word of a round may wait for the next round. A tree's rejected siblings come one after
// another, each a mark of its own: `[-range-][-len-]{+base+}`; a word holding a kept sibling after rejected ones
// is marked too.
typedef struct {
    FILE *out;
    const Tokenizer *tok;   // NULL: print ids
    TokenStream stream;
    bool show, color;
    int printed;            // ids printed
    int write_errno;        // errno of the first flush of `out` that failed (0: none so far)
    Err *err;
    // Plain marks (show && !color): the word being built, the [-...-] marks to print before it, whether it is
    // marked, and a rejected draft waiting for its correction (or, when both start a new word, for that word).
    char *word, *rejections, *rejected;
    size_t word_len, rejections_len, rejected_len, word_cap, rejections_cap, rejected_cap;
    bool word_marked, rejected_waits_for_word;
} Printer;

void printer_init(Printer *pr, FILE *out, const Tokenizer *tok, bool show, bool color, Err *err);

// The scheduler's on_token callback (ctx: a Printer).
void on_token(void *ctx, int id, TokenKind kind);

// At the end of generation: the held text and the last word, a newline, and a flush; then, if a flush failed (a
// full disk), an error naming the stream (`name`: "stdout") and the failure.
int printer_finish(Printer *pr, const char *name, Err *err);
void printer_free(Printer *pr);

// Printing with stop strings (--stop): the scheduler's stop hook (SpecParams.stop) gives each committed token's text
// out (chat/text_out.h: decoded, scanned for the strings, printed where no stop string can start in it); the first
// one ends generation after the token in which it completes, and neither it nor anything after it is printed.
// --show's marks are not printed with it.
typedef struct {
    TextOut text;       // text.scan.text[0..text.scan.len): the text printed
    FILE *out;
    Err *err;
    bool failed;        // err holds why (out of memory): generation was stopped
    int write_errno;    // errno of the first flush of `out` that failed (0: none so far): generation was stopped
} StopPrinter;

int stop_printer_init(StopPrinter *sp, FILE *out, const Tokenizer *tok, const Repeated *stops, Err *err);

// The scheduler's stop hook (ctx: a StopPrinter).
bool stop_printer_token(void *ctx, int id);

// At the end of generation: the text held back (no stop string came), a newline, and a flush; then -1 with err if
// the scan failed (out of memory) or a write did (naming the stream `name`), as printer_finish.
int stop_printer_finish(StopPrinter *sp, const char *name, Err *err);
void stop_printer_free(StopPrinter *sp);

// The one-line legend of the --show marks (without a newline).
const char *show_legend(bool color);

// What a --stats line says of the run's set-up, as JSON fields without braces: the kernel variant ("isa"), the
// threads of the target and the draft, and how each holds its matrices ("quant", "draft_quant"; "" without a draft).
void print_session_fields(FILE *f, const Session *s);

// The --stats line: one JSON object on stderr. The fingerprint of the final logits comes from a forward over the
// whole text, so that runs with other kernels, threads or draft lengths compare at a glance. Without drafting
// (`drafting` false: neither a draft model nor --lookup) the predicted speed-ups are null: there is none to predict.
int print_stats(Session *s, bool drafting, const SpecStats *st, const int *prompt, int n_prompt, const int *out,
                int n_out,
                Err *err);

// --compare: the same prompt and settings decoded by the target alone; prints both speeds, the speedup Theorem
// 3.8 predicts from the measured α and c, and whether the outputs are the same (they must be when greedy, and with
// --sampler coupled at any temperature).
int compare_with_target_only(Session *s, int max_tokens, const SpecParams *params,
                             const SpecStats *spec, const int *prompt, int n_prompt, const int *out, int n_out,
                             Err *err);

#endif
