// test_tree_accept.c — one node of a token tree (src/speculative/tree.c): its children and the multi-draft accept /
// resample step.
//
//   - exact enumeration: for small V (3–6) and up to 4 children, every sequence of children the drafter can draw
//     (with its probability, from the test's own q_k) and every accept / reject outcome of tree_accept_given (its
//     numbers chosen at both sides of each threshold) add up to p within 1e-12 — independent children that repeat
//     tokens, children without replacement, one-hot children (repeats too), mixes, a proposal per child, p adjusted
//     by top-k / top-p (zeros), p = q, disjoint supports, a q whose support runs out, greedy p; the records (p_k(c),
//     q_k(c), β_k, residual mass) equal the test's own recursion;
//   - one child is the chain's rule (accept.c's accept_chain) bit for bit: its draws (spec_draw), its numbers and
//     its records;
//   - the siblings' random streams, the draws without replacement, and the sampled path end to end (drafter draws
//     and the accept step at width 3) against p by chi-square;
//   - coupling: the token is the target's Gumbel-max sample whatever the children, and the children are the
//     Gumbel top-W; greedy: the top-W children and the argmax's descent, and the step for a one-hot p without its
//     row (tree_accept_one_hot) is tree_accept's bit for bit;
//   - children described wrongly are refused.
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "speculative/accept.h"
#include "speculative/tree.h"

enum { V_MAX = 64 };

static const double EXACT = 1e-12;
static const double REJECT = 0x1.fffffffffffffp-1;  // the largest u < 1: rejects every child whose ratio is < 1

// A random distribution over [V] with n_zero exact zeros (fewer than V).
static void random_distribution(double *p, int V, int n_zero) {
    double sum = 0;
    for (int x = 0; x < V; x++) sum += p[x] = test_rand_uniform(0.01f, 1.0f) * (test_rand_int(0, 3) ? 1 : 20);
    for (int z = 0; z < n_zero; z++) {
        int x = test_rand_int(0, V - 1);
        sum -= p[x];
        p[x] = 0;
    }
    if (sum <= 0) p[0] = sum = 1;
    for (int x = 0; x < V; x++) p[x] /= sum;
}

static SpecParams params_for(SpecSampler sampler, uint64_t seed) {
    return (SpecParams){.sampling = {.temperature = 1, .top_p = 1}, .sampler = sampler, .seed = seed};
}

// ---- the test's own model of the drafts and of the rule ------------------------------------------------------

typedef enum { ONE_HOT, DRAWN, DRAWN_UNTRIED } Kind;

// How a child is drafted: one-hot at token, or drawn from q (independently, or without the earlier siblings' tokens).
typedef struct {
    Kind kind;
    int token;
    const double *q;
} Recipe;

// q_k(x) for a child drafted by r after the tokens tokens[0..k), by its definition; returns 0 when nothing is left to
// draw (without replacement, every token of q > 0 already tried): the drafter stops there.
static int oracle_proposal(long double *q_k, const Recipe *r, const int *tokens, int k, int V) {
    for (int x = 0; x < V; x++) q_k[x] = r->kind == ONE_HOT ? (x == r->token) : r->q[x];
    if (r->kind != DRAWN_UNTRIED) return 1;
    for (int j = 0; j < k; j++) q_k[tokens[j]] = 0;
    long double untried = 0;
    for (int x = 0; x < V; x++) untried += q_k[x];
    if (untried <= 0) return 0;
    for (int x = 0; x < V; x++) q_k[x] /= untried;
    return 1;
}

typedef struct {
    const char *label;
    const double *p;
    int V, m;
    const Recipe *recipes;
    long double out[V_MAX];     // P(the node emits x), summed over every draw and outcome
    long double drawn;          // Σ P(children) over the sequences enumerated: 1
    int sequences;
} Enumeration;

static double accept_probability(const TreeTried *t) { return t->q <= t->p ? 1.0 : t->p / t->q; }

// The records of children[0..n_tried) against the test's recursion p_{k+1} = norm(max(0, p_k − q_k)), and the
// residual the token is drawn from when every child is rejected.
static void check_records(const Enumeration *e, const TreeChild *children, const int *tokens, const TreeStep *step) {
    const int V = e->V;
    long double p_k[V_MAX], q_k[V_MAX];
    for (int x = 0; x < V; x++) p_k[x] = e->p[x];
    for (int k = 0; k < step->n_tried; k++) {
        const TreeTried *t = &step->tried[k];
        oracle_proposal(q_k, &e->recipes[k], tokens, k, V);
        long double overlap = 0, residual_mass = 0;
        for (int x = 0; x < V; x++) {
            overlap += p_k[x] < q_k[x] ? p_k[x] : q_k[x];
            residual_mass += p_k[x] > q_k[x] ? p_k[x] - q_k[x] : 0;
        }
        const int c = children[k].token;
        const bool rejected = k != step->accepted;
        CHECK(fabsl(t->p - p_k[c]) < EXACT && fabsl(t->q - q_k[c]) < EXACT && fabsl(t->overlap - overlap) < EXACT &&
                  fabsl(t->residual_mass - (rejected ? residual_mass : 0)) < EXACT,
              "%s: child %d (token %d): p %.17g q %.17g beta %.17g residual %.17g, want %.17Lg %.17Lg %.17Lg %.17Lg",
              e->label, k, c, t->p, t->q, t->overlap, t->residual_mass, p_k[c], q_k[c], overlap,
              rejected ? residual_mass : 0);
        if (!rejected) return;
        if (residual_mass > 0)
            for (int x = 0; x < V; x++) p_k[x] = (p_k[x] > q_k[x] ? p_k[x] - q_k[x] : 0) / residual_mass;
    }
    double sum = 0;
    for (int x = 0; x < V; x++) sum += step->residual[x];
    for (int x = 0; x < V; x++)
        CHECK(fabsl(step->residual[x] / sum - p_k[x]) < EXACT, "%s: residual[%d] = %.17g, want %.17Lg", e->label, x,
              step->residual[x] / sum, p_k[x]);
}

