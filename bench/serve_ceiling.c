// serve_ceiling.c — how far many clients can go: the most aggregate tokens/s that any γ schedule could reach for
// N greedy clients decoding with the draft in one batch (batch.h), against one client, from measured costs and
// the measured acceptance. The serve suite prints it beside the concurrency sweep's "× one client".
//
// A batched round of N sequences drafting γ_1..γ_N levels (0: a plain round) costs and gives
//   time   = Σ_{l=1..max γ_i} d(n_l) + t(Σ_i (γ_i + 1))   n_l = #{i : γ_i ≥ l}: each level's draft forward
//                                                         serves every sequence that drafts it (draft_together)
//   tokens = Σ_i E(γ_i),  E(γ) = 1 + a_1 + a_1 a_2 + … + a_1 ⋯ a_γ                (spec_expected_tokens_by_level)
// with t(R) the target's forward over R rows and d(R) the draft's (each one sequence's rows after CEILING_CONTEXT
// cached positions, the least of CEILING_REPS_PER_REP × --reps calls: the cost without other tenants), and a_l
// the acceptance of level l measured by greedy decoding with the draft at γ = GAMMA_MAX (the rounds that kept
// level l over those that reached it). The best decoding rate of N sequences is the best tokens / time over every
// vector γ_1 ≤ … ≤ γ_N whose rows fit in CEILING_ROWS (the measured range). A request is its prompt's prefill,
// then its decoding: one client's prefill as the server runs it alone, N clients' at the least it could cost in a
// batch (with_prefill). Left out, on both sides: sampling, the accept steps, the server's work — so the ratio
// bounds what batching can buy, not what a run reaches.
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "speculative/batch.h"
#include "speculative/speculative.h"

enum { CEILING_CONTEXT = 128, CEILING_ROWS = 32, CEILING_DRAFT_ROWS = 8, CEILING_REPS_PER_REP = 3 };

// The measured costs and acceptance a schedule is priced with.
typedef struct {
    double target[CEILING_ROWS + 1];            // t(R), seconds: [1..CEILING_ROWS]
    double draft[CEILING_DRAFT_ROWS + 1];       // d(R), seconds: [1..CEILING_DRAFT_ROWS], d(0) = 0
    double accept[GAMMA_MAX + 1];               // a_l: [1..GAMMA_MAX]
} Costs;

// One forward of `rows` tokens on a workload (its cache cut back to its context first): a Trial.
typedef struct {
    Workload *w;
    int rows;
    float *logits;          // [CEILING_ROWS, V]
} RowsForward;

static double rows_forward_run(void *ctx, int rep) {
    (void)rep;
    RowsForward *f = ctx;
    int tokens[CEILING_ROWS];
    pattern_tokens(tokens, f->rows, f->w->context, f->w->model->n_vocab);
    kv_truncate(&f->w->cache, f->w->context);
    Err err;
    const double t0 = now_seconds();
    if (model_forward(f->w->model, &f->w->cache, tokens, f->rows, f->logits, true, &err)) die("%s", err.msg);
    return now_seconds() - t0;
}

// t(1..CEILING_ROWS) and d(1..CEILING_DRAFT_ROWS): each the least of its calls, one a round, measured against each
// other.
static void measure_forwards(Bench *b, Pair *pair, Costs *c) {
    enum { K = CEILING_ROWS + CEILING_DRAFT_ROWS };
    const int reps = CEILING_REPS_PER_REP * b->opt.reps;
    Workload target, draft;
    workload_init(&target, &pair->target, CEILING_CONTEXT);
    workload_init(&draft, &pair->draft, CEILING_CONTEXT);
    const int V = pair->target.n_vocab > pair->draft.n_vocab ? pair->target.n_vocab : pair->draft.n_vocab;
    float *logits = malloc(sizeof(float) * CEILING_ROWS * V);
    RowsForward forwards[K];
    Trial trials[K];
    for (int i = 0; i < K; i++) {
        forwards[i] = i < CEILING_ROWS ? (RowsForward){&target, i + 1, logits}
                                       : (RowsForward){&draft, i - CEILING_ROWS + 1, logits};
        trials[i] = (Trial){rows_forward_run, &forwards[i]};
    }
    double *seconds = malloc(sizeof(double) * K * reps);
    measure_rounds(b, "the ceiling's forwards", trials, K, reps, 0, seconds);
    for (int i = 0; i < K; i++) {
        const double least = summarize(seconds + (size_t)i * reps, reps).min;
        if (i < CEILING_ROWS) c->target[i + 1] = least;
        else c->draft[i - CEILING_ROWS + 1] = least;
    }
    c->draft[0] = 0;
    free(seconds);
    free(logits);
    workload_free(&target);
    workload_free(&draft);
}

