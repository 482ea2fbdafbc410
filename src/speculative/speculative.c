// speculative.c — the speculative decoding scheduler: Algorithm 1 of Leviathan et al. (2023), a draft-length
// policy, and statistics. See speculative.h for the contract.
#include "speculative/speculative.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"

// ---- randomness ---------------------------------------------------------------------------------------------

static double uniform_for(const SpecParams *params, int position, DrawPurpose purpose) {
    return random_uniform(params->seed, (uint64_t)position, (1ULL << 32) + purpose);
}

int spec_draw(const SpecParams *params, const double *probs, int V, int position, DrawPurpose purpose) {
    if (params->sampler == SAMPLER_COUPLED) return sampling_gumbel_max(probs, V, params->seed, (uint64_t)position);
    return sampling_draw(probs, V, uniform_for(params, position, purpose));
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
// α is learned per source: the draft model's sampled drafts, and the lookup's one-hot ones, which cost no draft
// step (t_draft = 0). A lookup run's first draft is kept with a probability α_first that depends on the length of
// the match behind it (and on the temperature: at 0.7 a one-hot draft is kept with probability p(x), far less often
// than greedily), its later drafts, once a copy is under way, with another, α_next; so for a run
//   E[tokens per round] = 1 + α_first · (1 − α_next^γ) / (1 − α_next)
// (equation 1 when α_first = α_next). A drafter with a lookup is told each round, per match length, how much of the
// lookup's run pays more than the draft model's drafts or plain decoding (Drafter.lookup_gamma; 0: not that run).
// The lookup costs nothing to ask, so it is asked every round, and a run it found but did not propose teaches α as
// well as one that was (learn_unproposed_run): the round's p_1 and committed tokens tell how much of the run would
// have been kept. A run takes the place of the draft model's drafts only once first drafts' acceptance has been
// learned from LOOKUP_EVIDENCE of them, never on the prior alone (a match length with fewer is judged by the
// lookup's other lengths): adding the lookup to the model must not cost. In place of plain decoding a run costs
// only its verification's extra tokens, and the prior is enough.
// Where the choice of γ could change the output (SpecParams), t_draft and t_target come from spec_forward_cost
// instead of measurements, so that they are the same on every run.

enum { T_SLOTS = GAMMA_MAX + 2 };

// Whose drafts α learns from: the draft model's (SAMPLED); a lookup run's first after a match of m tokens (source
// m), or of any length (LOOKUP_FIRST); a lookup run's later ones (LOOKUP_NEXT).
enum { SAMPLED = 0, LOOKUP_FIRST = LOOKUP_MATCH_SLOTS, LOOKUP_NEXT, N_SOURCES };

typedef struct {
    double alpha[N_SOURCES];    // running means of the acceptance probability (Σ min(p, q) under rejection)
    double draft_step;          // seconds per draft forward (running mean)
    bool draft_step_known;      // measured, or 0 by nature (a lookup's proposals cost no forward)
    double target[T_SLOTS];     // seconds per target forward of T tokens (running means; 0 = not measured)
    bool modelled;              // plan with the cost model below, not with the measurements above
    double model_draft_step, model_target[T_SLOTS];  // spec_forward_cost: the drafter's step, the target's T
    int heuristic_gamma;
    int plain_streak;           // GAMMA_AUTO: rounds in a row it chose plain decoding
    int n_alpha[N_SOURCES];     // drafts α has learned from
    int probe_misses;           // probes in a row (one draft after plain rounds) that were rejected, up to 3
    bool probing;               // this round's draft model drafts are a probe
} GammaState;

static const double ALPHA_PRIOR = 0.6, EMA = 0.1;
// A lookup run's drafts after its first: a copy under way mostly goes on (α learned for them by the end of 64 tokens
// on the bench prompts: about 0.96 greedily, 0.4–0.55 at temperature 0.7, which every round teaches, whether it
// proposed a run or not). A prior as low as ALPHA_PRIOR kept greedy runs short for many rounds.
static const double ALPHA_NEXT_PRIOR = 0.9;
// The first drafts of lookup runs α_first must have learned from before a run may take the draft model's place
// (one or two is luck when sampling).
enum { LOOKUP_EVIDENCE = 4 };

static void running_mean(double *mean, double x) { *mean = *mean > 0 ? *mean + EMA * (x - *mean) : x; }

// α learns from a draft's acceptance β: the mean of the drafts seen so far with the prior counting as one of them,
// until there are 1/EMA of them; then a running mean that forgets. A useless draft is found out in a few drafts
// (the prior alone would take 1/EMA times as many), and plain decoding takes over.
static void learn_alpha(GammaState *g, int source, double beta) {
    const int n = ++g->n_alpha[source];
    const double weight = 1.0 / (n + 1) > EMA ? 1.0 / (n + 1) : EMA;
    g->alpha[source] += weight * (beta - g->alpha[source]);
}

// What the i-th draft of a lookup run after a match of match_length tokens teaches.
static void learn_lookup_alpha(GammaState *g, int match_length, int i, double beta) {
    if (i > 0) {
        learn_alpha(g, LOOKUP_NEXT, beta);
        return;
    }
    learn_alpha(g, match_length < LOOKUP_MATCH_SLOTS ? match_length : LOOKUP_MATCH_SLOTS - 1, beta);
    learn_alpha(g, LOOKUP_FIRST, beta);
}

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
// of the predicted speedup), then drafts 4 to measure a draft step (a lookup's costs nothing: not measured); from
// then on it maximises rate(γ). Plain rounds teach it nothing about α, so every 8th plain round in a row drafts one
// token — every 16th, 32nd, 64th after one, two, three such probes in a row were rejected: α can recover when the
// text becomes easier again, and a useless draft costs a probe per 64 tokens. The draft model reads the text those
// plain rounds committed in one batch when it is next used (draft_model.c): a plain round costs no draft forward.
static double verify_time(const GammaState *g, int T) { return g->modelled ? g->model_target[T] : target_time(g, T); }

// The γ (0: plain decoding) that maximises rate(γ) for drafts at t_draft each, of which the first is kept with
// probability alpha_first and each later one with alpha_next; *rate gets it. Verifying γ + 1 tokens is taken to cost
// at least a plain step: a noisy measurement must not make drafting look free.
static int best_gamma(const GammaState *g, double alpha_first, double alpha_next, double draft_step, double *rate) {
    int best = 0;
    const double plain_step = verify_time(g, 1);
    *rate = 1.0 / plain_step;
    for (int gamma = 1; gamma <= GAMMA_MAX; gamma++) {
        const double t_verify = verify_time(g, gamma + 1) > plain_step ? verify_time(g, gamma + 1) : plain_step;
        const double tokens = 1.0 + alpha_first * spec_expected_tokens(alpha_next, gamma - 1);
        const double r = tokens / (gamma * draft_step + t_verify);
        if (r > *rate) best = gamma, *rate = r;
    }
    return best;
}

// What the drafter is asked for this round: runs of the lookup by match length, and the draft model's drafts.
static void ask_drafter(Drafter *drafter, int lookup_gamma, int model_gamma) {
    for (int m = 0; m < LOOKUP_MATCH_SLOTS; m++) drafter->lookup_gamma[m] = lookup_gamma;
    drafter->model_gamma = model_gamma;
    drafter->n_run = drafter->match_length = 0;
    drafter->run_proposed = false;
}

static int choose_gamma(const SpecParams *params, GammaState *g, Drafter *drafter) {
    if (!drafter) return 0;
    g->probing = false;
    if (params->policy != GAMMA_AUTO) {
        const int gamma = params->policy == GAMMA_FIXED ? params->gamma : g->heuristic_gamma;
        ask_drafter(drafter, gamma, gamma);
        return gamma;
    }
    ask_drafter(drafter, 0, 0);
    if (!g->modelled && g->target[1] <= 0) return 0;
    const bool has_model = drafter->step_cost > 0;
    if (has_model && !g->modelled && !g->draft_step_known) return drafter->model_gamma = 4;  // the step measured
    double model_rate = 1.0 / verify_time(g, 1);  // plain decoding's, where there is no model or it does not pay
    int gamma = 0;
    if (has_model) {
        const double draft_step = g->modelled ? g->model_draft_step : g->draft_step;
        gamma = best_gamma(g, g->alpha[SAMPLED], g->alpha[SAMPLED], draft_step, &model_rate);
        g->plain_streak = gamma == 0 ? g->plain_streak + 1 : 0;
        g->probing = gamma == 0 && g->plain_streak % (8 << g->probe_misses) == 0;
        drafter->model_gamma = gamma = g->probing ? 1 : gamma;
    }
    if (!drafter->has_lookup) return gamma;
    const int evidence = gamma > 0 ? LOOKUP_EVIDENCE : 0;  // to take the model's place; plain decoding's, none
    for (int m = 1; m < LOOKUP_MATCH_SLOTS && g->n_alpha[LOOKUP_FIRST] >= evidence; m++) {
        const double alpha_first = g->alpha[g->n_alpha[m] > 0 && g->n_alpha[m] >= evidence ? m : LOOKUP_FIRST];
        double lookup_rate;
        const int lookup_gamma = best_gamma(g, alpha_first, g->alpha[LOOKUP_NEXT], 0, &lookup_rate);
        drafter->lookup_gamma[m] = lookup_gamma > 0 && lookup_rate >= model_rate ? lookup_gamma : 0;
        gamma = gamma > drafter->lookup_gamma[m] ? gamma : drafter->lookup_gamma[m];
    }
    return gamma > 0 ? gamma : 1;  // the lookup is asked every round: what it finds teaches α
}

// ---- the scheduler: one round of Algorithm 1 ---------------------------------------------------------------
//
// A round is the paper's steps, each a function below:
//   0. choose γ                     next_gamma
//   1. draft x_1..x_k ~ q_1..q_k    draft
//   2. verify: p_1..p_{k+1}         verify
//   3. accept x_i, or               accept_or_resample (accept_rejection / accept_coupled)
//   4. resample at the first rejection, else draw the bonus from p_{k+1}
//   5. commit and roll back         commit_and_roll_back
// Each step writes what it decided into the round's record (Round); the statistics, the γ policy's
// measurements, the trace and --show's callbacks read the record afterwards (record_round).

#ifdef SPECDEC_DEBUG
enum { CHECK_ROLLBACKS = 1 };  // make BUILD=debug: every rollback is checked against a recomputation
#else
enum { CHECK_ROLLBACKS = 0 };
#endif

// One round, as it happened.
typedef struct {
    int gamma;                          // asked of the drafter
    int k, n_one_hot;                   // drafted x_1..x_k, of which the first n_one_hot deterministic
    int tokens[GAMMA_MAX + 1];          // [newest committed token, x_1..x_k]: what the target verifies
    double p_x[GAMMA_MAX], q_x[GAMMA_MAX];  // p_i(x_i), q_i(x_i)
    double r[GAMMA_MAX];                // rejection's acceptance numbers
    double overlap[GAMMA_MAX];          // β_i = Σ_x min(p_i, q_i) (p_i(x_i) for a one-hot q_i)
    double learned[GAMMA_MAX];          // what α learns from x_i: β_i, or under coupling, the outcome
    int n_verified;                     // drafts the accept rule looked at: the accepted ones and a rejected one
    int n_accepted, next;               // kept drafts; the target's token after them
    TokenKind kind;                     // of next: TOKEN_BONUS, _RESAMPLED, or _TARGET (plain decoding)
    double residual_mass;               // Σ max(0, p − q) at the rejection
    int n_committed;                    // of x_1..x_{n_accepted}, next: committed (end-of-text and -n stop early)
    double draft_seconds, target_seconds;
    int draft_calls;                    // draft model forwards
} Round;

// The scheduler's state between rounds.
typedef struct {
    Model *target;
    Drafter *drafter;                   // NULL: plain decoding
    const SpecParams *params;
    int V, n_ctx;
    Sampler sampler;
    KVCache cache;                      // the target's: the committed tokens but the newest
    RollbackCheck check;                // the debug build's (CHECK_ROLLBACKS)
    float *logits;                      // [γ + 1, V]
    double *p;                          // [γ + 1, V]
    double *q;                          // [γ, V]
    double *residual;                   // [V]
    int *context;                       // the committed tokens: prompt and emitted
    int n, n_prompt;                    // committed tokens; of them the prompt's
    int *out;                           // the emitted tokens
    bool done;                          // end-of-text or -n reached
    GammaState g;
    double alpha_sum, gamma_sum;        // Σ learned α over verified drafts; Σ k over rounds
    int rounds_by_gamma[GAMMA_MAX + 1];
    SpecStats *stats;
} Scheduler;

// 0. γ: by policy, but never beyond the tokens still wanted or the context left.
static int next_gamma(Scheduler *s) {
    int gamma = choose_gamma(s->params, &s->g, s->drafter);
    const int room = s->n_ctx - s->cache.len - 1, wanted = s->params->max_tokens - s->stats->generated - 1;
    gamma = gamma < room ? gamma : room;
    gamma = gamma < wanted ? gamma : wanted;
    return gamma < GAMMA_MAX ? gamma : GAMMA_MAX;
}

// 1. Draft x_1..x_k ~ q_1..q_k continuing the committed tokens.
static int draft(Scheduler *s, Round *r, Err *err) {
    if (r->gamma == 0) return 0;
    const int calls = s->drafter->calls;
    if ((r->k = s->drafter->propose(s->drafter, s->context, s->n, r->gamma, r->tokens + 1, s->q, err)) < 0) return -1;
    r->n_one_hot = s->drafter->n_one_hot < r->k ? s->drafter->n_one_hot : r->k;
    r->draft_calls = s->drafter->calls - calls;
    return 0;
}

// 2. Verify: one target forward over [newest committed token, x_1..x_k] gives p_1..p_{k+1}.
static int verify(Scheduler *s, Round *r, Err *err) {
    r->tokens[0] = s->context[s->n - 1];
    if (model_forward(s->target, &s->cache, r->tokens, r->k + 1, s->logits, true, err)) return -1;
    for (int i = 0; i <= r->k; i++)
        if (sampler_adjust(&s->sampler, s->p + (size_t)i * s->V, s->logits + (size_t)i * s->V))
            return err_fmt(err, "the target model produced a NaN or infinite logit at position %d", s->n - 1 + i);
    return 0;
}

// 3. (rejection) Keep x_i while r_i < p_i(x_i) / q_i(x_i); 4. at the first rejection the next token comes from the
// residual norm(max(0, p_i − q_i)) — for a one-hot q_i, p_i without x_i. Returns whether x_i is kept.
static bool accept_rejection(Scheduler *s, Round *r, int i, const double *p_i, const double *q_i) {
    const int x = r->tokens[1 + i], position = s->n + i;
    r->r[i] = uniform_for(s->params, position, DRAW_ACCEPT);
    if (r->r[i] < spec_accept_probability(r->p_x[i], r->q_x[i])) return true;
    if (i < r->n_one_hot) {
        memcpy(s->residual, p_i, sizeof(double) * s->V);
        r->residual_mass = 1.0 - s->residual[x];
        s->residual[x] = 0.0;
    } else {
        r->residual_mass = spec_residual(s->residual, p_i, q_i, s->V);
    }
    r->next = sampling_draw(s->residual, s->V, uniform_for(s->params, position, DRAW_RESIDUAL));
    return false;
}

// 3. (coupled) Keep x_i while it is the target's own Gumbel-max token t_i; 4. at the first rejection the next token
// is t_i. Drafter-invariance: whatever x_i is, the token at this position is t_i. What α learns is P(keep) = p(x)
// for a one-hot q; for a sampled draft there is no cheap closed form, so the outcome stands in.
static bool accept_coupled(Scheduler *s, Round *r, int i, const double *p_i) {
    const int t = sampling_gumbel_max(p_i, s->V, s->params->seed, (uint64_t)(s->n + i));
    const bool keep = r->tokens[1 + i] == t;
    if (i >= r->n_one_hot) r->learned[i] = keep;
    if (!keep) r->next = t;
    return keep;
}

// 3 and 4: the accepted prefix x_1..x_{n_accepted} and the next token, the residual's or the target's at the first
// rejection, else the bonus token from p_{k+1} (plain decoding: the target's token from p_1).
static void accept_or_resample(Scheduler *s, Round *r) {
    r->next = -1;
    r->kind = r->k > 0 ? TOKEN_BONUS : TOKEN_TARGET;
    for (int i = 0; i < r->k; i++) {
        const double *p_i = s->p + (size_t)i * s->V, *q_i = s->q + (size_t)i * s->V;
        const bool one_hot = i < r->n_one_hot;
        r->p_x[i] = p_i[r->tokens[1 + i]];
        r->q_x[i] = one_hot ? 1.0 : q_i[r->tokens[1 + i]];
        r->overlap[i] = r->learned[i] = one_hot ? r->p_x[i] : overlap(p_i, q_i, s->V);
        r->n_verified++;
        const bool keep = s->params->sampler == SAMPLER_COUPLED ? accept_coupled(s, r, i, p_i)
                                                                : accept_rejection(s, r, i, p_i, q_i);
        if (!keep) {
            r->kind = TOKEN_RESAMPLED;
            break;
        }
        r->n_accepted++;
    }
    if (r->next < 0) r->next = spec_draw(s->params, s->p + (size_t)r->k * s->V, s->V, s->n + r->k, DRAW_TARGET);
}

// Whether id ends the text: the end-of-text id, or one of a config's list of them.
static bool is_end_of_text(const SpecParams *params, int id) {
    bool eos = id == params->eos_id;
    for (int e = 0; e < params->n_eos; e++) eos |= id == params->eos_ids[e];
    return eos;
}

// 5. Commit x_1..x_{n_accepted} and the next token, stopping at the end-of-text id (not emitted) or at max_tokens;
// then roll both caches back to the committed tokens but the newest, which the next round's verify feeds first.
static int commit_and_roll_back(Scheduler *s, Round *r, Err *err) {
    for (int i = 0; i <= r->n_accepted && !s->done; i++) {
        const int id = i < r->n_accepted ? r->tokens[1 + i] : r->next;
        if (is_end_of_text(s->params, id)) {
            s->done = true;
            break;
        }
        s->context[s->n++] = s->out[s->stats->generated++] = id;
        r->n_committed++;
        s->done = s->stats->generated == s->params->max_tokens;
    }
    kv_truncate(&s->cache, s->n - 1);
    if (s->drafter) s->drafter->rollback(s->drafter, s->n - 1);
    if (!CHECK_ROLLBACKS) return 0;
    // Checked: both caches against a forward over the committed tokens that no rollback touches (rollback_check.c).
    if (model_check_rollback(s->target, &s->cache, &s->check, s->context, s->n_prompt - 1, "target", err)) return -1;
    return s->drafter && s->drafter->check_rollback
               ? s->drafter->check_rollback(s->drafter, s->context, s->n_prompt - 1, err)
               : 0;
}

// ---- what a round's record feeds: statistics, the γ policy, the trace, --show ------------------------------

// The token that ended a round and its kind, for the trace: the first accepted draft that is the end-of-text token
// (generation stops there: nothing after it is used), or else the target's token, of the round's kind.
static int round_end(const Round *r, const SpecParams *params, TokenKind *kind) {
    *kind = r->kind;
    for (int i = 0; i < r->n_accepted; i++)
        if (is_end_of_text(params, r->tokens[1 + i])) {
            *kind = TOKEN_ACCEPTED;
            return r->tokens[1 + i];
        }
    return r->next;
}

static void trace_round(FILE *f, int round, const Round *r, const SpecParams *params) {
    const bool coupled = params->sampler == SAMPLER_COUPLED;
    fprintf(f, "{\"round\": %d, \"gamma\": %d, \"drafted\": [", round, r->k);
    for (int i = 0; i < r->k; i++) fprintf(f, "%s%d", i ? ", " : "", r->tokens[1 + i]);
    const double *columns[3] = {r->p_x, r->q_x, coupled ? NULL : r->r};  // coupling draws no acceptance number
    const char *names[3] = {"p", "q", "r"};
    for (int c = 0; c < 3; c++) {
        if (!columns[c]) continue;
        fprintf(f, "], \"%s\": [", names[c]);
        for (int i = 0; i < r->k; i++) fprintf(f, "%s%.6g", i ? ", " : "", columns[c][i]);
    }
    static const char *const kind_names[] = {[TOKEN_ACCEPTED] = "accepted", [TOKEN_REJECTED] = "rejected",
                                             [TOKEN_RESAMPLED] = "resampled", [TOKEN_BONUS] = "bonus",
                                             [TOKEN_TARGET] = "target"};
    TokenKind kind;
    const int token = round_end(r, params, &kind);
    fprintf(f, "], \"accepted\": %d, \"token\": %d, \"kind\": \"%s\", \"residual_mass\": %.6g}\n", r->n_accepted,
            token, kind_names[kind], r->residual_mass);
}

// The committed tokens to --show's callback, as decided: a rejected draft is shown (never emitted) just before the
// correction that replaces it, as in the paper's Figure 1.
static void show_round(const SpecParams *params, const Round *r) {
    for (int i = 0; i < r->n_committed; i++) {
        if (i < r->n_accepted) {
            params->on_token(params->ctx, r->tokens[1 + i], TOKEN_ACCEPTED);
            continue;
        }
        if (r->kind == TOKEN_RESAMPLED) params->on_token(params->ctx, r->tokens[1 + i], TOKEN_REJECTED);
        params->on_token(params->ctx, r->next, r->kind);
    }
}

// A lookup run y_1.. found but not proposed: its first token would have been kept with probability p_1(y_1)
// (rejection sampling and coupling alike; 0 or 1 when greedy), which the round computed. Its later tokens were not
// verified, but the round's committed tokens c_1..c_j are the target's own samples, so while y_1..y_{i−1} =
// c_1..c_{i−1}, [y_i = c_i] stands in for the chance of keeping y_i (exactly when greedy; at a temperature, a
// sample of it — biased a little, as which positions a round commits depends on its drafts).
static void learn_unproposed_run(Scheduler *s, const Round *r) {
    const Drafter *d = s->drafter;
    learn_lookup_alpha(&s->g, d->match_length, 0, s->p[d->run[0]]);
    const int *committed = s->context + s->n - r->n_committed;
    for (int i = 1; i < d->n_run && i < r->n_committed && d->run[i - 1] == committed[i - 1]; i++)
        learn_lookup_alpha(&s->g, d->match_length, i, d->run[i] == committed[i]);
}

static void record_round(Scheduler *s, const Round *r) {
    SpecStats *st = s->stats;
    GammaState *g = &s->g;
    st->rounds++;
    st->drafted += r->k;
    st->accepted += r->n_accepted;
    st->plain_rounds += r->k == 0;
    st->one_hot_drafted += r->n_one_hot;
    st->one_hot_accepted += r->n_accepted < r->n_one_hot ? r->n_accepted : r->n_one_hot;
    st->target_seconds += r->target_seconds;
    s->gamma_sum += r->k;
    s->rounds_by_gamma[r->k]++;
    for (int i = 0; i < r->n_verified; i++) {
        st->sum_min_pq += r->overlap[i];
        st->n_min_pq++;
        s->alpha_sum += r->learned[i];
        if (i < r->n_one_hot) learn_lookup_alpha(g, s->drafter->match_length, i, r->learned[i]);
        else learn_alpha(g, SAMPLED, r->learned[i]);
    }
    if (s->drafter && s->drafter->n_run > 0 && !s->drafter->run_proposed) learn_unproposed_run(s, r);
    if (g->probing && r->k > 0 && r->n_one_hot == 0)  // the probe was made (not displaced by a lookup run)
        g->probe_misses = r->n_accepted ? 0 : g->probe_misses < 3 ? g->probe_misses + 1 : 3;
    running_mean(&g->target[r->k + 1], r->target_seconds);
    if (s->drafter) s->drafter->seconds += r->draft_seconds;
    if (r->draft_calls > 0) {
        running_mean(&g->draft_step, r->draft_seconds / r->draft_calls);
        g->draft_step_known = true;
    }
    if (s->params->policy == GAMMA_HEURISTIC) {
        g->heuristic_gamma += r->n_accepted == r->k && r->k > 0 ? 2 : -1;
        g->heuristic_gamma = g->heuristic_gamma < 1           ? 1
                             : g->heuristic_gamma > GAMMA_MAX ? GAMMA_MAX
                                                              : g->heuristic_gamma;
    }
    if (s->params->trace) trace_round(s->params->trace, st->rounds, r, s->params);
    if (s->params->on_token) show_round(s->params, r);
}

// The run's statistics, once the rounds are over.
static void finish_stats(Scheduler *s) {
    SpecStats *st = s->stats;
    st->draft_calls = s->drafter ? s->drafter->calls : 0;
    st->draft_seconds = s->drafter ? s->drafter->seconds : 0;
    st->target_t1_seconds = target_time(&s->g, 1);
    st->draft_step_seconds = s->g.draft_step;
    st->mean_gamma = st->rounds ? s->gamma_sum / st->rounds : 0;
    const double alpha = st->n_min_pq ? s->alpha_sum / st->n_min_pq : 0;
    for (int gamma = 0; gamma <= GAMMA_MAX; gamma++)
        st->expected_tokens += s->rounds_by_gamma[gamma] * spec_expected_tokens(alpha, gamma);
    const double forwards = st->target_seconds + st->draft_seconds;
    st->predicted_speedup = forwards > 0 ? st->expected_tokens * st->target_t1_seconds / forwards : 1.0;
}

static void scheduler_free(Scheduler *s) {
    sampler_free(&s->sampler);
    kv_free(&s->cache);
    rollback_check_free(&s->check);
    free(s->logits);
    free(s->p);
    free(s->q);
    free(s->residual);
    free(s->context);
}

static int scheduler_init(Scheduler *s, Model *target, Drafter *drafter, const int *prompt, int n_prompt,
                          const SpecParams *params, int *out, SpecStats *stats, Err *err) {
    const int V = target->n_vocab;
    *s = (Scheduler){.target = target, .drafter = drafter, .params = params, .V = V,
                     .n_ctx = target->cfg.n_positions, .n = n_prompt, .n_prompt = n_prompt, .out = out,
                     .stats = stats};
    if (sampler_init(&s->sampler, &params->sampling, V, target->kernels, err)) return -1;
    if (model_kv_init(target, &s->cache, err)) return -1;
    s->logits = malloc(sizeof(float) * (GAMMA_MAX + 1) * V);
    s->p = malloc(sizeof(double) * (GAMMA_MAX + 1) * V);
    s->q = malloc(sizeof(double) * GAMMA_MAX * V);
    s->residual = malloc(sizeof(double) * V);
    s->context = malloc(sizeof(int) * ((size_t)n_prompt + params->max_tokens));
    if (!s->logits || !s->p || !s->q || !s->residual || !s->context)
        return err_fmt(err, "out of memory for the scheduler's buffers");
    memcpy(s->context, prompt, sizeof(int) * n_prompt);
    GammaState *g = &s->g;
    *g = (GammaState){.heuristic_gamma = params->gamma,
                      .draft_step_known = drafter && drafter->step_cost == 0,
                      .modelled = drafter && params->policy == GAMMA_AUTO && params->sampler == SAMPLER_REJECTION &&
                                  params->sampling.temperature > 0};
    for (int source = 0; source < N_SOURCES; source++) g->alpha[source] = ALPHA_PRIOR;
    g->alpha[LOOKUP_NEXT] = ALPHA_NEXT_PRIOR;
    if (g->modelled) {
        g->model_draft_step = drafter->step_cost;
        for (int T = 1; T < T_SLOTS; T++) g->model_target[T] = spec_forward_cost(target, T);
    }
    return 0;
}

int speculative_generate(Model *target, Drafter *drafter, const int *prompt, int n_prompt,
                         const SpecParams *params, int *out, int *n_out, SpecStats *stats, Err *err) {
    *stats = (SpecStats){0};
    *n_out = 0;
    if (n_prompt < 1) return err_fmt(err, "the prompt is empty");
    if (n_prompt >= target->cfg.n_positions)
        return err_fmt(err, "the prompt has %d tokens but the model's context is %d positions, which leaves no room "
                       "to generate", n_prompt, target->cfg.n_positions);
    Scheduler s;
    int rc = -1;
    if (scheduler_init(&s, target, drafter, prompt, n_prompt, params, out, stats, err)) goto done;
    const double t_start = now_seconds();
    // Prefill all but the newest committed token (both models): each round's verify forward starts with it, and
    // its logits give p_1.
    if (n_prompt > 1 && model_forward(target, &s.cache, prompt, n_prompt - 1, s.logits, false, err)) goto done;
    if (n_prompt > 1 && drafter && drafter->prefill && drafter->prefill(drafter, prompt, n_prompt - 1, err)) goto done;
    const double t_decode = now_seconds();
    stats->prefill_seconds = t_decode - t_start;

    while (!s.done && stats->generated < params->max_tokens && s.cache.len < s.n_ctx) {
        Round r = {.gamma = next_gamma(&s)};
        const double t0 = now_seconds();
        if (draft(&s, &r, err)) goto done;
        const double t1 = now_seconds();
        if (verify(&s, &r, err)) goto done;
        r.draft_seconds = t1 - t0;
        r.target_seconds = now_seconds() - t1;
        accept_or_resample(&s, &r);
        if (commit_and_roll_back(&s, &r, err)) goto done;
        record_round(&s, &r);
    }
    *n_out = stats->generated;
    stats->decode_seconds = now_seconds() - t_decode;
    finish_stats(&s);
    rc = 0;
done:
    scheduler_free(&s);
    return rc;
}
