// tree.c — a node's children and the multi-draft accept / resample step (tree.h).
#include "speculative/tree.h"

#include <math.h>
#include <string.h>

#include "model/model.h"
#include "speculative/accept.h"

// ---- a child's proposal ----------------------------------------------------------------------------------------

// The proposal of a child drawn from q after its siblings earlier[0..n), as a row and its mass: q itself (mass 1)
// when it is drawn with replacement or is the first child, else q with the earlier siblings' tokens set to 0, in
// buffer, and its remaining mass Σ — q_n = row / mass. The drafter's draw and the accept step both read q_n from
// here, so that they agree to the last bit.
static const double *proposal_row(const double *q, bool without_replacement, const TreeChild *earlier, int n, int V,
                                  double *buffer, double *mass) {
    *mass = 1.0;
    if (!without_replacement || n == 0) return q;
    memcpy(buffer, q, sizeof(double) * V);
    for (int j = 0; j < n; j++) buffer[earlier[j].token] = 0.0;
    *mass = sampling_sum(buffer, V);
    return buffer;
}

TreeChild tree_one_hot_child(int token) { return (TreeChild){.token = token, .q_token = 1.0}; }

// children[n], token, drawn from the proposal row / mass.
static TreeChild child_of(const double *q, bool without_replacement, int token, const double *row, double mass) {
    return (TreeChild){.token = token, .q = q, .without_replacement = without_replacement, .q_token = row[token] / mass};
}

TreeChild tree_drawn_child(const double *q, int token, bool without_replacement, const TreeChild *children, int n,
                           int V, double *scratch) {
    double mass;
    const double *row = proposal_row(q, without_replacement, children, n, V, scratch, &mass);
    return child_of(q, without_replacement, token, row, mass);
}

int tree_draw_child(const SpecParams *params, const double *q, int V, int position, bool without_replacement,
                    TreeChild *children, int n, double *scratch) {
    double mass;
    const double *row = proposal_row(q, without_replacement, children, n, V, scratch, &mass);
    if (!(mass > 0.0)) return -1;
    // The race over the untried tokens of q is q's own race with the tried tokens taken out: no renormalising,
    // which would round the race's times.
    const int token = params->sampler == SAMPLER_COUPLED
                          ? sampling_gumbel_max(row, V, params->seed, (uint64_t)position)
                          : sampling_draw(row, V, spec_uniform(params, position, DRAW_DRAFT, n));
    children[n] = child_of(q, without_replacement, token, row, mass);
    return token;
}

int tree_top_children(const float *logits, int V, int width, TreeChild *children) {
    int ids[TREE_WIDTH_MAX];
    const int n = width < 1 ? 0 : model_top_logits(ids, logits, V, width < TREE_WIDTH_MAX ? width : TREE_WIDTH_MAX);
    for (int k = 0; k < n; k++) children[k] = tree_one_hot_child(ids[k]);
    return n;
}

// ---- the accept / resample step --------------------------------------------------------------------------------

// Child k's proposal q_k, checked against its description: the row it was drawn from and its mass, q_k = row / mass
// (row NULL for a one-hot child; in buffer when drawn without replacement after earlier siblings). Returns
// q_k(c_k), or −1 with err set.
static double child_proposal(const TreeChild *children, int k, int V, double *buffer, const double **row,
                             double *mass, Err *err) {
    const TreeChild *c = &children[k];
    *row = NULL;
    *mass = 1.0;
    if (c->token < 0 || c->token >= V)
        return err_fmt(err, "tree: child %d has token %d, outside the vocabulary [0, %d)", k, c->token, V);
    if (!c->q && c->without_replacement)
        return err_fmt(err, "tree: child %d (token %d) is one-hot but marked as drawn without replacement", k, c->token);
    *row = c->q ? proposal_row(c->q, c->without_replacement, children, k, V, buffer, mass) : NULL;
    const double q_token = *row ? (*row)[c->token] / *mass : 1.0;
    if (!(q_token > 0.0) || q_token != c->q_token)
        return err_fmt(err, "tree: child %d (token %d) has probability %.17g under its proposal, but was drawn with "
                       "%.17g: its q row changed after the draw, or it is described with the wrong proposal",
                       k, c->token, q_token, c->q_token);
    return q_token;
}

// Child k's proposal q_k as a normalised row (NULL for a one-hot child), in buffer unless it is the child's q, and
// what the record keeps of it against p_k: p_k(c_k), q_k(c_k), β_k.
static int describe_child(const TreeChild *children, int k, const double *p_k, int V, double *buffer,
                          const double **q_k, TreeTried *tried, Err *err) {
    double mass;
    const double q_token = child_proposal(children, k, V, buffer, q_k, &mass, err);
    if (q_token < 0) return -1;
    if (*q_k == buffer)
        for (int x = 0; x < V; x++) buffer[x] /= mass;
    *tried = (TreeTried){.p = p_k[children[k].token], .q = q_token};
    tried->overlap = *q_k ? spec_overlap(p_k, *q_k, V) : tried->p;
    return 0;
}