// One sequence of children, drawn with probability `drawn`: every outcome of the accept step, weighted.
// With every u just below 1 the step rejects each child it can; child k's outcome turns at u = its ratio, which is
// checked from both sides; the draw from the residual has the residual's law.
static void settle(Enumeration *e, const TreeChild *children, const int *tokens, int n, long double drawn) {
    static double scratch[3 * V_MAX];
    double u[TREE_WIDTH_MAX + 1];
    for (int k = 0; k <= n; k++) u[k] = REJECT;
    TreeStep step;
    Err err;
    e->sequences++;
    e->drawn += drawn;
    if (tree_accept_given(e->p, e->V, children, n, u, scratch, &step, &err)) {
        CHECK(0, "%s: %s", e->label, err.msg);
        return;
    }
    CHECK(step.accepted < 0 ? step.n_tried == n : step.accepted == step.n_tried - 1, "%s: accepted %d of %d tried",
          e->label, step.accepted, step.n_tried);
    check_records(e, children, tokens, &step);
    long double reach = drawn;  // P(children drawn, and the first k rejected)
    for (int k = 0; k < step.n_tried; k++) {
        const double a = accept_probability(&step.tried[k]);
        e->out[children[k].token] += reach * a;
        reach *= 1 - (long double)a;
        double v[TREE_WIDTH_MAX + 1];
        memcpy(v, u, sizeof v);
        const double below[2] = {0.0, nextafter(a, 0.0)}, at = a;
        for (int i = 0; i < 2 && a > 0; i++) {
            v[k] = below[i];
            TreeStep s;
            tree_accept_given(e->p, e->V, children, n, v, scratch, &s, &err);
            CHECK(s.accepted == k && s.token == children[k].token, "%s: u_%d = %.17g < %.17g, yet child %d kept", e->label,
                  k, v[k], a, s.accepted);
        }
        if (a < 1) {
            v[k] = at;
            TreeStep s;
            tree_accept_given(e->p, e->V, children, n, v, scratch, &s, &err);
            CHECK(s.accepted != k, "%s: u_%d = %.17g = its ratio, yet kept", e->label, k, at);
        }
    }
    if (step.accepted >= 0) {
        CHECK(reach == 0, "%s: child %d kept by u just below 1, but its ratio is < 1", e->label, step.accepted);
        return;
    }
    double sum = 0;
    for (int x = 0; x < e->V; x++) sum += step.residual[x];
    for (int x = 0; x < e->V; x++) e->out[x] += reach * step.residual[x] / sum;
    CHECK(step.residual[step.token] > 0, "%s: drew token %d of residual probability 0", e->label, step.token);
}

// Every sequence of children the recipes can draw, from child k on.
static void enumerate(Enumeration *e, TreeChild *children, int *tokens, int k, long double drawn) {
    static double scratch[V_MAX];
    long double q_k[V_MAX];
    if (k == e->m || !oracle_proposal(q_k, &e->recipes[k], tokens, k, e->V)) {
        settle(e, children, tokens, k, drawn);
        return;
    }
    const Recipe *r = &e->recipes[k];
    for (int x = 0; x < e->V; x++) {
        if (q_k[x] <= 0) continue;
        tokens[k] = x;
        children[k] = r->kind == ONE_HOT ? tree_one_hot_child(x)
                                         : tree_drawn_child(r->q, x, r->kind == DRAWN_UNTRIED, children, k, e->V, scratch);
        enumerate(e, children, tokens, k + 1, drawn * q_k[x]);
    }
}

// The node's token is distributed as p, exactly: Σ over sequences and outcomes = p within 1e-12.
static void check_exact(const char *label, const double *p, int V, const Recipe *recipes, int m) {
    Enumeration e = {.label = label, .p = p, .V = V, .m = m, .recipes = recipes};
    TreeChild children[TREE_WIDTH_MAX];
    int tokens[TREE_WIDTH_MAX];
    enumerate(&e, children, tokens, 0, 1.0L);
    CHECK(fabsl(e.drawn - 1) < EXACT, "%s: the children's sequences have total probability %.17Lg", label, e.drawn);
    for (int x = 0; x < V; x++)
        CHECK(fabsl(e.out[x] - p[x]) < EXACT, "%s: P(token %d) = %.17Lg, want p = %.17g (%d sequences)", label, x,
              e.out[x], p[x], e.sequences);
}

