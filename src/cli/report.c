// report.c — the --show marks, the --stats line and the --compare run (see report.h).
#include "cli/report.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "base/utf8.h"

// ---- the printer ---------------------------------------------------------------------------------------------

void printer_init(Printer *pr, FILE *out, const Tokenizer *tok, bool show, bool color, Err *err) {
    *pr = (Printer){.out = out, .tok = tok, .show = show, .color = color, .err = err};
    if (tok) token_stream_init(&pr->stream, tok);
}

void printer_free(Printer *pr) {
    if (pr->tok) token_stream_free(&pr->stream);
    free(pr->word);
    free(pr->rejections);
    free(pr->rejected);
}

const char *show_legend(bool color) {
    return color ? "specdec: --show: \x1b[32maccepted drafts\x1b[0m, \x1b[31;9mrejected drafts\x1b[0m, \x1b[34mthe "
                   "target's own tokens\x1b[0m (corrections, bonus tokens, plain decoding)"
                 : "specdec: --show: {+word+} holds a token of the target's own (a correction, a bonus token, plain "
                   "decoding), [-word-] is the word as a rejected draft had it; other words are accepted drafts";
}

static bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\f' || c == '\v'; }

// Appends bytes[0..n) to a growable buffer (kept NUL-terminated). Out of memory, the bytes are dropped: the
// printer only shows what was generated, and the ids are kept elsewhere.
static void append(char **buf, size_t *len, size_t *cap, const char *bytes, size_t n) {
    if (*len + n + 1 > *cap) {
        size_t want = (*len + n + 1) * 2;
        char *grown = realloc(*buf, want);
        if (!grown) return;
        *buf = grown, *cap = want;
    }
    memcpy(*buf + *len, bytes, n);
    *len += n;
    (*buf)[*len] = '\0';
}

// A rejected draft's bytes as one line of text: its ill-formed UTF-8 (a character split across tokens) as
// U+FFFD, whitespace other than spaces and control characters escaped (\n, \t, \r, \xHH).
static void append_escaped(char **buf, size_t *len, size_t *cap, const char *bytes, size_t n) {
    char *valid = malloc(3 * n + 1);
    size_t n_valid = 0;
    if (!valid) return;
    utf8_repair((const unsigned char *)bytes, n, true, valid, &n_valid);
    for (size_t i = 0; i < n_valid; i++) {
        unsigned char c = (unsigned char)valid[i];
        char esc[8];
        if (c == '\n' || c == '\t' || c == '\r')
            snprintf(esc, sizeof esc, "\\%c", c == '\n' ? 'n' : c == '\t' ? 't' : 'r');
        else if (c < 0x20 || c == 0x7f) snprintf(esc, sizeof esc, "\\x%02x", c);
        else esc[0] = (char)c, esc[1] = '\0';
        append(buf, len, cap, esc, strlen(esc));
    }
    free(valid);
}

// Plain marks: prints the word built so far, after the rejected drafts that went into it.
static void print_word(Printer *pr) {
    if (pr->rejections_len) fwrite(pr->rejections, 1, pr->rejections_len, pr->out);
    if (pr->word_len) {  // fwrite, not %s: a token may hold a NUL byte
        if (pr->word_marked) fputs("{+", pr->out);
        fwrite(pr->word, 1, pr->word_len, pr->out);
        if (pr->word_marked) fputs("+}", pr->out);
    }
    pr->word_len = pr->rejections_len = 0;
    pr->word_marked = false;
}

// Plain marks: the rejected draft held in pr->rejected becomes "[-word start + draft-]" before the current word.
static void add_rejection(Printer *pr, bool with_word_start) {
    append(&pr->rejections, &pr->rejections_len, &pr->rejections_cap, "[-", 2);
    if (with_word_start && pr->word_len)
        append(&pr->rejections, &pr->rejections_len, &pr->rejections_cap, pr->word, pr->word_len);
    append_escaped(&pr->rejections, &pr->rejections_len, &pr->rejections_cap, pr->rejected, pr->rejected_len);
    append(&pr->rejections, &pr->rejections_len, &pr->rejections_cap, "-]", 2);
    pr->word_marked = true;
    pr->rejected_len = 0;
    pr->rejected_waits_for_word = false;
}