int tree_accept_given(const double *p, int V, const TreeChild *children, int n, const double *u, double *scratch,
                      TreeStep *step, Err *err) {
    if (n < 0 || n > TREE_WIDTH_MAX)
        return err_fmt(err, "tree: a node has %d children; at most %d are allowed", n, TREE_WIDTH_MAX);
    *step = (TreeStep){.token = -1, .accepted = -1};
    double *residuals[2] = {scratch, scratch + V}, *q_buffer = scratch + 2 * (size_t)V;
    const double *p_k = p;  // p_k, normalised but for the last residual, which the final draw takes as it is
    for (int k = 0; k < n; k++) {
        const double *q_k;
        TreeTried *tried = &step->tried[k];
        if (describe_child(children, k, p_k, V, q_buffer, &q_k, tried, err)) return -1;
        tried->u = u[k];
        step->n_tried = k + 1;
        if (u[k] < spec_accept_probability(tried->p, tried->q)) {
            step->accepted = k;
            step->token = children[k].token;
            return 0;
        }
        // Rejected: p_{k+1} = norm(max(0, p_k − q_k)), in the residual buffer p_k is not in.
        double *next = residuals[k % 2];
        const int c = children[k].token;
        if (q_k) {  // normalised only if another child is tried against it, as below
            tried->residual_mass = spec_residual(next, p_k, q_k, V);
            if (tried->residual_mass > 0.0 && k + 1 < n)
                for (int x = 0; x < V; x++) next[x] /= tried->residual_mass;
        } else {  // p_k without c, normalised only if another child is tried against it (the chain draws from it as is)
            memcpy(next, p_k, sizeof(double) * V);
            tried->residual_mass = 1.0 - next[c];
            next[c] = 0.0;
            const double rest = sampling_sum(next, V);
            if (!(rest > 0.0)) memcpy(next, p_k, sizeof(double) * V);  // p_k(c) rounded to 1: as spec_residual, p_k
            else if (k + 1 < n)
                for (int x = 0; x < V; x++) next[x] /= rest;
        }
        p_k = next;
    }
    step->residual = p_k;
    step->token = sampling_draw(p_k, V, u[n]);
    return 0;
}

// Under coupling: the target's Gumbel-max token t at the position; the first child equal to it is kept.
static int accept_coupled(const SpecParams *params, const double *p, int V, int position, const TreeChild *children,
                          int n, double *scratch, TreeStep *step, Err *err) {
    *step = (TreeStep){.token = sampling_gumbel_max(p, V, params->seed, (uint64_t)position), .accepted = -1};
    for (int k = 0; k < n && step->accepted < 0; k++) {
        const double *q_k;
        if (describe_child(children, k, p, V, scratch, &q_k, &step->tried[k], err)) return -1;
        step->n_tried = k + 1;
        if (children[k].token == step->token) step->accepted = k;
    }
    return 0;
}

int tree_accept(const SpecParams *params, const double *p, int V, int position, const TreeChild *children, int n,
                double *scratch, TreeStep *step, Err *err) {
    if (n < 0 || n > TREE_WIDTH_MAX)
        return err_fmt(err, "tree: a node has %d children; at most %d are allowed", n, TREE_WIDTH_MAX);
    if (params->sampler == SAMPLER_COUPLED) return accept_coupled(params, p, V, position, children, n, scratch, step, err);
    double u[TREE_WIDTH_MAX + 1];
    for (int k = 0; k < n; k++) u[k] = spec_uniform(params, position, DRAW_ACCEPT, k);
    u[n] = spec_uniform(params, position, n > 0 ? DRAW_RESIDUAL : DRAW_TARGET, 0);
    return tree_accept_given(p, V, children, n, u, scratch, step, err);
}

// With p one-hot at t, each p_k is too until a child equal to t is kept: a rejected child c ≠ t has p_k(c) = 0, and
// norm(max(0, p_k − q_k)) is one-hot at t again, of mass 1 − q_k(t). So child k is kept exactly when c_k = t, and
// β_k = min(1, q_k(t)) — the values tree_accept computes from the rows, found without them (q_k(t) = row[t] / mass,
// as describe_child's normalised row holds it; a one-hot child's β_k is p_k(c_k)).
int tree_accept_one_hot(const SpecParams *params, int t, int V, int position, const TreeChild *children, int n,
                        double *scratch, TreeStep *step, Err *err) {
    if (n < 0 || n > TREE_WIDTH_MAX)
        return err_fmt(err, "tree: a node has %d children; at most %d are allowed", n, TREE_WIDTH_MAX);
    if (t < 0 || t >= V) return err_fmt(err, "tree: the target's token %d is outside the vocabulary [0, %d)", t, V);
    const bool coupled = params->sampler == SAMPLER_COUPLED;  // no acceptance numbers, no residuals
    *step = (TreeStep){.token = t, .accepted = -1};
    for (int k = 0; k < n && step->accepted < 0; k++) {
        const double *row;
        double mass;
        const double q_token = child_proposal(children, k, V, scratch, &row, &mass, err);
        if (q_token < 0) return -1;
        TreeTried *tried = &step->tried[k];
        *tried = (TreeTried){.p = children[k].token == t ? 1.0 : 0.0, .q = q_token};
        const double q_t = row ? row[t] / mass : 0.0, min_p_q = 1.0 < q_t ? 1.0 : q_t;
        tried->overlap = row ? min_p_q : tried->p;
        tried->u = coupled ? 0.0 : spec_uniform(params, position, DRAW_ACCEPT, k);
        step->n_tried = k + 1;
        if (children[k].token == t) step->accepted = k;
        else if (!coupled) tried->residual_mass = 1.0 - tried->overlap;
    }
    return 0;
}
