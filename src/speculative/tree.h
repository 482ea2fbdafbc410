// tree.h — one node of a token tree: how its children are drafted, and the multi-draft accept / resample step that
// decides the token the node emits. Pure functions of their arguments and of (seed, position) (sampling.h's
// counter-based random numbers); the scheduler (scheduler.c) calls tree_accept at every node on the path it walks
// but those of one child, where it calls accept_chain (the same step), and a chain is the tree whose nodes have one
// child each.
//
// The accept step is recursive rejection sampling over the children c_1..c_m, in the order they were drawn, child k
// drawn from a proposal q_k that may depend on the children before it — SpecInfer's multi-step speculative sampling
// (Miao et al., ASPLOS 2024) for independent draws, and the recursive rejection sampling of Jeon et al. 2024,
// "Recursive Speculative Decoding" (arXiv:2402.14160), for draws without replacement: the same rule, with q_k
// renormalised over the untried tokens:
//     p_1 = p
//     for k = 1..m:   keep c_k if u_k < p_k(c_k) / q_k(c_k)                       (u_k ~ U[0, 1))
//                     else p_{k+1} = norm(max(0, p_k − q_k))                      (for a one-hot q_k: p_k without c_k)
//     none kept:      the token is drawn from p_{m+1}                              (m = 0: from p, the bonus token)
// The token is distributed exactly as p, whatever the proposals: child k is kept with probability min(p_k, q_k) at
// each token, and p_k(x) = min(p_k, q_k)(x) + Σ max(0, p_k − q_k) · p_{k+1}(x); by induction from the last child,
// the steps from k on emit p_k given any c_1..c_{k−1} (tests/speculative/test_tree_accept.c enumerates it). This
// holds for any q_k, so children may repeat a token (independent draws), exclude the earlier ones (without
// replacement), or be deterministic (one-hot: greedy top-W, lookup branches), in any mix — provided q_k is the
// law of child k given the children before it, which is why children are made by the functions below. Whether a
// child is drafted at all may depend on the path above and on the earlier siblings (m itself may: a drafter stops
// when q runs out), never on the child's own token or on what is drafted below it: pruning a child by its
// descendants' draft probabilities would bias the step (under coupling it would not, the token being t anyway).
//
// Under SAMPLER_COUPLED the token is the target's own Gumbel-max sample t = sampling_gumbel_max(p) at the
// position, whatever the children: the step descends into the first child equal to t, else emits t. Children are
// drafted there as the Gumbel top-W of q under the same noise (the tokens of q's exponential race in the order they
// finish), child 0 being the chain's coupled draft.
//
// At temperature 0 p is one-hot at the target's argmax: the rule keeps the first child equal to it (p_k(c) / q_k(c)
// is 0 or ≥ 1, and u_k < 1) and otherwise emits it, whatever the random numbers. The draft's q is one-hot there
// too, so a node's further children come from the draft's logits: tree_top_children.
//
// Random numbers: sibling k (counting from 0) at a position draws with its own stream per purpose,
// spec_uniform(params, position, purpose, k) (accept.h: its draft, its acceptance; the residual's and the bonus
// token's are sibling 0's). Sibling 0's are the chain's: with one child the draws and the accept step are exactly
// the chain's rule (spec_draw, accept_chain), bit for bit. Nodes
// at the same depth of different branches share a position's numbers, which is harmless: the walk takes one node
// per position, and a position's numbers are independent of every other position's.
#ifndef SPECDEC_TREE_H
#define SPECDEC_TREE_H

#include <stdbool.h>

#include "base/error.h"

struct SpecParams;

enum { TREE_WIDTH_MAX = 16 };  // the most children one node may have

// A child of a node and the proposal it was drawn from. Made by tree_draw_child, tree_top_children,
// tree_one_hot_child or tree_drawn_child — not by hand: q_token is what the draw saw, and tree_accept refuses a
// child whose description no longer gives it (a q row overwritten after the draw, the wrong replacement flag).
typedef struct {
    int token;
    const double *q;            // [V]: the distribution it was drawn from, kept unchanged until tree_accept has
                                // run; NULL: deterministic, q_k = one-hot at token
    bool without_replacement;   // q_k = q with the tokens of the earlier siblings removed, renormalised (with q)
    double q_token;             // q_k(token) as drawn (1 for a one-hot child)
} TreeChild;

// ---- drafting a node's children --------------------------------------------------------------------------------

// A deterministic child: a lookup's branch, a greedy top-W child.
TreeChild tree_one_hot_child(int token);

// The description of child n, token, drawn from q_n (q, or without replacement q minus the tokens of its earlier
// siblings children[0..n), renormalised) by any means — e.g. a chain's draft from spec_draw(…, DRAW_DRAFT), which
// is tree_drawn_child(q, token, false, NULL, 0, V, NULL). scratch: [V], used only without replacement when n > 0.
TreeChild tree_drawn_child(const double *q, int token, bool without_replacement, const TreeChild *children, int n,
                           int V, double *scratch);