// A random instance: V in 3..6, m in 1..4 children of the given kinds (kind < 0: each at random), each drawn child
// from q or, with own_q, from a distribution of its own; p and q with some zeros.
static void check_random_instances(const char *name, int kind, bool own_q) {
    for (int trial = 0; trial < 40; trial++) {
        const int V = test_rand_int(3, 6), m = test_rand_int(1, 4);
        double p[V_MAX], q[TREE_WIDTH_MAX][V_MAX];
        Recipe recipes[TREE_WIDTH_MAX];
        random_distribution(p, V, test_rand_int(0, V / 2));
        for (int k = 0; k < m; k++) {
            if (k == 0 || own_q) random_distribution(q[k], V, test_rand_int(0, V - 1));
            const Kind kd = kind >= 0 ? (Kind)kind : (Kind)test_rand_int(0, 2);
            recipes[k] = (Recipe){kd, test_rand_int(0, V - 1), own_q ? q[k] : q[0]};
        }
        char label[96];
        snprintf(label, sizeof label, "%s, V %d, %d children, trial %d", name, V, m, trial);
        check_exact(label, p, V, recipes, m);
    }
}

TEST(tree_accept_exact_independent_children_repeating_tokens) { check_random_instances("i.i.d. from q", DRAWN, false); }

TEST(tree_accept_exact_children_without_replacement) { check_random_instances("without replacement", DRAWN_UNTRIED, false); }

TEST(tree_accept_exact_one_hot_children) { check_random_instances("one-hot", ONE_HOT, false); }

TEST(tree_accept_exact_mixed_children) {
    check_random_instances("mixed kinds, one q", -1, false);
    check_random_instances("mixed kinds, a q per child", -1, true);
    // one-hot first (a lookup branch, greedy top children), then sampled; and sampled, then one-hot
    enum { V = 5 };
    const double p[V] = {0.1, 0.35, 0.05, 0.3, 0.2}, q[V] = {0.4, 0.1, 0.3, 0.2, 0.0};
    const Recipe one_hot_then_sampled[4] = {{ONE_HOT, 3, NULL}, {ONE_HOT, 0, NULL}, {DRAWN_UNTRIED, 0, q}, {DRAWN, 0, q}};
    check_exact("one-hot 3, one-hot 0, then q without replacement, then q", p, V, one_hot_then_sampled, 4);
    const Recipe sampled_then_one_hot[3] = {{DRAWN_UNTRIED, 0, q}, {DRAWN_UNTRIED, 0, q}, {ONE_HOT, 4, NULL}};
    check_exact("q twice without replacement, then one-hot 4 (q(4) = 0)", p, V, sampled_then_one_hot, 3);
    const Recipe repeated_one_hot[3] = {{ONE_HOT, 1, NULL}, {ONE_HOT, 1, NULL}, {DRAWN, 0, q}};
    check_exact("one-hot 1 twice, then q", p, V, repeated_one_hot, 3);
}

// p and q as the sampler makes them: top-k and top-p zero the tail (ties at the k-th logit kept).
TEST(tree_accept_exact_top_k_top_p_adjusted) {
    int n_kernels;
    const Kernels *kernels = kernels_available(&n_kernels)[0];
    const SamplingParams target_settings[3] = {{1.0f, 2, 1.0f, 0}, {0.8f, 0, 0.7f, 0}, {1.3f, 3, 0.9f, 0}};
    const SamplingParams draft_settings[3] = {{1.0f, 3, 1.0f, 0}, {1.0f, 0, 0.8f, 0}, {0.7f, 0, 1.0f, 0}};
    for (int trial = 0; trial < 12; trial++) {
        const int V = test_rand_int(4, 6), m = test_rand_int(2, 4), s = trial % 3;
        float target_logits[V_MAX], draft_logits[V_MAX];
        for (int x = 0; x < V; x++) {
            target_logits[x] = (float)test_rand_int(-4, 4) * 0.5f;  // ties, which top-k keeps together
            draft_logits[x] = target_logits[x] + test_rand_uniform(-1, 1);
        }
        double p[V_MAX], q[V_MAX];
        Sampler target, draft;
        Err err;
        CHECK(sampler_init(&target, &target_settings[s], V, kernels, &err) == 0, "%s", err.msg);
        CHECK(sampler_init(&draft, &draft_settings[s], V, kernels, &err) == 0, "%s", err.msg);
        sampler_adjust(&target, p, target_logits);
        sampler_adjust(&draft, q, draft_logits);
        sampler_free(&target);
        sampler_free(&draft);
        const Kind kinds[3] = {DRAWN, DRAWN_UNTRIED, ONE_HOT};
        Recipe recipes[TREE_WIDTH_MAX];
        for (int k = 0; k < m; k++) recipes[k] = (Recipe){kinds[(trial / 3 + k) % 3], test_rand_int(0, V - 1), q};
        char label[64];
        snprintf(label, sizeof label, "top-k / top-p, trial %d", trial);
        check_exact(label, p, V, recipes, m);
    }
}