// Plain marks: text of a token (marked: the target's), word by word; whitespace is printed as it comes.
static void add_text(Printer *pr, const char *text, size_t len, bool marked) {
    for (size_t i = 0; i < len; i++) {
        if (is_space(text[i])) {
            print_word(pr);
            fputc(text[i], pr->out);
            continue;
        }
        if (pr->rejected_waits_for_word) add_rejection(pr, false);
        append(&pr->word, &pr->word_len, &pr->word_cap, &text[i], 1);
        pr->word_marked |= marked;
    }
}

// Plain marks: a correction arrives after the rejected draft in pr->rejected. When both start a new word (both
// begin with whitespace, and the correction has a word), the draft is shown before that word, without its
// leading whitespace; otherwise before the current word, which the draft would have continued.
static void place_rejection(Printer *pr, const char *text, size_t len) {
    size_t lead = 0;
    while (lead < pr->rejected_len && is_space(pr->rejected[lead])) lead++;
    bool correction_has_word = false;
    for (size_t i = 0; i < len; i++) correction_has_word |= !is_space(text[i]);
    if (lead > 0 && len > 0 && is_space(text[0]) && correction_has_word) {
        if (lead < pr->rejected_len) {
            memmove(pr->rejected, pr->rejected + lead, pr->rejected_len - lead);
            pr->rejected_len -= lead;
        }
        pr->rejected_waits_for_word = true;
    } else {
        add_rejection(pr, true);
    }
}

static void print_token(Printer *pr, int id, TokenKind kind) {
    if (kind == TOKEN_REJECTED) {  // its raw bytes: a rejected token never joins the text's UTF-8 stream
        size_t len;
        const char *bytes = tokenizer_token(pr->tok, id, &len);
        if (pr->rejected_len && !pr->color) add_rejection(pr, true);  // a tree's rejected sibling before it
        pr->rejected_len = 0;
        append(&pr->rejected, &pr->rejected_len, &pr->rejected_cap, bytes, len);
        if (!pr->color) return;  // plain marks: placed when the correction comes
        char *shown = NULL;
        size_t shown_len = 0, shown_cap = 0;
        append_escaped(&shown, &shown_len, &shown_cap, bytes, len);
        if (shown) fprintf(pr->out, "\x1b[31;9m%s\x1b[0m", shown);
        free(shown);
        pr->rejected_len = 0;
        return;
    }
    const char *text;
    size_t len;
    if (token_stream_push(&pr->stream, id, &text, &len, pr->err)) return;
    if (pr->show && !pr->color) {
        if (pr->rejected_len) place_rejection(pr, text, len);
        add_text(pr, text, len, kind != TOKEN_ACCEPTED);
    } else if (pr->show) {
        fputs(kind == TOKEN_ACCEPTED ? "\x1b[32m" : "\x1b[34m", pr->out);
        fwrite(text, 1, len, pr->out);
        fputs("\x1b[0m", pr->out);
    } else if (len) {
        fwrite(text, 1, len, pr->out);
    }
}

static void flush(Printer *pr) {
    if (fflush(pr->out) != 0 && !pr->write_errno) pr->write_errno = errno ? errno : EIO;
}

void on_token(void *ctx, int id, TokenKind kind) {
    Printer *pr = ctx;
    if (kind == TOKEN_REJECTED && !pr->show) return;  // a rejected draft is never part of the output
    if (pr->tok) print_token(pr, id, kind);
    else if (kind != TOKEN_REJECTED) fprintf(pr->out, pr->printed++ ? " %d" : "%d", id);
    // A round ends with the target's token (a correction, a bonus token, or plain decoding's): the text streams
    // round by round.
    if (kind != TOKEN_ACCEPTED && kind != TOKEN_REJECTED) flush(pr);
}

int printer_finish(Printer *pr, const char *name, Err *err) {
    if (pr->tok) {
        const char *text;
        size_t len;
        token_stream_flush(&pr->stream, &text, &len);
        if (pr->show && !pr->color) {
            add_text(pr, text, len, false);
            if (pr->rejected_len) add_rejection(pr, false);
            print_word(pr);
        } else if (len) {
            fwrite(text, 1, len, pr->out);
        }
    }
    fputc('\n', pr->out);
    flush(pr);
    return pr->write_errno ? err_fmt(err, "%s: %s", name, strerror(pr->write_errno)) : 0;
}

