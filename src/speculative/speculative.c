// speculative.c — the speculative decoding scheduler: Algorithm 1 of Leviathan et al. (2023), a draft-length
// policy, and statistics. See speculative.h for the contract.
#include "speculative/speculative.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"

// ---- the model drafter --------------------------------------------------------------------------------------

// Drafts x_1..x_k one token at a time: q_i = adjust(draft logits), x_i ~ q_i. The first forward feeds every
// committed token the draft has not seen yet (the whole prompt at first; after a fully accepted round, x_γ and
// the bonus token); x_k itself is never fed, since the next round may not keep it.
static int model_propose(Drafter *self, const int *context, int n, int gamma, int *draft, double *q, Err *err) {
    ModelDrafter *d = (ModelDrafter *)self;
    const int V = d->model->n_vocab, n_ctx = d->model->cfg.n_positions;
    const int *feed = context + d->cache.len;
    int n_feed = n - d->cache.len, k = 0;
    for (; k < gamma && d->cache.len + n_feed <= n_ctx; k++) {
        if (model_forward(d->model, &d->cache, feed, n_feed, d->logits, false, err)) return -1;
        self->calls++;
        if (d->p_min > 0 && sampling_top_probability(d->logits, V) < d->p_min) break;  // the draft is unsure
        double *q_k = q + (size_t)k * V;
        if (sampling_adjust(q_k, d->logits, V, &d->sampling))
            return err_fmt(err, "the draft model produced a NaN or infinite logit at position %d", d->cache.len - 1);
        draft[k] = sampling_draw(q_k, V, rng_uniform(d->rng));
        feed = &draft[k];
        n_feed = 1;
    }
    return k;
}

static int model_prefill(Drafter *self, const int *context, int n, Err *err) {
    ModelDrafter *d = (ModelDrafter *)self;
    if (n <= d->cache.len) return 0;
    return model_forward(d->model, &d->cache, context + d->cache.len, n - d->cache.len, d->logits, false, err);
}

static void model_rollback(Drafter *self, int n) {
    ModelDrafter *d = (ModelDrafter *)self;
    if (d->cache.len > n) kv_truncate(&d->cache, n);
}

int model_drafter_init(ModelDrafter *d, Model *draft, const SamplingParams *sampling, Rng *rng, float p_min,
                       Err *err) {
    *d = (ModelDrafter){.base = {.prefill = model_prefill, .propose = model_propose, .rollback = model_rollback},
                        .model = draft, .sampling = *sampling, .rng = rng, .p_min = p_min};
    d->logits = malloc(sizeof(float) * draft->n_vocab);
    if (!d->logits) return err_fmt(err, "out of memory for the draft's logits");
    return model_kv_init(draft, &d->cache, err);
}

void model_drafter_free(ModelDrafter *d) {
    kv_free(&d->cache);
    free(d->logits);
    d->logits = NULL;
}

// ---- the accept / resample step -----------------------------------------------------------------------------

double spec_accept_probability(double p_x, double q_x) { return q_x <= p_x ? 1.0 : p_x / q_x; }

double spec_residual(double *residual, const double *p, const double *q, int V) {
    double mass = 0.0;
    for (int i = 0; i < V; i++) mass += residual[i] = p[i] > q[i] ? p[i] - q[i] : 0.0;
    if (mass > 0.0)
        for (int i = 0; i < V; i++) residual[i] /= mass;
    else
        memcpy(residual, p, sizeof(double) * V);
    return mass;
}

// Σ_x min(p(x), q(x)): the probability that a draft from q is accepted, β in the paper (its mean is α).
// Lane j sums x ≡ j (mod 4): four dependency chains in flight instead of one.
static double overlap(const double *p, const double *q, int V) {
    double part[4] = {0};
    for (int x = 0; x < V; x++) part[x % 4] += p[x] < q[x] ? p[x] : q[x];
    return (part[0] + part[2]) + (part[1] + part[3]);
}

double spec_expected_tokens(double alpha, double gamma) {
    return alpha < 1.0 ? (1.0 - pow(alpha, gamma + 1)) / (1.0 - alpha) : gamma + 1;
}

double spec_predicted_speedup(double alpha, double gamma, double c) {
    return spec_expected_tokens(alpha, gamma) / (gamma * c + 1.0);
}