// a_1..a_GAMMA_MAX: greedy decoding of every prompt with the draft at γ = GAMMA_MAX, each level's rounds that kept it
// over those that reached it (0 where none reached it).
static void measure_acceptance(Pair *pair, const Prompt *prompts, int n, int tokens, Costs *c) {
    long reached[GAMMA_MAX + 1] = {0}, kept[GAMMA_MAX + 1] = {0};
    int *out = malloc(sizeof(int) * tokens);
    for (int i = 0; i < n; i++) {
        const SpecParams params = {.sampling = {0, 0, 1.0f}, .policy = GAMMA_FIXED, .gamma = GAMMA_MAX,
                                   .max_tokens = tokens, .eos_id = pair->target.cfg.eos_token_id};
        Drafters drafters;
        SpecStats stats;
        Err err;
        int n_out;
        if (drafter_open(&drafters, DRAFTER_MODEL, &pair->draft, &params, 0, LOOKUP_STAGED_MIN_MATCH, &err) ||
            speculative_generate(&pair->target, drafters.drafter, prompts[i].ids, prompts[i].n, &params, out, &n_out,
                                 &stats, &err))
            die("the ceiling's acceptance, prompt %s: %s", prompts[i].id, err.msg);
        drafter_close(&drafters);
        for (int l = 1; l <= GAMMA_MAX; l++) reached[l] += stats.level_reached[l], kept[l] += stats.level_kept[l];
    }
    for (int l = 1; l <= GAMMA_MAX; l++) c->accept[l] = reached[l] ? (double)kept[l] / reached[l] : 0;
    free(out);
}

// A schedule being priced: the depths of its sequences, nondecreasing.
typedef struct {
    int n;                      // sequences
    int gamma[CEILING_ROWS];    // [n]
} Schedule;

// Its tokens per second under the costs (the model above).
static double schedule_rate(const Costs *c, const Schedule *s) {
    double tokens = 0, seconds = 0;
    int rows = 0;
    for (int i = 0; i < s->n; i++) {
        tokens += spec_expected_tokens_by_level(c->accept, s->gamma[i]);
        rows += s->gamma[i] + 1;
    }
    for (int level = 1; level <= s->gamma[s->n - 1]; level++) {
        int drafting = 0;  // sequences that draft this level
        for (int i = 0; i < s->n; i++) drafting += s->gamma[i] >= level;
        seconds += c->draft[drafting];
    }
    return tokens / (seconds + c->target[rows]);
}

// The best schedule whose first `at` depths are s's: each depth from the one before it up to GAMMA_MAX, while the
// rows (every later sequence at least as deep) fit in CEILING_ROWS. *best holds the best so far, *best_rate its rate.
static void search(const Costs *c, Schedule *s, int at, Schedule *best, double *best_rate) {
    if (at == s->n) {
        const double rate = schedule_rate(c, s);
        if (rate > *best_rate) *best_rate = rate, *best = *s;
        return;
    }
    int rows = 0;
    for (int i = 0; i < at; i++) rows += s->gamma[i] + 1;
    for (int g = at ? s->gamma[at - 1] : 0; g <= GAMMA_MAX && rows + (s->n - at) * (g + 1) <= CEILING_ROWS; g++) {
        s->gamma[at] = g;
        search(c, s, at + 1, best, best_rate);
    }
}

// The best schedule of n sequences, *rate its tokens per second (n ≤ CEILING_DRAFT_ROWS: each level's draft forward
// carries at most n rows).
static Schedule best_schedule(const Costs *c, int n, double *rate) {
    Schedule s = {.n = n}, best = {.n = n};
    *rate = 0;
    search(c, &s, 0, &best, rate);
    return best;
}

// Its mean depth, and the share of its drafts expected kept: Σ (E(γ_i) − 1) / Σ γ_i (0 where none drafts).
static CeilingSchedule schedule_depths(const Costs *c, const Schedule *s) {
    double drafts = 0, kept = 0;
    for (int i = 0; i < s->n; i++) {
        drafts += s->gamma[i];
        kept += spec_expected_tokens_by_level(c->accept, s->gamma[i]) - 1;
    }
    return (CeilingSchedule){drafts / s->n, drafts > 0 ? kept / drafts : 0};
}

