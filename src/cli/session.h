// session.h — what every model command starts with: the checkpoint folders, the models and their thread pool,
// and the tokenizer.
#ifndef SPECDEC_CLI_SESSION_H
#define SPECDEC_CLI_SESSION_H

#include <stdbool.h>

#include "cli/args.h"
#include "model/model.h"
#include "speculative/speculative.h"
#include "tokenizer/tokenizer.h"

// The model pair that ships in weights/, used when neither -m nor -d is given.
#define DEFAULT_TARGET "weights/pystd/target"
#define DEFAULT_DRAFT "weights/pystd/draft"

// A model (and optionally its draft) with their thread pool.
typedef struct {
    ThreadPool *pool;
    Model target, draft;
    bool has_draft;
} Session;

// The checkpoint folders to use: -m (and -d), or the shipped pair when neither is given.
int model_dirs(const Args *args, const char **target, const char **draft, Err *err);

// Loads the target with its matrices held as `quant` names ("none" and NULL: as stored; "q8", "bf16": model.h's
// Quant), and the draft, when draft_dir is not NULL, as `draft_quant` names (NULL: drafter.h's
// DRAFT_QUANT_DEFAULT, q8); the draft must share the target's vocabulary. Both get a context of at most n_ctx
// positions (model_limit_context).
int session_open(Session *s, const char *target_dir, const char *draft_dir, int threads, const char *quant,
                 const char *draft_quant, int n_ctx, Err *err);
void session_close(Session *s);

// Limits the draft's jobs to n threads of the pool (--draft-threads; each job still runs on only as many as its
// size pays for, see job_threads in forward.c); 0: the count among 1, 2, 4, ... and the pool's whose draft steps
// measure fastest now, fewer threads unless more are clearly faster (model/probe.h). n above the pool's size is an
// error.
int session_draft_threads(Session *s, int n, Err *err);

// The default --threads on a machine of `cpus` CPUs (those this process may use): all of them; but with a draft
// model that may draft ahead (a chain, --pipeline not off) and PIPELINE_SPARE_CPU_FROM CPUs or more, all but one,
// which --pipeline auto then finds free for the drafting thread (at every temperature, the draft's every forward on
// that CPU: draft_ahead.h). Smaller machines keep every CPU for the target: there the spare CPU did not pay
// (docs/performance-history.md, "Measurements behind the thread counts").
#define PIPELINE_SPARE_CPU_FROM 8
int session_default_threads(const Args *args, bool has_draft, int cpus);

// What generate, chat and serve open: session_open and session_draft_threads with the command's options
// (--threads, by default session_default_threads; --quant, --draft-quant, --ctx, --draft-threads), and the check
// that --tree-width and --tree have a drafter to draft a tree with (-d or --lookup); then one line on stderr per
// reason that options given go unread ("specdec: note: --gamma ignored: …", docs/cli.md). On failure the caller still
// closes s.
int session_open_from_args(Session *s, const Args *args, const char *target_dir, const char *draft_dir, Err *err);

// Whether a command drafts by the n-gram lookup: with --lookup, and beside a draft model unless --no-lookup — the
// same in generate, chat, serve and batch (Engine.lookup), so that the same options give a request the same text.
// With both drafters the shipped pair's speculative suite ran greedy 3.72 × target-only against the draft alone's
// 2.96, 2.19 against 1.90 at temperature 0.7, and 1.66 against 1.70 at 1 (docs/performance.md), where counted run for
// run the lookup's rounds cost nothing (pooled 1.001–1.006 × the draft alone: docs/performance-history.md, "Lookup +
// draft at temperature 1: counted, not timed"); under plain AVX2 the same ("The thirteenth session on the idle
// machine"). In specdec batch, one to eight requests at a time, both ran greedy 1.04–1.16 × the draft alone and
// level at temperature 1 (tools/batch_compare.py: "The fourteenth session on the idle machine").
bool session_drafts_by_lookup(const Args *args, bool has_draft);

// A note on stderr where --ctx (ctx; 0: not given) asked for more positions than the target's context: the caches
// hold the model's context, no more.
void session_note_context(const Session *s, int ctx);

// What serve and batch open: session_open_from_args with every CPU to the target's threads by default — a batch
// drafts nothing ahead (speculative/batch.h), so no CPU is kept for a drafting thread it would leave idle, and
// --pipeline gets its note.
int session_open_batched(Session *s, const Args *args, const char *target_dir, const char *draft_dir, Err *err);

// The speculation and sampling options (--gamma, --sampler, --tree-width, --tree, --temp, --top-k, --top-p,
// --seed, -n) as SpecParams; the rest of params zeroed.
int spec_params_from_args(const Args *args, SpecParams *params, Err *err);

// The tokenizer of checkpoint folder dir, when it has one; *loaded says whether it did.
int load_tokenizer(Tokenizer *tok, const char *dir, bool required, bool *loaded, Err *err);

#endif