// ---- the draft-length policy --------------------------------------------------------------------------------
//
// GAMMA_AUTO picks the γ that maximises expected tokens per second, the measured-cost form of Theorem 3.8:
//   rate(γ) = E[tokens per round] / E[round time] = ((1 − α^{γ+1}) / (1 − α)) / (γ · t_draft + t_target(γ + 1))
// where α is a running mean of Σ_x min(p, q), t_draft the time of one draft step and t_target(T) the time of
// a target forward over T tokens — not constant on a CPU. γ = 0 (plain decoding) wins when no draft pays.

enum { T_SLOTS = GAMMA_MAX + 2 };

typedef struct {
    double alpha;               // running mean of Σ min(p, q)
    double draft_step;          // seconds per draft forward (running mean)
    double target[T_SLOTS];     // seconds per target forward of T tokens (running means; 0 = not measured)
    int heuristic_gamma;
    int plain_streak;           // GAMMA_AUTO: rounds in a row it chose plain decoding
} GammaState;

static const double ALPHA_PRIOR = 0.6, EMA = 0.1;

static void running_mean(double *mean, double x) { *mean = *mean > 0 ? *mean + EMA * (x - *mean) : x; }

// t_target(T): the measurement if there is one; else the line a + b·T fitted by least squares to the measured
// T's (b ≥ 0: verifying more tokens never costs less), or with a single measured T, that time plus 3% per token
// (roughly what the bench measures for a memory-bound model). 0 if nothing is measured yet.
static double target_time(const GammaState *g, int T) {
    if (g->target[T] > 0) return g->target[T];
    double n = 0, st = 0, sy = 0, stt = 0, sty = 0;
    for (int t = 1; t < T_SLOTS; t++)
        if (g->target[t] > 0) n++, st += t, sy += g->target[t], stt += (double)t * t, sty += t * g->target[t];
    if (n == 0) return 0.0;
    const double mean_t = st / n, mean_y = sy / n, var_t = stt / n - mean_t * mean_t;
    double slope = var_t > 0 ? (sty / n - mean_t * mean_y) / var_t : 0.03 * mean_y;
    slope = slope > 0 ? slope : 0;
    const double at_t = mean_y + slope * (T - mean_t);
    return at_t > 0 ? at_t : mean_y;
}

// GAMMA_AUTO starts with one plain round, which measures t_target(1), the yardstick of every choice (and of the
// predicted speedup), then drafts 4 to measure a draft step; from then on it maximises rate(γ). Plain rounds
// teach it nothing about α, so every 8th plain round in a row drafts one token: α can recover when the text
// becomes easier again.
static int choose_gamma(const SpecParams *params, GammaState *g, bool have_drafter) {
    if (!have_drafter) return 0;
    if (params->policy == GAMMA_FIXED) return params->gamma;
    if (params->policy == GAMMA_HEURISTIC) return g->heuristic_gamma;
    if (g->target[1] <= 0) return 0;
    if (g->draft_step <= 0) return 4;
    int best = 0;
    double best_rate = 1.0 / target_time(g, 1);
    for (int gamma = 1; gamma <= GAMMA_MAX; gamma++) {
        double rate = spec_expected_tokens(g->alpha, gamma) / (gamma * g->draft_step + target_time(g, gamma + 1));
        if (rate > best_rate) best = gamma, best_rate = rate;
    }
    g->plain_streak = best == 0 ? g->plain_streak + 1 : 0;
    return best == 0 && g->plain_streak % 8 == 0 ? 1 : best;
}

// ---- the scheduler ------------------------------------------------------------------------------------------

// Buffers of one round: the verify forward's logits and the distributions p_1..p_{γ+1}, q_1..q_γ.
typedef struct {
    float *logits;      // [γ + 1, V]
    double *p;          // [γ + 1, V]
    double *q;          // [γ, V]
    double *residual;   // [V]
    int *context;       // prompt and emitted tokens
} Buffers;

static void trace_round(FILE *f, int round, int gamma, const int *draft, const double *p_x, const double *q_x,
                        const double *r, int n_accepted, int token, TokenKind kind, double residual_mass) {
    fprintf(f, "{\"round\": %d, \"gamma\": %d, \"drafted\": [", round, gamma);
    for (int i = 0; i < gamma; i++) fprintf(f, "%s%d", i ? ", " : "", draft[i]);
    const double *columns[3] = {p_x, q_x, r};
    const char *names[3] = {"p", "q", "r"};
    for (int c = 0; c < 3; c++) {
        fprintf(f, "], \"%s\": [", names[c]);
        for (int i = 0; i < gamma; i++) fprintf(f, "%s%.6g", i ? ", " : "", columns[c][i]);
    }
    fprintf(f, "], \"accepted\": %d, \"token\": %d, \"kind\": \"%s\", \"residual_mass\": %.6g}\n", n_accepted, token,
            kind == TOKEN_RESAMPLED ? "resampled" : kind == TOKEN_BONUS ? "bonus" : "target", residual_mass);
}