static const char *fmt_gammas(char *buf, size_t size, const Schedule *s) {
    size_t at = 0;
    for (int i = 0; i < s->n && at < size; i++)
        at += (size_t)snprintf(buf + at, size - at, i ? ", %d" : "%d", s->gamma[i]);
    return buf;
}

// A request's prefill, on average over the prompts: alone, as the server runs one client's — the target's forwards
// over the prompt but its newest token in chunks of BATCH_PREFILL_CHUNK (batch.c), each prompt's the least of
// CEILING_REPS_PER_REP × --reps calls — and the draft's forward over the same tokens (a drafter's prefill, one
// sequence at a time in a batch too); and of the target's, its arithmetic alone: less one weight stream, t(1), per
// chunk — what its rows cost at least beside other sequences' rows, in steps that stream the weights anyway.
typedef struct {
    double target_alone, target_arithmetic, draft, rows;
} Prefill;

// The least seconds of `reps` prefills of p's tokens but its newest on m, in forwards of `chunk` tokens.
static double least_prefill(Model *m, KVCache *cache, const Prompt *p, int chunk, int reps, float *logits) {
    double least = 0;
    for (int r = 0; r < reps; r++) {
        Err err;
        kv_truncate(cache, 0);
        const double t0 = now_seconds();
        for (int at = 0; at < p->n - 1; at += chunk) {
            const int T = p->n - 1 - at < chunk ? p->n - 1 - at : chunk;
            if (model_forward(m, cache, p->ids + at, T, logits, false, &err)) die("%s", err.msg);
        }
        const double seconds = now_seconds() - t0;
        least = r == 0 || seconds < least ? seconds : least;
    }
    return least;
}

static Prefill measure_prefill(Bench *b, Pair *pair, const Costs *c, const Prompt *prompts, int n) {
    Prefill mean = {0};
    KVCache caches[2];
    Err err;
    const int V = pair->target.n_vocab > pair->draft.n_vocab ? pair->target.n_vocab : pair->draft.n_vocab;
    float *logits = malloc(sizeof(float) * V);
    if (!logits || model_kv_init(&pair->target, &caches[0], &err) || model_kv_init(&pair->draft, &caches[1], &err))
        die("the ceiling's prefill: out of memory");
    const int reps = CEILING_REPS_PER_REP * b->opt.reps;
    for (int i = 0; i < n; i++) {
        progress_show(&b->progress, "the ceiling's prefill", (double)i / n);
        const Prompt *p = &prompts[i];
        const double alone = least_prefill(&pair->target, &caches[0], p, BATCH_PREFILL_CHUNK, reps, logits);
        const double arithmetic = alone - (p->n - 1 + BATCH_PREFILL_CHUNK - 1) / BATCH_PREFILL_CHUNK * c->target[1];
        mean.target_alone += alone / n;
        mean.target_arithmetic += (arithmetic > 0 ? arithmetic : 0) / n;
        mean.draft += least_prefill(&pair->draft, &caches[1], p, p->n, reps, logits) / n;
        mean.rows += (double)(p->n - 1) / n;
    }
    kv_free(&caches[0]);
    kv_free(&caches[1]);
    free(logits);
    return mean;
}

// Requests of `tokens` tokens: N clients' aggregate over one client's, each request its prefill and then its
// decoding — one client's prefill alone, N clients' target prefill at its arithmetic alone, the draft's prefill the
// same on both sides — given the decoding rates of one and of N sequences (tokens/s).
static double with_prefill(const Prefill *p, int tokens, int clients, double rate_one, double rate_n) {
    const double alone = p->target_alone + p->draft + tokens / rate_one;
    return alone / ((clients > 1 ? p->target_arithmetic : p->target_alone) + p->draft + tokens / rate_n);
}