TEST(tree_accept_exact_edge_cases) {
    enum { V = 4 };
    const double p[V] = {0.4, 0.3, 0.2, 0.1}, disjoint[V] = {0, 0, 0.25, 0.75}, p_left[V] = {0.6, 0.4, 0, 0},
                 greedy[V] = {0, 0, 1, 0}, one_token[V] = {0, 1, 0, 0};
    const Recipe same[3] = {{DRAWN, 0, p}, {DRAWN, 0, p}, {DRAWN, 0, p}};
    check_exact("p = q, i.i.d.", p, V, same, 3);
    const Recipe same_untried[4] = {{DRAWN_UNTRIED, 0, p}, {DRAWN_UNTRIED, 0, p}, {DRAWN_UNTRIED, 0, p},
                                    {DRAWN_UNTRIED, 0, p}};
    check_exact("p = q, without replacement, every token", p, V, same_untried, 4);
    const Recipe off[3] = {{DRAWN, 0, disjoint}, {DRAWN_UNTRIED, 0, disjoint}, {DRAWN_UNTRIED, 0, disjoint}};
    check_exact("disjoint supports", p_left, V, off, 3);
    check_exact("q's support runs out (2 tokens, 3 children)", p, V, off, 3);
    const Recipe greedy_children[3] = {{ONE_HOT, 1, NULL}, {ONE_HOT, 2, NULL}, {ONE_HOT, 3, NULL}};
    check_exact("greedy p, one-hot children", greedy, V, greedy_children, 3);
    const Recipe one_hot_rows[2] = {{DRAWN_UNTRIED, 0, one_token}, {DRAWN_UNTRIED, 0, p}};
    check_exact("greedy p, a one-hot q row", greedy, V, one_hot_rows, 2);
    check_exact("no children: p itself", p, V, same, 0);
}

// ---- one child: the chain's rule (accept_chain), bit for bit ---------------------------------------------------

TEST(tree_one_child_is_the_chain_rule) {
    static double scratch[3 * V_MAX];
    int kept = 0, rejected = 0;
    for (int trial = 0; trial < 4000; trial++) {
        const int V = test_rand_int(2, V_MAX), position = test_rand_int(0, 5000);
        const SpecSampler sampler = trial % 4 == 3 ? SAMPLER_COUPLED : SAMPLER_REJECTION;
        const SpecParams params = params_for(sampler, test_rand_u64());
        double p[V_MAX], q[V_MAX];
        random_distribution(p, V, test_rand_int(0, V - 1));
        random_distribution(q, V, test_rand_int(0, V - 1));
        const bool one_hot = trial % 3 == 0, without_replacement = trial % 2;
        // The draft, as the chain draws it; tree_draw_child gives the same token.
        const int x = one_hot ? test_rand_int(0, V - 1) : spec_draw(&params, q, V, position, DRAW_DRAFT);
        TreeChild child;
        if (!one_hot) {
            const int drawn = tree_draw_child(&params, q, V, position, without_replacement, &child, 0, scratch);
            CHECK(drawn == x, "child 0 is %d, spec_draw(DRAW_DRAFT) %d", drawn, x);
        } else {
            child = tree_one_hot_child(x);
        }
        static double residual[V_MAX];
        const ChainStep want = accept_chain(&params, p, one_hot ? NULL : q, x, V, position, residual);
        TreeStep step;
        Err err;
        CHECK(tree_accept(&params, p, V, position, &child, 1, scratch, &step, &err) == 0, "%s", err.msg);
        const TreeTried *t = &step.tried[0];
        const bool keep = want.kept;
        kept += keep, rejected += !keep;
        CHECK(step.n_tried == 1 && step.accepted == (keep ? 0 : -1) && step.token == want.token,
              "trial %d: token %d (child %d kept), chain %d", trial, step.token, step.accepted, want.token);
        CHECK(t->p == want.p_x && t->q == want.q_x && t->u == want.r && t->overlap == want.overlap &&
                  t->residual_mass == want.residual_mass,
              "trial %d: the record (p %.17g q %.17g u %.17g beta %.17g residual %.17g) differs from the chain's "
              "(%.17g %.17g %.17g %.17g %.17g)", trial, t->p, t->q, t->u, t->overlap, t->residual_mass, want.p_x,
              want.q_x, want.r, want.overlap, want.residual_mass);
        // No children: the bonus token, spec_draw(DRAW_TARGET).
        CHECK(tree_accept(&params, p, V, position, NULL, 0, scratch, &step, &err) == 0, "%s", err.msg);
        CHECK(step.token == spec_draw(&params, p, V, position, DRAW_TARGET) && step.accepted == -1 && step.n_tried == 0,
              "trial %d: no children gives %d, the chain's bonus %d", trial, step.token,
              spec_draw(&params, p, V, position, DRAW_TARGET));
    }
    CHECK(kept > 500 && rejected > 500, "both outcomes should occur: %d kept, %d rejected", kept, rejected);
}

// ---- the random streams and the draws ---------------------------------------------------------------------

