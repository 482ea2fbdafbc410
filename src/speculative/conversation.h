// conversation.h — a conversation that keeps its caches: each reply continues from what the last one left.
//
// A chat re-renders the whole conversation each turn (the chat template), so the ids of turn k + 1 begin with
// those of turn k and its reply — mostly: a template may render earlier turns differently (Qwen3 drops earlier
// replies' <think> blocks), and the reply's last tokens may encode differently once the template's text follows
// them. So each turn keeps the longest common prefix of the new ids and the committed ones in the target's KV
// cache, the draft model's and the lookup's index (the drafter's rollback), and prefills only the rest. Its
// logits are the same, bit for bit, as one fresh run over the whole conversation's (the forward is batch
// invariant), so a conversation's replies are those of fresh runs.
//
// The caller owns the models and the drafter (drafter.h); a server holds one Conversation per session.
#ifndef SPECDEC_SPECULATIVE_CONVERSATION_H
#define SPECDEC_SPECULATIVE_CONVERSATION_H

#include "speculative/speculative.h"

typedef struct {
    Model *target;
    Drafter *drafter;       // NULL: target-only decoding
    KVCache cache;          // the target's: committed[0..n − 1)
    int *committed;         // [cap] the conversation's ids so far: the last rendering, then the reply
    int n, cap;
    char *key;              // whose it is (conversation_claim): NULL, none given
} Conversation;

int conversation_init(Conversation *c, Model *target, Drafter *drafter, Err *err);
void conversation_free(Conversation *c);

// Forgets the conversation: the next reply prefills everything.
void conversation_reset(Conversation *c);

// The conversation for the next reply, under `key` (a client's secret, as a server's cache_salt; NULL: none given,
// which is a key too): kept when the last reply's key was the same, else forgotten first — so that no reply's
// reuse (n_reused) tells what a reply under another key held. Returns 0, or −1 with err set (out of memory).
int conversation_claim(Conversation *c, const char *key, Err *err);

// The reply to the conversation rendered as ids[0..n_ids) (the template's rendering, the assistant's turn opened):
// up to params->max_tokens tokens into out (room for max_tokens), as speculative_generate decodes them. *n_reused
// says how many of the ids were in the caches already (the common prefix; the rest was prefilled). A reply that
// would not fit the context is an error naming the sizes, the conversation unchanged.
int conversation_reply(Conversation *c, const int *ids, int n_ids, const SpecParams *params, int *out, int *n_out,
                       SpecStats *stats, int *n_reused, Err *err);

// conversation_reply in steps, for a caller that runs the generation itself (a server's batch: batch.h): prepare
// keeps the longest common prefix of ids[0..n_ids) and the committed ones in the caches (*n_reused of them) and
// takes ids as the conversation's, leaving the target's cache for the continuation to fill (room for max_tokens);
// commit adds the reply out[0..n_out) once made. A generation that failed leaves the caches unknown: reset then.
int conversation_prepare(Conversation *c, const int *ids, int n_ids, int max_tokens, int *n_reused, Err *err);
void conversation_commit(Conversation *c, const int *out, int n_out);

// How many of ids[0..n_ids) a reply under `key` would find in the caches (conversation_prepare's *n_reused after
// conversation_claim): 0 when the conversation is another key's. For choosing among conversations (a server's slots).
int conversation_shared(const Conversation *c, const char *key, const int *ids, int n_ids);

#endif