// Draws child n of a node at `position` (the text index of the token the node will emit) from q, the draft's
// adjusted distribution there, and writes it to children[n] (children[0..n) are its earlier siblings):
//   SAMPLER_REJECTION: by inverse CDF from q_n — q, or without replacement q minus the earlier siblings' tokens,
//     renormalised — with sibling n's draft number: child 0 is spec_draw(params, q, V, position, DRAW_DRAFT).
//   SAMPLER_COUPLED: the Gumbel-max sample of q_n under the position's noise: without replacement, the (n+1)-th
//     token to finish q's race among the tokens no earlier sibling has (the Gumbel top-W when the siblings all come
//     from q); child 0 is the chain's coupled draft sampling_gumbel_max(q). (With replacement every child repeats
//     child 0: use without_replacement.)
// scratch: [V]. Returns the token, or −1 (children[n] untouched) when q_n has no mass left: every token of q > 0
// is an earlier sibling.
int tree_draw_child(const struct SpecParams *params, const double *q, int V, int position, bool without_replacement,
                    TreeChild *children, int n, double *scratch);

// Greedy children: the up to `width` (≤ TREE_WIDTH_MAX) tokens of highest logit (model_top_logits), as one-hot
// children, best first, the lower id first on a tie (the sampler's rank order, whose prefixes top-k and top-p
// keep); tokens of logit −inf are never children. children[0] is the draft's greedy token (sampling_greedy's: the
// lowest id on a tie). logits: [V], rows that sampler_adjust accepted (no NaN). Returns the number of children, min(width, finite logits).
int tree_top_children(const float *logits, int V, int width, TreeChild *children);

// ---- the accept / resample step at one node --------------------------------------------------------------------

// What the record keeps of child k, tried: for the trace, --show, and the acceptance the policies learn (α).
typedef struct {
    double p, q;            // p_k(c_k), q_k(c_k); under coupling p is the node's p (no residuals are formed)
    double u;               // the acceptance number u_k; 0 under coupling, which draws none
    double overlap;         // β_k = Σ_x min(p_k(x), q_k(x)) = P(child k kept | tried), taken over the draw of c_k
                            // (p_k(c_k) for a one-hot child); under coupling against the node's p, where it is the
                            // keep probability of a one-hot first child only
    double residual_mass;   // at a rejection, Σ_x max(0, p_k(x) − q_k(x)): the mass p_{k+1} is normalised from
                            // (1 − p_k(c_k) for a one-hot child); 0 for the kept child and under coupling
} TreeTried;

// The step's outcome at one node.
typedef struct {
    int token;              // the token the node emits: children[accepted].token, or the one drawn for it
    int accepted;           // the index of the kept child, or −1: every child rejected (or none), token drawn
    int n_tried;            // children looked at, in order: the rejected ones and the kept one
    TreeTried tried[TREE_WIDTH_MAX];
    const double *residual; // [V], when accepted = −1 under rejection: what token was drawn from — p_{m+1}, or p
                            // when m = 0 — not necessarily normalised (sampling_draw normalises); points into p or
                            // scratch. NULL otherwise
} TreeStep;

// The token at `position` (the text index it will take) given the target's adjusted distribution p there and the
// node's children[0..n) in the order they were drawn (n ≤ TREE_WIDTH_MAX; n = 0 draws the bonus token from p):
// recursive rejection sampling with u_k = sibling k's accept number at the position and the residual's number for
// the draw (the target's number when n = 0) — or, under SAMPLER_COUPLED, the target's Gumbel-max token choosing
// the branch. scratch: [3V]. Returns 0, or −1 with err set when a child is described wrongly (token out of range,
// the flag without a q row, q_k(c_k) not its q_token or not > 0); only the children tried are checked this way.
int tree_accept(const struct SpecParams *params, const double *p, int V, int position, const TreeChild *children,
                int n, double *scratch, TreeStep *step, Err *err);

// tree_accept for a p that is one-hot at token t — the target's greedy token, at temperature 0 — without p's row:
// the first child equal to t is kept, else t is emitted, under either rule, and the step's record is tree_accept's
// for that one-hot row, bit for bit, but for step.residual, left NULL (tests/speculative/test_tree_accept.c holds
// it to tree_accept). scratch: [V]. Returns 0, or −1 with err set (t outside [0, V), or as tree_accept).
int tree_accept_one_hot(const struct SpecParams *params, int t, int V, int position, const TreeChild *children,
                        int n, double *scratch, TreeStep *step, Err *err);

// Recursive rejection sampling with given numbers: u[0..n) the children's acceptance numbers, u[n] the draw's.
// tree_accept under SAMPLER_REJECTION is this with the position's numbers; the tests choose them, to enumerate
// every outcome.
int tree_accept_given(const double *p, int V, const TreeChild *children, int n, const double *u, double *scratch,
                      TreeStep *step, Err *err);

#endif