// Sibling k's numbers: stream 2^32 + 256·k + purpose (sibling 0's is the chain's). Child n without replacement is
// the inverse-CDF draw from q without the earlier siblings' tokens with its own number; with replacement, from q.
TEST(tree_siblings_draw_with_streams_of_their_own) {
    static double scratch[3 * V_MAX];
    for (int trial = 0; trial < 500; trial++) {
        const int V = test_rand_int(3, V_MAX), position = test_rand_int(0, 100000), width = test_rand_int(1, 6);
        const SpecParams params = params_for(SAMPLER_REJECTION, test_rand_u64());
        double q[V_MAX], masked[V_MAX];
        random_distribution(q, V, test_rand_int(0, V - 2));
        const bool without_replacement = trial % 2;
        TreeChild children[TREE_WIDTH_MAX];
        memcpy(masked, q, sizeof masked);
        int n = 0;
        for (; n < width; n++) {
            double left = 0;
            for (int x = 0; x < V; x++) left += masked[x];
            const int token = tree_draw_child(&params, q, V, position, without_replacement, children, n, scratch);
            if (without_replacement && left <= 0) {
                CHECK(token == -1, "child %d drawn (%d) from an exhausted q", n, token);
                break;
            }
            const double u = random_uniform(params.seed, (uint64_t)position, (1ULL << 32) + 256 * (uint64_t)n + DRAW_DRAFT);
            const int want = sampling_draw(without_replacement ? masked : q, V, u);
            CHECK(token == want, "child %d: %d, want %d", n, token, want);
            if (without_replacement) {
                for (int j = 0; j < n; j++) CHECK(children[j].token != token, "child %d repeats child %d", n, j);
                masked[token] = 0;
            }
        }
        TreeStep step;
        Err err;
        // Every child rejected: a p uniform over the tokens of q = 0, which no child has.
        double none[V_MAX] = {0}, n_none = 0;
        for (int x = 0; x < V; x++) n_none += none[x] = q[x] > 0 ? 0 : 1;
        if (n == 0 || n_none == 0) continue;
        for (int x = 0; x < V; x++) none[x] /= n_none;
        CHECK(tree_accept(&params, none, V, position, children, n, scratch, &step, &err) == 0, "%s", err.msg);
        CHECK(step.accepted == -1 && step.n_tried == n, "%d of %d tried, %d kept", step.n_tried, n, step.accepted);
        for (int k = 0; k < step.n_tried; k++)
            CHECK(step.tried[k].u == random_uniform(params.seed, (uint64_t)position,
                                                     (1ULL << 32) + 256 * (uint64_t)k + DRAW_ACCEPT),
                  "child %d's acceptance number is not its stream's", k);
        CHECK(step.token == sampling_draw(step.residual, V, random_uniform(params.seed, (uint64_t)position,
                                                                            (1ULL << 32) + DRAW_RESIDUAL)),
              "the residual's token is not drawn with the chain's residual number");
    }
}

// The sampled path end to end — the drafter's draws at width 3 and the accept step, at N positions of one seed —
// emits p: chi-square at false-alarm rate 1e-4 per call.
static void check_sampled_path(const char *label, const double *p, const double *q, int V, const Kind *kinds) {
    enum { N = 100000, WIDTH = 3 };
    static double scratch[3 * V_MAX];
    const SpecParams params = params_for(SAMPLER_REJECTION, test_rand_u64());
    float log_q[V_MAX];
    for (int x = 0; x < V; x++) log_q[x] = q[x] > 0 ? logf((float)q[x]) : -INFINITY;
    long counts[V_MAX] = {0};
    int kept = 0;
    for (int position = 0; position < N; position++) {
        TreeChild children[WIDTH];
        int n = 0;
        for (int k = 0; k < WIDTH; k++) {
            if (kinds[k] == ONE_HOT) {  // the draft's k-th most likely token
                TreeChild top[WIDTH];
                if (tree_top_children(log_q, V, k + 1, top) == k + 1) children[n++] = top[k];
            } else if (tree_draw_child(&params, q, V, position, kinds[k] == DRAWN_UNTRIED, children, n, scratch) >= 0) {
                n++;
            }
        }
        TreeStep step;
        Err err;
        if (tree_accept(&params, p, V, position, children, n, scratch, &step, &err)) {
            CHECK(0, "%s: %s", label, err.msg);
            return;
        }
        counts[step.token]++;
        kept += step.accepted >= 0;
    }
    double chi2 = 0;
    int cells = 0;
    for (int x = 0; x < V; x++) {
        if (p[x] > 0) chi2 += (counts[x] - N * p[x]) * (counts[x] - N * p[x]) / (N * p[x]), cells++;
        else CHECK(counts[x] == 0, "%s: token %d of probability 0 emitted %ld times", label, x, counts[x]);
    }
    printf("    %-44s chi2 = %5.1f over %d cells (critical %.1f); a child kept at %d of %d\n", label, chi2, cells,
           chi_square_critical(cells - 1), kept, N);
    CHECK(chi2 < chi_square_critical(cells - 1), "%s: chi-square %.1f exceeds %.1f", label, chi2,
          chi_square_critical(cells - 1));
}

