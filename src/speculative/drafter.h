// drafter.h — where drafts come from: the Drafter interface the scheduler (scheduler.c) calls, and the drafters
// behind it, each in a file of its own:
//   draft_model.c   a small model, sampled by the scheduler's rule (Leviathan et al. 2023, §2.2);
//   draft_lookup.c  n-gram lookup over the prompt and the text so far: no model, a deterministic proposal (a tree:
//                   the continuations of shorter matches as branches);
//   draft_staged.c  both: per round, the lookup's run or the draft model's drafts.
#ifndef SPECDEC_DRAFTER_H
#define SPECDEC_DRAFTER_H

#include <stdbool.h>

#include "model/model.h"
#include "speculative/penalties.h"
#include "speculative/sampling.h"
#include "speculative/tree.h"
#include "base/bytesmap.h"

struct SpecParams;

enum { GAMMA_MAX = 16 };  // the most levels drafted in one round (a chain's verify forward is T = γ + 1 ≤ 17 rows)

// The n-gram lengths --lookup matches, and the shortest match whose run the staged drafter (-d … --lookup) takes:
// the choices that gave the most tokens per target call on the shipped pair (docs/performance-history.md, "The γ
// policy's constants"). The γ policy learns the acceptance of a lookup's drafts per match length
// 1 .. LOOKUP_MATCH_SLOTS − 1 (longer ones count as the longest).
enum { LOOKUP_N_MIN = 1, LOOKUP_N_MAX = 4, LOOKUP_STAGED_MIN_MATCH = 2, LOOKUP_MATCH_SLOTS = LOOKUP_N_MAX + 1 };

// A draft tree: what a drafter proposes and the target verifies in one forward; a chain of γ drafts is the tree of
// width 1. Nodes are in breadth-first order — each level after the one above it, siblings in the order they were
// drawn — so every node comes after its parent, and the nodes above a level are a prefix of the list.
enum { TREE_MAX_NODES = TREE_MAX_ROWS - 1 };  // the verify forward feeds the newest committed token too

typedef struct {
    int n;                                  // nodes
    TreeChild node[TREE_MAX_NODES];         // token and proposal (tree.h), its q pointing into the q rows given
                                            // to propose(); NULL: deterministic (a lookup's; greedy, every draft
                                            // model's: the argmax or the top W, q one-hot and never written)
    int parent[TREE_MAX_NODES];             // an earlier node, or −1: a child of the newest committed token
} DraftTree;

// The tokens of the nodes from the tree's first level down to `node` (−1: none), root first, into path[GAMMA_MAX];
// returns how many: the drafts a row after `node` continues (its penalties' history; under a grammar, the text the
// row's distribution continues after the committed tokens).
int draft_tree_path(const DraftTree *tree, int node, int *path);

// What the scheduler asks of a drafter: `width` children at the first level the drafter draws, each continued as a
// chain, `depth` levels in all — width 1 asks for a chain of γ = depth drafts.
typedef struct {
    int depth, width;
} TreeShape;

// What the scheduler asks for one round: a tree's shape, and for a drafter with a lookup, whichever pays more by
// the γ policy: lookup_gamma[m], the most tokens of the lookup's run to propose when its match is m tokens long
// (a longer match counts as LOOKUP_MATCH_SLOTS − 1 long; 0: not that run — the staged drafter's model drafts
// instead, the lookup drafter proposes nothing), and model_gamma, the most model drafts when no run is proposed.
typedef struct {
    TreeShape shape;
    int lookup_gamma[LOOKUP_MATCH_SLOTS];
    int model_gamma;
    int n_prompt;   // of the committed tokens, the prompt's: the penalties count the rest as output (penalties.h)
    bool guess;  // drafting ahead (draft_ahead.h): the chain's first token is the guess of the round's next token
} DraftRequest;

// What a drafter reports of one proposal. For a drafter with a lookup: the lookup's run run[0..n_run) after a match
// of match_length tokens (n_run = 0: no match) and whether it was proposed, or part of it — a run not proposed
// teaches the γ policy how often it would have been kept, at no verification's cost (policy.c).
typedef struct {
    int run[GAMMA_MAX];
    int n_run, match_length;
    bool run_proposed;
    int calls;              // draft model forward passes this proposal made (a lookup makes none)
    int rows;               // the rows those forwards fed: the first's catches up on the tokens the draft has not
                            // read (after rounds it did not draft, all they committed), each later one a level (0,
                            // as calls, for drafts drafted ahead)
    bool ahead;             // the drafts were drafted ahead, while the last round was verified (draft_ahead.h):
                            // calls is 0, the forwards were made on the drafting thread
    double q_seconds;       // of the proposal's time: turning the draft's logits into q rows (sampler_adjust), or
                            // greedy into their argmax (sampling_greedy)
} DraftReport;

