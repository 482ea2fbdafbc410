// draft_ahead.h — pipelined drafting: a thread that drafts the next round while the target verifies this one, and
// that runs every forward of the draft where it has a CPU of its own (and that CPU is free: see below).
//
// PEARL (Liu et al. 2024, "PEARL: Parallel Speculative Decoding with Adaptive Draft Length") hides the draft's time
// behind the target's on GPUs; its post-verify step drafts on while the target verifies, assuming every draft
// kept. Here the same on CPU threads. Once a round's chain x_1..x_γ comes from the draft model (the model drafter's,
// or the staged drafter's model drafts), the drafting thread — created once per generation, parked between
// rounds, never one of the target's pool threads — calls the drafter's draft_ahead (drafter.h): from the draft's
// distribution q after x_γ a guess b̂ of the round's next token, then the next round's chain z_1..z_γ' after b̂,
// each drawn as the next round would draw it, into the drafter's own buffers. The guess is drawn from q with the
// number the round draws its bonus token b from p with, when it keeps every x_i (under rejection sampling, by
// inverse CDF with DRAW_TARGET's number at that position; under coupling, with the position's Gumbel noise; greedy,
// the argmax), so b̂ = b wherever q is close to p. Meanwhile the caller runs the target's
// verification and the accept step. The scheduler waits for the thread after the accept step, always: it is never
// cut short by time, so what it drafted, and so the output, does not depend on timing. The next round takes z
// (no draft forward in its way) when every x_i was kept and its next token is b̂; otherwise z is dropped, and the
// draft's cache rolls back as it would have.
//
// The draft on a core of its own: where the process may use a CPU beyond the target's threads, the drafting thread
// keeps it, polling between jobs, and runs the round's proposal too (draft_ahead_propose; the caller waits for it),
// so that every forward of the draft runs on that core. A verification streams the target's weights through the
// caches of the cores it runs on and evicts the draft's from them; the drafting core's own caches (L1 and L2) it
// never touches, so the draft's weights and cache stay in them from round to round and its steps run warm. The
// proposal is the same call on another thread, after the same state: its drafts are the caller's bit for bit.
// Where the machine is busier than it has CPUs, that CPU is not free after all: the waiters poll less, and the
// caller takes back a job the thread has not begun by the time it waits and runs it itself, rather than wait for
// the thread to be given a CPU (draft_ahead.c). A job runs on one thread or the other, after the same state, and
// gives the same result on either.
//
// Why the output keeps the target's distribution (Leviathan et al. 2023, Appendix A.1, needs each draft drawn from
// q given the text before it, and independently of the numbers the verification tests it with):
//   - z is what the next round's propose() would draw on the committed text: the same q (the draft's logits are
//     bit-identical whether b̂ was fed alone or with x_γ: batch invariance, model.h) and the same random numbers,
//     which are keyed by (seed, position, purpose) and consumed by no one (sampling.h): z_j's are the draft
//     stream's at its position. The verification's are other streams (accept.h), and the guess b̂ takes the bonus
//     draw's number at the position before z_1 — so whether z is taken (x kept, next token = b̂) depends on none
//     of z's numbers. Whatever b̂ is, the tokens are the ones the rounds would give unpipelined: the guess decides
//     only whether the next round's drafts are drafted now or then.
//   - The chain's depth was chosen before this round's verification, from the policy as it stood (scheduler.c,
//     ahead_depth); the next round asks for its own γ', having learned from this round. It takes the first γ'
//     drafts of the chain, and where γ' is deeper than a chain that went as deep as it was asked, the drafter
//     draws the rest after it, from the same positions on (draft_model.c, model_propose). So the round's drafts are
//     the ones it would have drawn unpipelined, whatever γ' is, and pipelining changes no token under any policy
//     (test_pipeline.c, pipeline_changes_no_token).
//   - The two threads share no mutable state while the thread works: it writes only the drafter (the draft's
//     model, its KV cache, its sampler, its logits, its chain drafted ahead) and reads its own copy of the text;
//     the caller writes only the target's side (its cache, the pool, the scheduler's samplers, p and q rows, the
//     round's record and timers), and neither touches the other's until the wait. The draft's forwards ahead run on
//     the drafting thread alone, never on the pool, which the target's verification uses. A proposal on the
//     drafting thread runs while the caller waits for it: the two never run at once.
#ifndef SPECDEC_DRAFT_AHEAD_H
#define SPECDEC_DRAFT_AHEAD_H

#include "speculative/drafter.h"

typedef struct DraftAhead DraftAhead;

// Starts the drafting thread for one generation with `drafter` (which must have draft_ahead), parked until a job
// comes; texts hold at most max_committed committed tokens. own_cpu: the process may use a CPU beyond the target's
// threads, which the drafting thread then keeps to itself — polling between jobs rather than sleeping, and taking
// the rounds' proposals too (draft_ahead_propose). Returns NULL with err set on failure.
DraftAhead *draft_ahead_open(Drafter *drafter, int max_committed, bool own_cpu, Err *err);

// Whether the thread takes the rounds' proposals: it has a CPU of its own (false for NULL).
bool draft_ahead_takes_proposals(const DraftAhead *a);

// The drafter's propose() (drafter.h), run on the drafting thread, which must take proposals (or on the caller,
// where the thread has not taken it up within the poll budget): returns when it is done, with its result. The
// draft's forwards then run on the drafting thread's core, whose caches the target's verification never streams
// through: the draft's weights and cache stay there from one round to the next.
int draft_ahead_propose(DraftAhead *a, const int *context, int n, const DraftRequest *request, DraftTree *tree,
                        double *q, DraftReport *report, Err *err);

// Hands the thread a job and returns at once: draft ahead after committed[0..n) and the round's chain
// drafts[0..gamma), a guess and then a chain of up to `depth` drafts (Drafter.draft_ahead). The drafter is the
// thread's until draft_ahead_wait.
void draft_ahead_start(DraftAhead *a, const int *committed, int n, const int *drafts, int gamma, int depth);

// Waits for the job to end (or runs it on the caller, where the thread has not begun it): *held gets the drafts
// held for the next round (0: none). Returns 0, or −1 with err set to the drafter's error.
int draft_ahead_wait(DraftAhead *a, int *held, Err *err);

// Waits for a job in flight, stops the thread and frees everything; NULL is allowed.
void draft_ahead_close(DraftAhead *a);

// For tests (a seam, process-wide): while held back, drafting threads take up no job, so that the caller takes back
// and runs every one (draft_ahead_wait, draft_ahead_propose) — the path that scheduling reaches only where it leaves a
// job unclaimed. Off unless a test turns it on.
void draft_ahead_hold_back(bool held);

#endif