TEST(tree_sampled_path_chi_square_width_3) {
    enum { V = 6 };
    const double p[V] = {0.3, 0.05, 0.25, 0.15, 0.0, 0.25}, q[V] = {0.1, 0.45, 0.2, 0.05, 0.15, 0.05};
    check_sampled_path("without replacement", p, q, V, (const Kind[]){DRAWN_UNTRIED, DRAWN_UNTRIED, DRAWN_UNTRIED});
    check_sampled_path("i.i.d.", p, q, V, (const Kind[]){DRAWN, DRAWN, DRAWN});
    check_sampled_path("top-1 one-hot, then without replacement", p, q, V,
                       (const Kind[]){ONE_HOT, DRAWN_UNTRIED, DRAWN_UNTRIED});
    check_sampled_path("greedy top-3 one-hot", p, q, V, (const Kind[]){ONE_HOT, ONE_HOT, ONE_HOT});
}

// ---- coupling ---------------------------------------------------------------------------------------------

// The Gumbel top-W of q at a position, by the full race: the tokens of q > 0 (bar `skip`, −1 for none) sorted by
// E_x / q(x), the lower id first on a tie.
static int race_order(int *order, const double *q, int V, uint64_t seed, int position, int skip) {
    double time[V_MAX];
    int n = 0;
    for (int x = 0; x < V; x++) {
        if (!(q[x] > 0) || x == skip) continue;
        time[x] = -log(random_open_uniform(seed, (uint64_t)position, (uint64_t)x)) / q[x];
        int i = n++;
        for (; i > 0 && time[x] < time[order[i - 1]]; i--) order[i] = order[i - 1];
        order[i] = x;
    }
    return n;
}

TEST(tree_coupled_children_are_the_gumbel_top_w) {
    static double scratch[V_MAX];
    for (int trial = 0; trial < 1000; trial++) {
        const int V = test_rand_int(2, V_MAX), position = test_rand_int(0, 100000), width = test_rand_int(1, 5);
        const SpecParams params = params_for(SAMPLER_COUPLED, test_rand_u64());
        double q[V_MAX];
        random_distribution(q, V, test_rand_int(0, V - 1));
        // With a lookup's one-hot child first (half the trials), the race runs without its token.
        const int lookup = trial % 2 ? test_rand_int(0, V - 1) : -1;
        TreeChild children[TREE_WIDTH_MAX];
        int n = 0;
        if (lookup >= 0) children[n++] = tree_one_hot_child(lookup);
        int order[V_MAX];
        const int n_race = race_order(order, q, V, params.seed, position, lookup);
        for (int k = 0; k < width; k++, n++) {
            const int token = tree_draw_child(&params, q, V, position, true, children, n, scratch);
            if (k >= n_race) {
                CHECK(token == -1, "child %d drawn (%d) after the race's %d tokens", k, token, n_race);
                break;
            }
            CHECK(token == order[k], "trial %d: child %d is %d, the race's %d-th token is %d", trial, k, token, k,
                  order[k]);
        }
        if (lookup < 0)
            CHECK(children[0].token == sampling_gumbel_max(q, V, params.seed, (uint64_t)position),
                  "child 0 is not the chain's coupled draft");
    }
}

TEST(tree_coupled_token_is_the_targets_whatever_the_children) {
    static double scratch[V_MAX];
    int kept = 0;
    for (int trial = 0; trial < 3000; trial++) {
        const int V = test_rand_int(2, V_MAX), position = test_rand_int(0, 100000), n = test_rand_int(0, 5);
        const SpecParams params = params_for(SAMPLER_COUPLED, test_rand_u64());
        double p[V_MAX], q[V_MAX];
        random_distribution(p, V, test_rand_int(0, V - 1));
        random_distribution(q, V, test_rand_int(0, V - 1));
        TreeChild children[TREE_WIDTH_MAX];
        int m = 0;
        for (int k = 0; k < n; k++) {
            const int kind = test_rand_int(0, 2);
            if (kind == ONE_HOT) children[m++] = tree_one_hot_child(test_rand_int(0, V - 1));
            else if (tree_draw_child(&params, q, V, position, kind == DRAWN_UNTRIED, children, m, scratch) >= 0) m++;
        }
        TreeStep step;
        Err err;
        CHECK(tree_accept(&params, p, V, position, children, m, scratch, &step, &err) == 0, "%s", err.msg);
        const int t = sampling_gumbel_max(p, V, params.seed, (uint64_t)position);
        int first = -1;
        for (int k = m - 1; k >= 0; k--) first = children[k].token == t ? k : first;
        CHECK(step.token == t && step.accepted == first && step.n_tried == (first >= 0 ? first + 1 : m),
              "trial %d: token %d (child %d kept, %d tried), the target's %d (child %d)", trial, step.token,
              step.accepted, step.n_tried, t, first);
        for (int k = 0; k < step.n_tried; k++)
            CHECK(step.tried[k].p == p[children[k].token] && step.tried[k].u == 0,
                  "trial %d: child %d's record under coupling", trial, k);
        kept += first >= 0;
    }
    CHECK(kept > 300, "a child should often be the target's token: %d of 3000", kept);
}

// ---- greedy ---------------------------------------------------------------------------------------------