// A draft model's forward that a proposal under way waits for (Drafter.begin, .resume): its rows on the draft's
// cache (rows.T = 0: none — the proposal is complete), and where the drafter wants their logits ([T, V] when
// rows.all_logits, else the last row's [V]).
typedef struct {
    Model *model;
    SequenceRows rows;
    float *logits;
} DraftForward;

// The scheduler calls propose() once per round and rollback() after verification. A drafter holds its functions
// and its costs; what passes between it and the scheduler each round is the request and the report.
typedef struct Drafter {
    // Optional: reads context[0..n) ahead of the first round (the prompt), so that propose() times are steady.
    int (*prefill)(struct Drafter *self, const int *context, int n, Err *err);
    // Proposes a tree of at most request->shape.depth levels continuing the committed tokens context[0..n) (it may
    // stop early, or propose nothing: tree->n = 0); the distributions its nodes were drawn from go to rows of q
    // ([rows, V], at most one per node), which the nodes' TreeChild.q point to; *report is written whole. Returns
    // 0, or −1 with err set.
    int (*propose)(struct Drafter *self, const int *context, int n, const DraftRequest *request, DraftTree *tree,
                   double *q, DraftReport *report, Err *err);
    // Optional, for drafters with a draft model (batch.c runs several sequences' draft forwards as one): propose()
    // cut at its forwards, as the scheduler's round is cut at the target's. begin() starts the proposal propose()
    // would make (the same arguments) and names in *forward the forward it waits for; the caller runs it — alone,
    // or beside other sequences' rows in one model_forward_batch — puts the logits where it says, and calls
    // resume(), which names the next, until forward->rows.T is 0: then the tree, q and report are propose()'s.
    // Both return 0, or −1 with err set. Such a drafter's propose() is drafter_propose_by_steps.
    int (*begin)(struct Drafter *self, const int *context, int n, const DraftRequest *request, DraftTree *tree,
                 double *q, DraftReport *report, DraftForward *forward, Err *err);
    int (*resume)(struct Drafter *self, DraftForward *forward, Err *err);
    // After verification: keep what was cached for the nodes path[0..n_path) of the last proposal (the accepted
    // path, root first), then forget whatever is cached at positions ≥ n (rejected, or not yet final).
    void (*rollback)(struct Drafter *self, int n, const int *path, int n_path);
    // Optional, pipelined drafting (draft_ahead.h): called on the drafting thread while the target verifies the last
    // proposal, a chain of the draft model's whose drafts end context[0..n) (the committed tokens and every draft,
    // assumed kept); drafts ahead a guess of the round's next token and after it a chain of `depth` drafts, which
    // the next propose() takes when the text it is given is the assumed text and the guess and it asks for a chain
    // (else they are dropped). What rollback() and check_rollback() do after this round does not change. Returns
    // the drafts held for the next round (0: none), or −1 with err set.
    int (*draft_ahead)(struct Drafter *self, const int *context, int n, int depth, Err *err);
    // Optional: checks what the drafter caches after rollback() against the committed tokens context[0..), whose
    // first n_prefill went to prefill() (model_check_rollback). The debug build calls it after every rollback.
    int (*check_rollback)(struct Drafter *self, const int *context, int n_prefill, Err *err);
    bool has_lookup;        // proposes a lookup's one-hot run (lookup, staged)
    double step_cost;       // one draft token in spec_forward_cost's units (a model's forward; 0: a lookup)
    double row_cost;        // each further row of a draft forward, in the same units (a tree's level forwards)
} Drafter;

// propose() of a drafter with begin() and resume(): begin, then each forward it names alone (a batch of one) and
// resume (drafter.c).
int drafter_propose_by_steps(Drafter *self, const int *context, int n, const DraftRequest *request, DraftTree *tree,
                             double *q, DraftReport *report, Err *err);

// ---- a small model (draft_model.c) --------------------------------------------------------------------------