// The text out's sink (ctx: a StopPrinter): the text printed and flushed, a newline after the last.
static void print_text(void *ctx, const char *text, size_t len, bool last) {
    StopPrinter *sp = ctx;
    fwrite(text, 1, len, sp->out);
    if (last) fputc('\n', sp->out);
    if (fflush(sp->out) != 0 && !sp->write_errno) sp->write_errno = errno ? errno : EIO;
}

int stop_printer_init(StopPrinter *sp, FILE *out, const Tokenizer *tok, const Repeated *stops, Err *err) {
    *sp = (StopPrinter){.out = out, .err = err};
    return text_out_init(&sp->text, tok, stops->items, stops->n, print_text, sp, err);
}

bool stop_printer_token(void *ctx, int id) {
    StopPrinter *sp = ctx;
    const char *piece;
    size_t n;
    bool stopped = false;
    if (text_out_token(&sp->text, id, &piece, &n, &stopped, sp->err)) {
        sp->failed = true;
        return true;
    }
    text_out_give(&sp->text, false);
    return stopped || sp->write_errno;  // a failed write ends the run, as generate's printer does
}

int stop_printer_finish(StopPrinter *sp, const char *name, Err *err) {
    const char *piece;
    size_t n;
    bool stopped;
    if (!sp->failed && text_out_end(&sp->text, &piece, &n, &stopped, sp->err)) sp->failed = true;
    text_out_give(&sp->text, true);
    if (sp->failed) {  // sp->err says why
        if (err != sp->err) *err = *sp->err;
        return -1;
    }
    return sp->write_errno ? err_fmt(err, "%s: %s", name, strerror(sp->write_errno)) : 0;
}

void stop_printer_free(StopPrinter *sp) { text_out_free(&sp->text); }

void print_session_fields(FILE *f, const Session *s) {
    fprintf(f, "\"isa\": \"%s\", \"threads\": %d, \"draft_threads\": %d, \"quant\": \"%s\", \"draft_quant\": \"%s\"",
            s->target.kernels->name, pool_size(s->pool), s->has_draft ? s->draft.max_threads : 0,
            quant_name(s->target.quant), s->has_draft ? quant_name(s->draft.quant) : "");
}