TEST(tree_top_children_rank_by_logit_lower_id_first) {
    for (int trial = 0; trial < 1000; trial++) {
        const int V = test_rand_int(1, V_MAX), width = test_rand_int(1, 6);
        float logits[V_MAX];
        for (int x = 0; x < V; x++) logits[x] = test_rand_int(0, 9) ? (float)test_rand_int(-3, 3) : -INFINITY;
        logits[test_rand_int(0, V - 1)] = (float)test_rand_int(-3, 3);  // one finite logit at least
        TreeChild children[TREE_WIDTH_MAX];
        const int n = tree_top_children(logits, V, width, children);
        // The oracle: selection by (logit descending, id ascending).
        bool taken[V_MAX] = {0};
        int finite = 0;
        for (int x = 0; x < V; x++) finite += logits[x] > -INFINITY;
        CHECK(n == (width < finite ? width : finite), "%d children of %d finite logits at width %d", n, finite, width);
        for (int k = 0; k < n; k++) {
            int best = -1;
            for (int x = 0; x < V; x++)
                if (!taken[x] && logits[x] > -INFINITY && (best < 0 || logits[x] > logits[best])) best = x;
            taken[best] = true;
            CHECK(children[k].token == best && !children[k].q && children[k].q_token == 1,
                  "trial %d: child %d is %d, want %d", trial, k, children[k].token, best);
        }
        int n_kernels;
        const Kernels *best = kernels_available(&n_kernels)[n_kernels - 1];
        CHECK(children[0].token == sampling_greedy(best, logits, V), "child 0 is not the draft's argmax");
    }
}

// At temperature 0 the node descends into the first child equal to the target's argmax, else emits it, whatever
// the seed — for one-hot children and for the one-hot q rows the draft's sampler gives.
TEST(tree_greedy_descends_into_the_argmax) {
    static double scratch[3 * V_MAX];
    int n_kernels;
    const Kernels *kernels = kernels_available(&n_kernels)[0];
    const SamplingParams greedy = {0, 0, 1, 0};
    for (int trial = 0; trial < 2000; trial++) {
        const int V = test_rand_int(2, V_MAX), position = test_rand_int(0, 100000);
        const SpecParams params = params_for(trial % 2 ? SAMPLER_COUPLED : SAMPLER_REJECTION, test_rand_u64());
        float target_logits[V_MAX], draft_logits[V_MAX];
        for (int x = 0; x < V; x++) {
            target_logits[x] = (float)test_rand_int(-3, 3);
            draft_logits[x] = test_rand_int(0, 1) ? target_logits[x] : (float)test_rand_int(-3, 3);
        }
        double p[V_MAX], q[V_MAX];
        Sampler s;
        Err err;
        CHECK(sampler_init(&s, &greedy, V, kernels, &err) == 0, "%s", err.msg);
        sampler_adjust(&s, p, target_logits);
        sampler_adjust(&s, q, draft_logits);
        sampler_free(&s);
        TreeChild children[TREE_WIDTH_MAX];
        const int width = test_rand_int(1, 4);
        int n = tree_top_children(draft_logits, V, width, children);
        if (trial % 3 == 0) {  // the chain's greedy draft: q's one-hot row; without replacement it has no sibling
            n = 0;
            CHECK(tree_draw_child(&params, q, V, position, true, children, n++, scratch) ==
                      sampling_greedy(kernels, draft_logits, V),
                  "the draft's greedy token");
            CHECK(tree_draw_child(&params, q, V, position, true, children, n, scratch) == -1,
                  "a one-hot q has a second token");
        }
        TreeStep step;
        CHECK(tree_accept(&params, p, V, position, children, n, scratch, &step, &err) == 0, "%s", err.msg);
        const int t = sampling_greedy(kernels, target_logits, V);
        int first = -1;
        for (int k = n - 1; k >= 0; k--) first = children[k].token == t ? k : first;
        CHECK(step.token == t && step.accepted == first, "trial %d: token %d (child %d), want %d (child %d)", trial,
              step.token, step.accepted, t, first);
    }
}