// A small model as drafter. It samples with the scheduler's SamplingParams ("standardized sampling", §2.2), by the
// scheduler's rule and seed (SpecParams.sampler, .seed); it stops drafting early when its top probability (softmax
// of its logits at temperature 1, whatever the sampling settings) falls below p_min (0 = never). Tokens the draft
// has not read yet (the text committed while the scheduler decoded plainly, the accepted drafts) are fed in one
// forward when it is next used: keeping it in sync costs no forward per plain token. Greedy, q is one-hot at the
// argmax and never written out: its drafts are one-hot children (tree_one_hot_child, tree_top_children).
//
// A tree (width W > 1): the W children of its first level come from one q row, drawn as the scheduler's rule
// needs them (tree.h: the W most likely when greedy, W draws without replacement under rejection sampling, the
// W Gumbel-max winners under coupling), and each is continued as a chain, one forward per level over every
// branch's newest node (model_extend_tree: each row sees its own path only; a chain is the tree of one branch).
// rollback() keeps the accepted path's rows (kv_keep_path).
//
// How a draft model's weight matrices are held unless the user says otherwise (specdec generate and run-bench
// --draft-quant): quantized to 8 bits at load (model.h's QUANT_Q8). The draft only proposes and the target's
// verification decides, so the draft's rounding can cost acceptance, never exactness (greedy output stays the
// target's, sampled output keeps the target's distribution), while its step, bound by streaming its weights,
// streams half the bytes of BF16 and a quarter of F32. On the shipped pair: bench/results/latest.md (the quant
// suite's α of "target as stored, draft q8"; the decode suite's draft step, against run-bench --draft-quant none).
#define DRAFT_QUANT_DEFAULT QUANT_Q8

// The chain a draft model drafted ahead (draft_ahead): node 0 is the guess of the next token, nodes 1.. the next
// round's drafts, their q rows in q. Their K/V rows lie in the cache past its length, from position n − 2 (the last
// draft of the round verified) on, where nothing writes before the next propose(), which takes them or drops them
// (but the debug build's rollback check, which rewrites row n − 2 for the token committed there: the same values
// when the chain holds, model.h).
typedef struct {
    int n;                  // the committed tokens the next round starts from if the guess holds (0: none held)
    int cache_len;          // the cache's length it expects then
    bool stopped;           // the chain ended before the depth asked (the draft unsure, or the context full)
    int deepest;            // a continuation's first token fed: the chain's deepest draft (model_begin)
    DraftTree tree;
    double *q;              // [GAMMA_MAX + 1, V] (allocated at the first sampled draft_ahead; NULL when greedy)
} AheadChain;

// A proposal under way, between the draft forwards of its levels (draft_model.c: draft_levels and draw_level).
typedef struct {
    DraftTree *tree;
    double *q;
    DraftReport *report;
    int n;                  // the tokens before the first level: level l's drafts sit at position n + l
    TreeShape shape;        // its width at most the drafter's max_width
    bool guess;             // the first level is drafting ahead's guess (DraftRequest.guess)
    int level;              // the level the forward under way gives the q rows of
    int frontier, n_frontier;  // the nodes whose rows it feeds (level 0: the node the levels hang under, −1 for the
                               // newest committed token, and 1)
    int q_rows;             // q rows written so far
    int tokens[TREE_MAX_NODES];  // a level forward's tokens: the frontier's
} DraftLevels;

typedef struct {
    Drafter base;
    Model *model;
    KVCache cache;
    Sampler sampler;
    Penalizer penalizer;    // its rows' penalties, when SpecParams.penalties asks for them
    const struct SpecParams *params;    // not owned: sampler and seed
    const int *committed;   // the committed tokens [n_committed] the proposal drafting continues, n_prompt of them
    int n_committed, n_prompt;          // the prompt's: the penalties' history (penalties.h)
    float p_min;
    int max_width;          // the widest first level it is asked for (SpecParams.tree_width)
    float *logits;          // [max_width, V]: the rows of one level's forward
    double *scratch;        // [V]: drawing children without replacement
    float *exponentials;    // [V]: sampling_top_probability's scratch (NULL unless p_min > 0)
    int first_position;     // of the last proposal's first node: node i's row is cached at first_position + i
    DraftLevels levels;     // the proposal under way (begin, resume)
    RollbackCheck check;    // the debug build's check of `cache` (check_rollback)
    AheadChain ahead;       // pipelined drafting's (draft_ahead)
} ModelDrafter;

int model_drafter_init(ModelDrafter *d, Model *draft, const struct SpecParams *params, float p_min, Err *err);
void model_drafter_free(ModelDrafter *d);

// ---- n-gram lookup (draft_lookup.c) -------------------------------------------------------------------------