int print_stats(Session *s, bool drafting, const SpecStats *st, const int *prompt, int n_prompt, const int *out,
                int n_out, Err *err) {
    const int V = s->target.n_vocab, n_ctx = s->target.cfg.n_positions;
    int n_all = n_prompt + n_out < n_ctx ? n_prompt + n_out : n_ctx;
    int *all = malloc(sizeof(int) * (n_prompt + n_out));
    float *logits = malloc(sizeof(float) * V);
    KVCache cache = {0};
    int rc = -1;
    if (!all || !logits) {
        err_fmt(err, "out of memory");
        goto done;
    }
    memcpy(all, prompt, sizeof(int) * n_prompt);
    memcpy(all + n_prompt, out, sizeof(int) * n_out);
    if (model_kv_init(&s->target, &cache, err) || model_forward(&s->target, &cache, all, n_all, logits, false, err))
        goto done;
    double alpha = st->n_min_pq ? st->sum_min_pq / st->n_min_pq : 0;
    double c = st->target_t1_seconds > 0 ? st->draft_step_seconds / st->target_t1_seconds : 0;
    const double per_round = st->rounds ? 1e3 / st->rounds : 0;  // ms per round from a total in seconds
    double target_gbs = st->target_seconds > 0 ? (double)s->target.weight_bytes * st->rounds / st->target_seconds / 1e9 : 0;
    char predicted[32] = "null", theorem[32] = "null";
    if (drafting) {
        snprintf(predicted, sizeof predicted, "%.3f", st->predicted_speedup);
        snprintf(theorem, sizeof theorem, "%.3f",
                 s->has_draft ? spec_predicted_speedup(alpha, st->mean_gamma, c) : 1.0);
    }
    fprintf(stderr,
            "{\"prompt_tokens\": %d, \"prefill_ms\": %.2f, \"generated_tokens\": %d, \"tokens_per_s\": %.2f, \"ms_per_token\": %.3f, "
            "\"target_calls\": %d, \"draft_calls\": %d, \"drafted\": %d, \"accepted\": %d, \"acceptance_rate\": %.4f, "
            "\"tree_rounds\": %d, \"sibling_accepted\": %d, \"plain_rounds\": %d, \"lookup_rounds\": %d, "
            "\"lookup_drafted\": %d, \"lookup_accepted\": %d, \"draft_rows\": %d, "
            "\"mean_min_pq\": %.4f, \"tokens_per_target_call\": %.3f, \"mean_gamma\": %.2f, \"c\": %.4f, "
            "\"predicted_speedup\": %s, \"theorem_3_8_speedup\": %s, \"weights_GB_per_s\": %.2f, "
            "\"round_ms\": {\"draft\": %.4f, \"q_rows\": %.4f, \"verify\": %.4f, \"p_rows\": %.4f, \"accept\": %.4f, "
            "\"commit\": %.4f, \"rest\": %.4f}, "
            "\"pipelined\": %s, \"draft_own_core\": %s, \"ahead_rounds\": %d, \"ahead_discarded\": %d, "
            "\"ahead_extended\": %d, \"ahead_handoff_ms\": %.3f, ",
            n_prompt, st->prefill_seconds * 1e3, st->generated,
            st->decode_seconds > 0 ? st->generated / st->decode_seconds : 0,
            st->generated ? st->decode_seconds * 1e3 / st->generated : 0, st->rounds, st->draft_calls, st->drafted,
            st->accepted, st->drafted ? (double)st->accepted / st->drafted : 0, st->tree_rounds, st->sibling_accepted,
            st->plain_rounds, st->lookup_rounds, st->lookup_drafted, st->lookup_accepted, st->draft_rows,
            alpha,
            st->rounds ? (double)st->generated / st->rounds : 0, st->mean_gamma, c,
            predicted, theorem, target_gbs, per_round * (st->draft_seconds - st->q_seconds),
            per_round * st->q_seconds, per_round * st->target_seconds, per_round * st->p_seconds,
            per_round * st->accept_seconds, per_round * st->commit_seconds,
            per_round * (st->decode_seconds - st->draft_seconds - st->target_seconds - st->p_seconds -
                         st->accept_seconds - st->commit_seconds),
            st->pipelined ? "true" : "false", st->draft_own_core ? "true" : "false", st->ahead_rounds,
            st->ahead_discarded, st->ahead_extended, st->ahead_handoff_seconds * 1e3);
    print_session_fields(stderr, s);
    fprintf(stderr, ", \"logits_xxh64\": \"%016" PRIx64 "\"}\n", (uint64_t)XXH64(logits, sizeof(float) * V, 0));
    rc = 0;
done:
    kv_free(&cache);
    free(all);
    free(logits);
    return rc;
}

int compare_with_target_only(Session *s, int max_tokens, const SpecParams *params,
                             const SpecStats *spec, const int *prompt, int n_prompt, const int *out, int n_out,
                             Err *err) {
    SpecParams quiet = *params;
    quiet.on_token = NULL;
    quiet.trace = NULL;
    SpecStats plain;
    int *plain_out = malloc(sizeof(int) * (max_tokens + 1)), n_plain;
    if (!plain_out) return err_fmt(err, "out of memory");
    if (speculative_generate(&s->target, NULL, prompt, n_prompt, &quiet, plain_out, &n_plain, &plain, err)) {
        free(plain_out);
        return -1;
    }
    double spec_rate = spec->generated / spec->decode_seconds, plain_rate = plain.generated / plain.decode_seconds;
    // The prediction with target-only's measured step as t_target(1) (see SpecStats.predicted_speedup).
    double forwards = spec->target_seconds + spec->draft_seconds;
    double predicted = forwards > 0 ? spec->expected_tokens / plain_rate / forwards : 1.0;
    fprintf(stderr, "{\"speculative_tokens_per_s\": %.2f, \"target_only_tokens_per_s\": %.2f, "
                    "\"measured_speedup\": %.3f, \"predicted_speedup\": %.3f, \"measured_over_predicted\": %.3f, "
                    "\"same_output\": %s}\n",
            spec_rate, plain_rate, spec_rate / plain_rate, predicted, spec_rate / plain_rate / predicted,
            n_plain == n_out && memcmp(plain_out, out, sizeof(int) * n_out) == 0 ? "true" : "false");
    free(plain_out);
    return 0;
}