json_t *serve_ceiling(Bench *b, Pair *pair, const Prompt *prompts, int n, const int *clients, int n_counts,
                      const int *lengths, int n_lengths, double *ceiling, CeilingSchedule *best) {
    Costs c;
    measure_forwards(b, pair, &c);
    measure_acceptance(pair, prompts, n, b->opt.tokens, &c);
    const Prefill prefill = measure_prefill(b, pair, &c, prompts, n);
    out(b, "\n## How far many clients can go\n\nThe target's forward over T rows of one sequence (cache of %d "
        "positions), t(T), and per row, t(T) / T, as a ratio to one row's; the draft's, d(T); each the least of %d "
        "calls, one a round\n\n| T | t(T), ms | t(T) / (T · t(1)) | d(T), ms |\n|---:|---:|---:|---:|\n",
        CEILING_CONTEXT, CEILING_REPS_PER_REP * b->opt.reps);
    json_t *forward = json_array(), *draft = json_array(), *accept = json_array(), *rows = json_array();
    for (int T = 1; T <= CEILING_ROWS; T++) {
        char d[32] = "";
        if (T <= CEILING_DRAFT_ROWS) snprintf(d, sizeof d, "%.3f", c.draft[T] * 1e3);
        out(b, "| %d | %.3f | %.3f | %s |\n", T, c.target[T] * 1e3, c.target[T] / (T * c.target[1]), d);
        json_array_append_new(forward, json_real(c.target[T]));
        if (T <= CEILING_DRAFT_ROWS) json_array_append_new(draft, json_real(c.draft[T]));
    }
    out(b, "\nAcceptance by level, greedy with the draft at γ = %d (%d prompts, %d tokens each): a_1..a_%d =",
        GAMMA_MAX, n, b->opt.tokens, GAMMA_MAX);
    for (int l = 1; l <= GAMMA_MAX; l++) {
        out(b, " %.2f", c.accept[l]);
        json_array_append_new(accept, json_real(c.accept[l]));
    }
    out(b, "\n\nA prompt's prefill (%.0f tokens on average): alone, the target's in chunks of %d, %.2f ms — its "
        "arithmetic, less t(1) a chunk, %.2f ms: what it costs at least in a batch — and the draft's, %.2f ms.\n\n"
        "The best schedule of depths for N sequences in one batch (each level's draft forward serving every "
        "sequence that drafts it, one target forward over all rows, rows ≤ %d) priced with these costs, against one "
        "sequence's best: the ceiling of the sweep's \"× one client\" — decoding alone, and requests of each length "
        "with their prefill (plain: N / t(N) against 1 / t(1)). Sampling, the accept steps and the server left out\n\n"
        "| clients | draft | best γ of each | decoding tokens/s | × one client, decoding |",
        prefill.rows, BATCH_PREFILL_CHUNK, prefill.target_alone * 1e3, prefill.target_arithmetic * 1e3,
        prefill.draft * 1e3, CEILING_ROWS);
    for (int l = 0; l < n_lengths; l++) out(b, " × one client, %d tokens a request |", lengths[l]);
    out(b, "\n|---:|---|---|---:|---:|");
    for (int l = 0; l < n_lengths; l++) out(b, "---:|");
    out(b, "\n");
    double one;
    best_schedule(&c, 1, &one);
    Prefill plain_prefill = prefill;
    plain_prefill.draft = 0;  // (no draft: no draft prefill)
    for (int k = 0; k < n_counts; k++)
        for (int drafting = 1; drafting >= 0; drafting--) {
            double rate = clients[k] / c.target[clients[k]];
            Schedule s = {.n = clients[k]};  // plain: every depth 0
            if (drafting) {
                s = best_schedule(&c, clients[k], &rate);
                best[k] = schedule_depths(&c, &s);
            }
            const double rate_one = drafting ? one : 1 / c.target[1];
            char g[128];
            out(b, "| %d | %s | %s | %.0f | %.2f |", clients[k], drafting ? "yes" : "no",
                fmt_gammas(g, sizeof g, &s), rate, rate / rate_one);
            json_t *gammas = json_array(), *over = json_array();
            for (int i = 0; i < s.n; i++) json_array_append_new(gammas, json_integer(s.gamma[i]));
            for (int l = 0; l < n_lengths; l++) {
                double *at = &ceiling[(l * 2 + drafting) * n_counts + k];
                *at = with_prefill(drafting ? &prefill : &plain_prefill, lengths[l], clients[k], rate_one, rate);
                out(b, " %.2f |", *at);
                json_array_append_new(over, json_pack("{s:i, s:f}", "tokens", lengths[l], "over_one_client", *at));
            }
            out(b, "\n");
            json_array_append_new(rows, json_pack("{s:i, s:b, s:o, s:f, s:f, s:o}", "clients", clients[k], "draft",
                                                  drafting, "gammas", gammas, "tokens_per_s", rate,
                                                  "decoding_over_one_client", rate / rate_one, "requests", over));
        }
    return json_pack("{s:o, s:o, s:o, s:f, s:f, s:f, s:f, s:o}", "target_forward_s", forward, "draft_forward_s",
                     draft, "level_acceptance", accept, "prefill_alone_s", prefill.target_alone,
                     "prefill_arithmetic_s", prefill.target_arithmetic, "draft_prefill_s", prefill.draft,
                     "prompt_rows", prefill.rows, "schedules", rows);
}