int speculative_generate(Model *target, Drafter *drafter, const int *prompt, int n_prompt,
                         const SpecParams *params, Rng *rng, int *out, int *n_out, SpecStats *stats, Err *err) {
    const int V = target->n_vocab, n_ctx = target->cfg.n_positions;
    *stats = (SpecStats){0};
    *n_out = 0;
    if (n_prompt < 1) return err_fmt(err, "the prompt is empty");
    if (n_prompt >= n_ctx)
        return err_fmt(err, "the prompt has %d tokens but the model's context is %d positions, which leaves no room "
                       "to generate", n_prompt, n_ctx);
    KVCache cache;
    if (model_kv_init(target, &cache, err)) return -1;
    Buffers b = {malloc(sizeof(float) * (GAMMA_MAX + 1) * V), malloc(sizeof(double) * (GAMMA_MAX + 1) * V),
                 malloc(sizeof(double) * GAMMA_MAX * V), malloc(sizeof(double) * V),
                 malloc(sizeof(int) * ((size_t)n_prompt + params->max_tokens))};
    int rc = -1;
    if (!b.logits || !b.p || !b.q || !b.residual || !b.context) {
        err_fmt(err, "out of memory for the scheduler's buffers");
        goto done;
    }
    memcpy(b.context, prompt, sizeof(int) * n_prompt);
    double t_start = now_seconds();

    // Prefill all but the newest committed token (both models): each round's verify forward starts with it, and
    // its logits give p_1.
    if (n_prompt > 1 && model_forward(target, &cache, prompt, n_prompt - 1, b.logits, false, err)) goto done;
    if (n_prompt > 1 && drafter && drafter->prefill && drafter->prefill(drafter, prompt, n_prompt - 1, err)) goto done;
    double t_decode = now_seconds();
    stats->prefill_seconds = t_decode - t_start;

    GammaState g = {.alpha = ALPHA_PRIOR, .heuristic_gamma = params->gamma};
    int rounds_by_gamma[GAMMA_MAX + 1] = {0};
    int n = n_prompt;  // committed tokens; the target cache holds n − 1 of them
    bool done = false;
    double gamma_sum = 0;
    while (!done && stats->generated < params->max_tokens && cache.len < n_ctx) {
        // γ: by policy, but never beyond the tokens still wanted or the context left.
        int gamma = choose_gamma(params, &g, drafter != NULL);
        int room = n_ctx - cache.len - 1, wanted = params->max_tokens - stats->generated - 1;
        gamma = gamma < room ? gamma : room;
        gamma = gamma < wanted ? gamma : wanted;
        gamma = gamma < GAMMA_MAX ? gamma : GAMMA_MAX;

        // 1. Draft x_1..x_k ~ q_1..q_k.
        int tokens[GAMMA_MAX + 1], k = 0;
        if (gamma > 0) {
            double t0 = now_seconds();
            int calls = drafter->calls;
            if ((k = drafter->propose(drafter, b.context, n, gamma, tokens + 1, b.q, err)) < 0) goto done;
            double spent = now_seconds() - t0;
            drafter->seconds += spent;
            if (drafter->calls > calls) running_mean(&g.draft_step, spent / (drafter->calls - calls));
        }
        stats->drafted += k;
        gamma_sum += k;
        rounds_by_gamma[k]++;

        // 2. Verify: one target forward over [newest committed token, x_1..x_k] gives p_1..p_{k+1}.
        tokens[0] = b.context[n - 1];
        double t0 = now_seconds();
        if (model_forward(target, &cache, tokens, k + 1, b.logits, true, err)) goto done;
        double spent = now_seconds() - t0;
        stats->target_seconds += spent;
        running_mean(&g.target[k + 1], spent);
        stats->rounds++;
        for (int i = 0; i <= k; i++)
            if (sampling_adjust(b.p + (size_t)i * V, b.logits + (size_t)i * V, V, &params->sampling)) {
                err_fmt(err, "the target model produced a NaN or infinite logit at position %d", n - 1 + i);
                goto done;
            }

        // 3. Accept x_i while r_i ≤ p_i(x_i) / q_i(x_i).  4. Then the next token from the residual or p_{k+1}.
        double p_x[GAMMA_MAX], q_x[GAMMA_MAX], r[GAMMA_MAX], residual_mass = 0;
        int n_accepted = 0, next = -1;
        TokenKind kind = k > 0 ? TOKEN_BONUS : TOKEN_TARGET;
        for (int i = 0; i < k; i++) {
            const double *p_i = b.p + (size_t)i * V, *q_i = b.q + (size_t)i * V;
            const int x = tokens[1 + i];
            p_x[i] = p_i[x];
            q_x[i] = drafter->deterministic ? 1.0 : q_i[x];
            r[i] = rng_uniform(rng);
            double beta = drafter->deterministic ? p_x[i] : overlap(p_i, q_i, V);
            stats->sum_min_pq += beta;
            stats->n_min_pq++;
            running_mean(&g.alpha, beta);
            if (r[i] < spec_accept_probability(p_x[i], q_x[i])) {
                n_accepted++;
                continue;
            }
            if (drafter->deterministic) {  // q = one-hot(x): the residual is p without x
                memcpy(b.residual, p_i, sizeof(double) * V);
                residual_mass = 1.0 - b.residual[x];
                b.residual[x] = 0.0;
            } else {
                residual_mass = spec_residual(b.residual, p_i, q_i, V);
            }
            next = sampling_draw(b.residual, V, rng_uniform(rng));
            kind = TOKEN_RESAMPLED;
            break;
        }
        if (next < 0) next = sampling_draw(b.p + (size_t)k * V, V, rng_uniform(rng));
        stats->accepted += n_accepted;
        if (params->trace)
            trace_round(params->trace, stats->rounds, k, tokens + 1, p_x, q_x, r, n_accepted, next, kind,
                        residual_mass);

        // Emit x_1..x_n and the next token, stopping at the end-of-text id or at max_tokens. A rejected draft is
        // shown (never emitted) just before the correction that replaces it, as in the paper's Figure 1.
        for (int i = 0; i <= n_accepted && !done; i++) {
            int id = i < n_accepted ? tokens[1 + i] : next;
            bool eos = id == params->eos_id;
            for (int e = 0; e < params->n_eos; e++) eos |= id == params->eos_ids[e];
            if (eos) {
                done = true;
                break;
            }
            if (params->on_token) {
                if (i == n_accepted && kind == TOKEN_RESAMPLED)
                    params->on_token(params->ctx, tokens[1 + i], TOKEN_REJECTED);
                params->on_token(params->ctx, id, i < n_accepted ? TOKEN_ACCEPTED : kind);
            }
            b.context[n++] = out[stats->generated++] = id;
            done = stats->generated == params->max_tokens;
        }

        // 5. Roll back both caches to the committed tokens but the newest, which the next round feeds first.
        kv_truncate(&cache, n - 1);
        if (drafter) drafter->rollback(drafter, n - 1);
        if (params->policy == GAMMA_HEURISTIC) {
            g.heuristic_gamma += n_accepted == k && k > 0 ? 2 : -1;
            g.heuristic_gamma = g.heuristic_gamma < 1 ? 1 : g.heuristic_gamma > GAMMA_MAX ? GAMMA_MAX : g.heuristic_gamma;
        }
    }
    *n_out = stats->generated;
    stats->decode_seconds = now_seconds() - t_decode;
    stats->draft_calls = drafter ? drafter->calls : 0;
    stats->draft_seconds = drafter ? drafter->seconds : 0;
    stats->target_t1_seconds = target_time(&g, 1);
    stats->draft_step_seconds = g.draft_step;
    stats->mean_gamma = stats->rounds ? gamma_sum / stats->rounds : 0;
    double alpha = stats->n_min_pq ? stats->sum_min_pq / stats->n_min_pq : 0;
    for (int gamma = 0; gamma <= GAMMA_MAX; gamma++)
        stats->expected_tokens += rounds_by_gamma[gamma] * spec_expected_tokens(alpha, gamma);
    double forwards = stats->target_seconds + stats->draft_seconds;
    stats->predicted_speedup = forwards > 0 ? stats->expected_tokens * stats->target_t1_seconds / forwards : 1.0;
    rc = 0;
done:
    kv_free(&cache);
    free(b.logits);
    free(b.p);
    free(b.q);
    free(b.residual);
    free(b.context);
    return rc;
}