// Prompt lookup decoding: finds the longest n-gram (n from n_max down to n_min) that ends the committed text and
// occurred before, and proposes the tokens that followed its latest occurrence — copying on from there, so a
// repeating span is proposed whole. Deterministic (one-hot q), costs no forward. The index maps every n-gram of
// the committed text (as its token ids' bytes, hashed with xxHash) to the position after its latest occurrence.
// It proposes as much of the run as the scheduler asks for a match of its length (DraftRequest.lookup_gamma). A tree
// (shape.width > 1): the latest occurrences of the shorter n-grams ending the text are other candidates; those whose
// continuation starts with a token no longer match's does become branches beside the run, up to the width, each a
// chain as deep as the run proposed.
typedef struct {
    Drafter base;
    int n_min, n_max;
    BytesMap index;         // n-gram → position after its latest occurrence
    int indexed;            // the n-grams ending at positions ≤ indexed are in the index
    int last_match;         // the length of the n-gram the last lookup_run matched (0: none)
} LookupDrafter;

int lookup_drafter_init(LookupDrafter *d, int n_min, int n_max, Err *err);
void lookup_drafter_free(LookupDrafter *d);

// The lookup's run after the committed tokens context[0..n): GAMMA_MAX tokens into run[0..GAMMA_MAX) from the
// longest match (d->last_match long), or 0 when nothing matches; −1 with err set.
int lookup_run(LookupDrafter *d, const int *context, int n, int *run, Err *err);

// Of a run report->run[0..n_run) found after a match of m tokens, how much to propose: as much as the request asks
// (DraftRequest.lookup_gamma, and at most depth); reports it (match_length, n_run, run_proposed) and returns it, k.
int lookup_take(const DraftRequest *request, DraftReport *report, int m, int n_run, int depth);

// The one-hot tree of m branches, branch b the chain branches[b][0..depth), breadth-first (branch b's node at level
// l is l·m + b); m = 1: a chain.
void lookup_tree(DraftTree *tree, int (*branches)[GAMMA_MAX], int m, int depth);

// ---- the lookup or the draft model, by turns (draft_staged.c) ----------------------------------------------

// Lookup and the draft model, round by round whichever is predicted to pay more: the lookup's run from a match of
// at least min_match tokens, as much of it as the scheduler asks for a match of its length (DraftRequest.lookup_gamma:
// the γ policy learns how often each length's drafts are kept), else the draft model's drafts, up to
// DraftRequest.model_gamma — a tree when the scheduler asks for one (a run stays a chain). The draft model reads the
// tokens a run committed in the batch that catches it up.
typedef struct {
    Drafter base;
    LookupDrafter *lookup;  // not owned
    ModelDrafter *model;    // not owned
    int min_match;          // the shortest match whose run the staged drafter takes
    bool ran_lookup;        // its last proposal was the lookup's run (the draft model cached none of it)
} StagedDrafter;

void staged_drafter_init(StagedDrafter *d, LookupDrafter *lookup, ModelDrafter *model, int min_match);

// ---- opening one (drafter.c) ---------------------------------------------------------------------------------

typedef enum { DRAFTER_NONE, DRAFTER_MODEL, DRAFTER_LOOKUP, DRAFTER_STAGED } DrafterKind;

// The drafter that a draft model and --lookup make: both staged, either alone, or none (plain decoding).
DrafterKind drafter_kind(bool draft_model, bool lookup);

// What a user calls it: "draft model", "lookup" or "draft model and lookup"; NULL for DRAFTER_NONE.
const char *drafter_kind_name(DrafterKind kind);

// The drafters one run may use, owned together: `drafter` is the one opened (NULL for DRAFTER_NONE: plain
// decoding), the others its parts.
typedef struct {
    Drafter *drafter;
    ModelDrafter model;
    LookupDrafter lookup;
    StagedDrafter staged;
    bool model_open, lookup_open;
} Drafters;

// Opens a drafter of `kind` for a run with params (which must outlive it): the draft model `draft` (model and
// staged kinds), stopping below top probability p_min (model_drafter_init); a lookup over n-grams of LOOKUP_N_MIN
// to LOOKUP_N_MAX tokens (lookup and staged); the staged drafter taking runs from matches of min_match tokens on.
// Returns 0, or −1 with err set; drafter_close is due either way.
int drafter_open(Drafters *d, DrafterKind kind, Model *draft, const struct SpecParams *params, float p_min,
                 int min_match, Err *err);

// Frees what drafter_open made; safe to call twice, and on a zeroed Drafters.
void drafter_close(Drafters *d);

#endif
