// speculative.c — the speculative decoding scheduler: Algorithm 1 of Leviathan et al. (2023), a draft-length
// policy, and statistics. See speculative.h for the contract.
#include "speculative/speculative.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"

// ---- randomness ---------------------------------------------------------------------------------------------

// What a random number at a position is for, under SAMPLER_REJECTION: each purpose has its own stream (above any
// token id; under SAMPLER_COUPLED stream x is token x's Gumbel noise), so a token's numbers depend on its position
// and the seed only — never on how many rounds or draws came before it.
typedef enum { DRAW_DRAFT, DRAW_ACCEPT, DRAW_RESIDUAL, DRAW_TARGET } Purpose;

static double uniform_for(const SpecParams *params, int position, Purpose purpose) {
    return random_uniform(params->seed, (uint64_t)position, (1ULL << 32) + purpose);
}

// A token from probs for `position`: under coupling its Gumbel-max sample (the same noise for q and p), else by
// inverse CDF with the purpose's number.
static int draw(const SpecParams *params, const double *probs, int V, int position, Purpose purpose) {
    if (params->sampler == SAMPLER_COUPLED) return sampling_gumbel_max(probs, V, params->seed, (uint64_t)position);
    return sampling_draw(probs, V, uniform_for(params, position, purpose));
}

// ---- the model drafter --------------------------------------------------------------------------------------

// Drafts x_1..x_k one token at a time: q_i = adjust(draft logits), x_i ~ q_i, drawn for its position n + i − 1 by
// the scheduler's rule. The first forward feeds every committed token the draft has not seen yet (the whole prompt
// at first; after a fully accepted round, x_γ and the bonus token); x_k itself is never fed, since the next round
// may not keep it.
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
        if (sampler_adjust(&d->sampler, q_k, d->logits))
            return err_fmt(err, "the draft model produced a NaN or infinite logit at position %d", d->cache.len - 1);
        draft[k] = draw(d->params, q_k, V, n + k, DRAW_DRAFT);
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

static int model_check(Drafter *self, const int *context, int n_prefill, Err *err) {
    ModelDrafter *d = (ModelDrafter *)self;
    return model_check_rollback(d->model, &d->cache, &d->check, context, n_prefill, "draft", err);
}

int model_drafter_init(ModelDrafter *d, Model *draft, const SpecParams *params, float p_min, Err *err) {
    *d = (ModelDrafter){.base = {.prefill = model_prefill, .propose = model_propose, .rollback = model_rollback,
                                 .check_rollback = model_check, .step_cost = spec_forward_cost(draft, 1)},
                        .model = draft, .params = params, .p_min = p_min};
    d->logits = malloc(sizeof(float) * draft->n_vocab);
    if (!d->logits) return err_fmt(err, "out of memory for the draft's logits");
    if (sampler_init(&d->sampler, &params->sampling, draft->n_vocab, draft->kernels, err)) return -1;
    return model_kv_init(draft, &d->cache, err);
}

