// report.c — the --show marks, the --stats line and the --compare run (see report.h).
#include "cli/report.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

static void print_text(Printer *pr, int id) {
    const char *text;
    size_t len;
    if (token_stream_push(&pr->stream, id, &text, &len, pr->err) == 0) fwrite(text, 1, len, stdout);
}

void on_token(void *ctx, int id, TokenKind kind) {
    Printer *pr = ctx;
    if (kind == TOKEN_REJECTED && !pr->show) return;  // a rejected draft is never part of the output
    if (!pr->tok) {
        if (kind != TOKEN_REJECTED) printf(pr->printed++ ? " %d" : "%d", id);
        fflush(stdout);
        return;
    }
    static const char *const colour[] = {[TOKEN_ACCEPTED] = "\x1b[32m", [TOKEN_REJECTED] = "\x1b[31;9m",
                                         [TOKEN_RESAMPLED] = "\x1b[34m", [TOKEN_BONUS] = "\x1b[34m",
                                         [TOKEN_TARGET] = "\x1b[34m"};
    const char *open = "", *close = "";
    if (pr->show && pr->color) {
        open = colour[kind];
        close = "\x1b[0m";
    } else if (pr->show && kind != TOKEN_ACCEPTED) {
        open = kind == TOKEN_REJECTED ? "[-" : "{+";
        close = kind == TOKEN_REJECTED ? "-]" : "+}";
    }
    fputs(open, stdout);
    if (kind == TOKEN_REJECTED) {  // its raw bytes: a rejected token never joins the text's UTF-8 stream
        size_t len;
        const char *bytes = tokenizer_token(pr->tok, id, &len);
        fwrite(bytes, 1, len, stdout);
    } else {
        print_text(pr, id);
    }
    fputs(close, stdout);
    fflush(stdout);
}

int print_stats(Session *s, const SpecStats *st, const int *prompt, int n_prompt, const int *out, int n_out,
                Err *err) {
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
    double target_gbs = st->target_seconds > 0 ? (double)s->target.weight_bytes * st->rounds / st->target_seconds / 1e9 : 0;
    fprintf(stderr,
            "{\"prompt_tokens\": %d, \"prefill_ms\": %.2f, \"generated_tokens\": %d, \"tokens_per_s\": %.2f, \"ms_per_token\": %.3f, "
            "\"target_calls\": %d, \"draft_calls\": %d, \"drafted\": %d, \"accepted\": %d, \"acceptance_rate\": %.4f, "
            "\"mean_min_pq\": %.4f, \"tokens_per_target_call\": %.3f, \"mean_gamma\": %.2f, \"c\": %.4f, "
            "\"predicted_speedup\": %.3f, \"theorem_3_8_speedup\": %.3f, \"weights_GB_per_s\": %.2f, "
            "\"isa\": \"%s\", \"threads\": %d, "
            "\"logits_xxh64\": \"%016" PRIx64 "\"}\n",
            n_prompt, st->prefill_seconds * 1e3, st->generated,
            st->decode_seconds > 0 ? st->generated / st->decode_seconds : 0,
            st->generated ? st->decode_seconds * 1e3 / st->generated : 0, st->rounds, st->draft_calls, st->drafted,
            st->accepted, st->drafted ? (double)st->accepted / st->drafted : 0, alpha,
            st->rounds ? (double)st->generated / st->rounds : 0, st->mean_gamma, c,
            st->predicted_speedup, s->has_draft ? spec_predicted_speedup(alpha, st->mean_gamma, c) : 1.0, target_gbs,
            s->target.kernels->name, pool_size(s->pool), (uint64_t)XXH64(logits, sizeof(float) * V, 0));
    rc = 0;
done:
    kv_free(&cache);
    free(all);
    free(logits);
    return rc;
}

int compare_with_target_only(Session *s, uint64_t seed, int max_tokens, const SpecParams *params,
                             const SpecStats *spec, const int *prompt, int n_prompt, const int *out, int n_out,
                             Err *err) {
    SpecParams quiet = *params;
    quiet.on_token = NULL;
    quiet.trace = NULL;
    Rng rng;
    rng_seed(&rng, seed);
    SpecStats plain;
    int *plain_out = malloc(sizeof(int) * (max_tokens + 1)), n_plain;
    if (!plain_out) return err_fmt(err, "out of memory");
    if (speculative_generate(&s->target, NULL, prompt, n_prompt, &quiet, &rng, plain_out, &n_plain, &plain, err)) {
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