// tree_accept_one_hot is tree_accept for the one-hot p at t, bit for bit (step.residual aside), under both rules:
// children one-hot (t among them or not, repeats), drawn from a random q with and without replacement (q_k(t)
// anywhere in [0, 1]: β_k and the residual masses are exercised), and drawn from a greedy one-hot q row.
TEST(tree_accept_one_hot_is_tree_accept_for_a_one_hot_p) {
    static double scratch[3 * V_MAX];
    int kept = 0, emitted = 0, sampled_tried = 0;
    for (int trial = 0; trial < 4000; trial++) {
        const int V = test_rand_int(2, V_MAX), position = test_rand_int(0, 100000), n = test_rand_int(0, 5);
        const SpecParams params = params_for(trial % 2 ? SAMPLER_COUPLED : SAMPLER_REJECTION, test_rand_u64());
        const int t = test_rand_int(0, V - 1);
        double p[V_MAX] = {0}, q[V_MAX], greedy_q[V_MAX] = {0};
        p[t] = 1.0;
        random_distribution(q, V, test_rand_int(0, V - 1));
        greedy_q[test_rand_int(0, 2) ? test_rand_int(0, V - 1) : t] = 1.0;
        TreeChild children[TREE_WIDTH_MAX];
        int m = 0;
        for (int k = 0; k < n; k++) {
            const int kind = test_rand_int(0, 3);
            const int token = test_rand_int(0, 3) ? test_rand_int(0, V - 1) : t;
            const double *row = kind == 3 ? greedy_q : q;
            if (kind == ONE_HOT) children[m++] = tree_one_hot_child(token);
            else if (tree_draw_child(&params, row, V, position, kind == DRAWN_UNTRIED, children, m, scratch) >= 0) m++;
        }
        TreeStep want, got;
        Err err;
        CHECK(tree_accept(&params, p, V, position, children, m, scratch, &want, &err) == 0, "%s", err.msg);
        CHECK(tree_accept_one_hot(&params, t, V, position, children, m, scratch, &got, &err) == 0, "%s", err.msg);
        CHECK(got.token == want.token && got.accepted == want.accepted && got.n_tried == want.n_tried,
              "trial %d: token %d (child %d kept, %d tried), tree_accept's %d (%d, %d)", trial, got.token,
              got.accepted, got.n_tried, want.token, want.accepted, want.n_tried);
        for (int k = 0; k < got.n_tried && k < want.n_tried; k++) {
            const TreeTried *a = &got.tried[k], *b = &want.tried[k];
            CHECK(a->p == b->p && a->q == b->q && a->u == b->u && a->overlap == b->overlap &&
                      a->residual_mass == b->residual_mass,
                  "trial %d, child %d: (p %.17g q %.17g u %.17g beta %.17g residual %.17g), tree_accept's (%.17g "
                  "%.17g %.17g %.17g %.17g)", trial, k, a->p, a->q, a->u, a->overlap, a->residual_mass, b->p, b->q,
                  b->u, b->overlap, b->residual_mass);
            sampled_tried += children[k].q == q;
        }
        kept += want.accepted >= 0;
        emitted += want.accepted < 0 && m > 0;
    }
    CHECK(kept > 500 && emitted > 500 && sampled_tried > 500, "kept %d, every child rejected %d, children from q "
          "tried %d", kept, emitted, sampled_tried);
    TreeStep step;
    Err err;
    const TreeChild child = tree_one_hot_child(0);
    const SpecParams params = params_for(SAMPLER_REJECTION, 1);
    CHECK(tree_accept_one_hot(&params, 4, 4, 0, &child, 1, scratch, &step, &err) == -1 &&
              strstr(err.msg, "outside"),
          "a target token outside the vocabulary is accepted: %s", err.msg);
}

// ---- children described wrongly ---------------------------------------------------------------------------

TEST(tree_accept_refuses_children_described_wrongly) {
    enum { V = 5 };
    static double scratch[3 * V];
    const double p[V] = {0.2, 0.2, 0.2, 0.2, 0.2};
    double q[V] = {0.5, 0.2, 0.1, 0.1, 0.1};
    const double u[TREE_WIDTH_MAX + 1] = {REJECT, REJECT, REJECT, REJECT, REJECT};
    const SpecParams params = params_for(SAMPLER_REJECTION, 7);
    TreeStep step;
    Err err;
    TreeChild children[TREE_WIDTH_MAX + 1];
    children[0] = tree_drawn_child(q, 0, true, NULL, 0, V, scratch);
    children[1] = tree_drawn_child(q, 1, true, children, 1, V, scratch);
    CHECK(tree_accept_given(p, V, children, 2, u, scratch, &step, &err) == 0, "%s", err.msg);

    TreeChild flag = children[1];  // drawn without replacement, described as with
    flag.without_replacement = false;
    TreeChild wrong[2] = {children[0], flag};
    CHECK(tree_accept_given(p, V, wrong, 2, u, scratch, &step, &err) == -1 && strstr(err.msg, "child 1"),
          "a wrong replacement flag is accepted: %s", err.msg);
    q[0] = 0.4, q[1] = 0.3;  // the row overwritten after the draw
    CHECK(tree_accept_given(p, V, children, 2, u, scratch, &step, &err) == -1 && strstr(err.msg, "changed after"),
          "an overwritten q row is accepted: %s", err.msg);
    q[0] = 0.5, q[1] = 0.2;
    TreeChild out_of_range = tree_one_hot_child(V), flagged = tree_one_hot_child(1);
    flagged.without_replacement = true;
    CHECK(tree_accept_given(p, V, &out_of_range, 1, u, scratch, &step, &err) == -1 && strstr(err.msg, "outside"),
          "a token outside the vocabulary is accepted: %s", err.msg);
    CHECK(tree_accept_given(p, V, &flagged, 1, u, scratch, &step, &err) == -1 && strstr(err.msg, "one-hot"),
          "a one-hot child marked without replacement is accepted: %s", err.msg);
    for (int k = 0; k <= TREE_WIDTH_MAX; k++) children[k] = tree_one_hot_child(k % V);
    CHECK(tree_accept(&params, p, V, 0, children, TREE_WIDTH_MAX + 1, scratch, &step, &err) == -1 &&
              strstr(err.msg, "at most"),
          "%d children are accepted: %s", TREE_WIDTH_MAX + 1, err.msg);
}