void model_drafter_free(ModelDrafter *d) {
    sampler_free(&d->sampler);
    kv_free(&d->cache);
    rollback_check_free(&d->check);
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
// Where the choice of γ could change the output (SpecParams), t_draft and t_target come from spec_forward_cost
// instead of measurements, so that they are the same on every run.

enum { T_SLOTS = GAMMA_MAX + 2 };

typedef struct {
    double alpha;               // running mean of the acceptance probability (Σ min(p, q) under rejection)
    double draft_step;          // seconds per draft forward (running mean)
    double target[T_SLOTS];     // seconds per target forward of T tokens (running means; 0 = not measured)
    bool modelled;              // plan with the cost model below, not with the measurements above
    double model_draft_step, model_target[T_SLOTS];  // spec_forward_cost: the drafter's step, the target's T
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

// FLOPs per byte of weights at which a forward's arithmetic takes as long as streaming its weights. What make
// bench measures for the shipped target (a forward over 9 tokens costs 1.99 times one token's) puts it near 3.6.
static const double FORWARD_FLOPS_PER_BYTE = 4.0;

static double weights_of(const Linear *l) { return (double)l->n_out * l->n_in; }

double spec_forward_cost(const Model *m, int T) {
    double multiply_adds = weights_of(&m->lm_head);  // per token
    for (int l = 0; l < m->cfg.n_layer; l++) {
        const Block *b = &m->blocks[l];
        multiply_adds += weights_of(&b->attn_qkv) + weights_of(&b->attn_out) + weights_of(&b->mlp_up) +
                         weights_of(&b->mlp_down);
    }
    return (double)m->weight_bytes + T * 2.0 * multiply_adds / FORWARD_FLOPS_PER_BYTE;
}

// GAMMA_AUTO, measuring, starts with one plain round, which measures t_target(1), the yardstick of every choice (and
// of the predicted speedup), then drafts 4 to measure a draft step; from then on it maximises rate(γ). Plain rounds
// teach it nothing about α, so every 8th plain round in a row drafts one token: α can recover when the text
// becomes easier again.
static int choose_gamma(const SpecParams *params, GammaState *g, bool have_drafter) {
    if (!have_drafter) return 0;
    if (params->policy == GAMMA_FIXED) return params->gamma;
    if (params->policy == GAMMA_HEURISTIC) return g->heuristic_gamma;
    if (!g->modelled && g->target[1] <= 0) return 0;
    if (!g->modelled && g->draft_step <= 0) return 4;
    const double draft_step = g->modelled ? g->model_draft_step : g->draft_step;
    int best = 0;
    double best_rate = 1.0 / (g->modelled ? g->model_target[1] : target_time(g, 1));
    for (int gamma = 1; gamma <= GAMMA_MAX; gamma++) {
        double t_verify = g->modelled ? g->model_target[gamma + 1] : target_time(g, gamma + 1);
        double rate = spec_expected_tokens(g->alpha, gamma) / (gamma * draft_step + t_verify);
        if (rate > best_rate) best = gamma, best_rate = rate;
    }
    g->plain_streak = best == 0 ? g->plain_streak + 1 : 0;
    return best == 0 && g->plain_streak % 8 == 0 ? 1 : best;
}

// ---- the scheduler ------------------------------------------------------------------------------------------

#ifdef SPECDEC_DEBUG
enum { CHECK_ROLLBACKS = 1 };  // make BUILD=debug: every rollback is checked against a recomputation
#else
enum { CHECK_ROLLBACKS = 0 };
#endif

// Step 5 checked: both caches against a forward over the committed tokens that no rollback touches (rollback_check.c).
static int check_rollback(Model *target, KVCache *cache, RollbackCheck *check, Drafter *drafter, const int *context,
                          int n_prefill, Err *err) {
    if (model_check_rollback(target, cache, check, context, n_prefill, "target", err)) return -1;
    return drafter && drafter->check_rollback ? drafter->check_rollback(drafter, context, n_prefill, err) : 0;
}

// Buffers of one round: the verify forward's logits and the distributions p_1..p_{γ+1}, q_1..q_γ.
typedef struct {
    float *logits;      // [γ + 1, V]
    double *p;          // [γ + 1, V]
    double *q;          // [γ, V]
    double *residual;   // [V]
    int *context;       // prompt and emitted tokens
} Buffers;

// The token that ends a round and its kind, for the trace: the first accepted draft that is the end-of-text token
// (generation stops there: nothing after it is used), or else the target's token `next`, of kind `*kind`.
static int round_end(const int *draft, int n_accepted, int next, int eos_id, TokenKind *kind) {
    for (int i = 0; i < n_accepted; i++)
        if (draft[i] == eos_id) {
            *kind = TOKEN_ACCEPTED;
            return draft[i];
        }
    return next;
}

static void trace_round(FILE *f, int round, int gamma, const int *draft, const double *p_x, const double *q_x,
                        const double *r, int n_accepted, int token, TokenKind kind, double residual_mass) {
    fprintf(f, "{\"round\": %d, \"gamma\": %d, \"drafted\": [", round, gamma);
    for (int i = 0; i < gamma; i++) fprintf(f, "%s%d", i ? ", " : "", draft[i]);
    const double *columns[3] = {p_x, q_x, r};  // r: NULL under coupling, which draws no acceptance number
    const char *names[3] = {"p", "q", "r"};
    for (int c = 0; c < 3; c++) {
        if (!columns[c]) continue;
        fprintf(f, "], \"%s\": [", names[c]);
        for (int i = 0; i < gamma; i++) fprintf(f, "%s%.6g", i ? ", " : "", columns[c][i]);
    }
    static const char *const kind_names[] = {[TOKEN_ACCEPTED] = "accepted", [TOKEN_REJECTED] = "rejected",
                                             [TOKEN_RESAMPLED] = "resampled", [TOKEN_BONUS] = "bonus",
                                             [TOKEN_TARGET] = "target"};
    fprintf(f, "], \"accepted\": %d, \"token\": %d, \"kind\": \"%s\", \"residual_mass\": %.6g}\n", n_accepted, token,
            kind_names[kind], residual_mass);
}

int speculative_generate(Model *target, Drafter *drafter, const int *prompt, int n_prompt,
                         const SpecParams *params, int *out, int *n_out, SpecStats *stats, Err *err) {
    const int V = target->n_vocab, n_ctx = target->cfg.n_positions;
    *stats = (SpecStats){0};
    *n_out = 0;
    if (n_prompt < 1) return err_fmt(err, "the prompt is empty");
    if (n_prompt >= n_ctx)
        return err_fmt(err, "the prompt has %d tokens but the model's context is %d positions, which leaves no room "
                       "to generate", n_prompt, n_ctx);
    Sampler sampler;
    if (sampler_init(&sampler, &params->sampling, V, target->kernels, err)) return -1;
    KVCache cache;
    RollbackCheck check = {0};  // the debug build's (CHECK_ROLLBACKS)
    if (model_kv_init(target, &cache, err)) {
        sampler_free(&sampler);
        return -1;
    }
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

    GammaState g = {.alpha = ALPHA_PRIOR, .heuristic_gamma = params->gamma,
                    .modelled = drafter && params->policy == GAMMA_AUTO && params->sampler == SAMPLER_REJECTION &&
                                params->sampling.temperature > 0};
    if (g.modelled) {
        g.model_draft_step = drafter->step_cost;
        for (int T = 1; T < T_SLOTS; T++) g.model_target[T] = spec_forward_cost(target, T);
    }
    const bool coupled = params->sampler == SAMPLER_COUPLED;
    double alpha_sum = 0;  // Σ over verified drafts of their acceptance probability (or, coupled, its outcome)
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
            if (sampler_adjust(&sampler, b.p + (size_t)i * V, b.logits + (size_t)i * V)) {
                err_fmt(err, "the target model produced a NaN or infinite logit at position %d", n - 1 + i);
                goto done;
            }

        // 3. Accept x_i — rejection: while r_i < p_i(x_i) / q_i(x_i); coupled: while x_i is the target's own
        // Gumbel-max token t_i. 4. Then the next token: the residual's or t_i at the first rejection, else p_{k+1}'s.
        double p_x[GAMMA_MAX], q_x[GAMMA_MAX], r[GAMMA_MAX], residual_mass = 0;
        int n_accepted = 0, next = -1;
        TokenKind kind = k > 0 ? TOKEN_BONUS : TOKEN_TARGET;
        for (int i = 0; i < k; i++) {
            const double *p_i = b.p + (size_t)i * V, *q_i = b.q + (size_t)i * V;
            const int x = tokens[1 + i], position = n + i;
            p_x[i] = p_i[x];
            q_x[i] = drafter->deterministic ? 1.0 : q_i[x];
            double beta = drafter->deterministic ? p_x[i] : overlap(p_i, q_i, V);
            stats->sum_min_pq += beta;
            stats->n_min_pq++;
            bool keep;
            if (coupled) {
                // Drafter-invariance: whatever x is, the token at this position is t_i. P(keep) is p(x) for a
                // deterministic drafter; for a sampled draft there is no cheap closed form, so the outcome stands in.
                const int t = sampling_gumbel_max(p_i, V, params->seed, (uint64_t)position);
                keep = x == t;
                next = keep ? -1 : t;
                beta = drafter->deterministic ? p_x[i] : keep;
            } else {
                r[i] = uniform_for(params, position, DRAW_ACCEPT);
                keep = r[i] < spec_accept_probability(p_x[i], q_x[i]);
            }
            alpha_sum += beta;
            running_mean(&g.alpha, beta);
            if (keep) {
                n_accepted++;
                continue;
            }
            if (!coupled) {
                if (drafter->deterministic) {  // q = one-hot(x): the residual is p without x
                    memcpy(b.residual, p_i, sizeof(double) * V);
                    residual_mass = 1.0 - b.residual[x];
                    b.residual[x] = 0.0;
                } else {
                    residual_mass = spec_residual(b.residual, p_i, q_i, V);
                }
                next = sampling_draw(b.residual, V, uniform_for(params, position, DRAW_RESIDUAL));
            }
            kind = TOKEN_RESAMPLED;
            break;
        }
        if (next < 0) next = draw(params, b.p + (size_t)k * V, V, n + k, DRAW_TARGET);
        stats->accepted += n_accepted;
        if (params->trace) {
            TokenKind end_kind = kind;
            int end = round_end(tokens + 1, n_accepted, next, params->eos_id, &end_kind);
            trace_round(params->trace, stats->rounds, k, tokens + 1, p_x, q_x, coupled ? NULL : r, n_accepted, end,
                        end_kind, residual_mass);
        }

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
        if (CHECK_ROLLBACKS && check_rollback(target, &cache, &check, drafter, b.context, n_prompt - 1, err))
            goto done;
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
    double alpha = stats->n_min_pq ? alpha_sum / stats->n_min_pq : 0;
    for (int gamma = 0; gamma <= GAMMA_MAX; gamma++)
        stats->expected_tokens += rounds_by_gamma[gamma] * spec_expected_tokens(alpha, gamma);
    double forwards = stats->target_seconds + stats->draft_seconds;
    stats->predicted_speedup = forwards > 0 ? stats->expected_tokens * stats->target_t1_seconds / forwards : 1.0;
    rc = 0;
done:
    sampler_free(&sampler);
    kv_free(&cache);
    rollback_check_free(&check);
    free(b.logits);
    free(b.p);
    free(b.q);
    free(b.residual);
    free(b.context);
    return rc;
}
