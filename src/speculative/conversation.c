// conversation.c — replies that continue from the caches the last one left (conversation.h).
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "speculative/conversation.h"

int conversation_init(Conversation *c, Model *target, Drafter *drafter, Err *err) {
    *c = (Conversation){.target = target, .drafter = drafter};
    return model_kv_init(target, &c->cache, err);
}

void conversation_free(Conversation *c) {
    kv_free(&c->cache);
    free(c->committed);
    free(c->key);
    *c = (Conversation){0};
}

void conversation_reset(Conversation *c) {
    c->n = 0;
    kv_truncate(&c->cache, 0);
    if (c->drafter) c->drafter->rollback(c->drafter, 0, NULL, 0);
}

// Whether the conversation is key's (NULL: none given, which is a key too).
static bool claimed_by(const Conversation *c, const char *key) {
    return key ? c->key && strcmp(key, c->key) == 0 : !c->key;
}

int conversation_claim(Conversation *c, const char *key, Err *err) {
    if (claimed_by(c, key)) return 0;
    conversation_reset(c);
    free(c->key);
    c->key = NULL;
    if (key && !(c->key = strdup(key))) return err_fmt(err, "out of memory for a conversation's key");
    return 0;
}

// The ids kept from the last turn: the common prefix of ids and the committed ones, and no more than the cache holds
// (the committed tokens but the newest) nor than all of ids but the newest (which the first round feeds).
static int common_prefix(const Conversation *c, const int *ids, int n_ids) {
    int k = 0, limit = c->cache.len < n_ids - 1 ? c->cache.len : n_ids - 1;
    while (k < limit && k < c->n && c->committed[k] == ids[k]) k++;
    return k;
}

int conversation_prepare(Conversation *c, const int *ids, int n_ids, int max_tokens, int *n_reused, Err *err) {
    *n_reused = 0;
    const int n_ctx = c->target->cfg.n_positions;
    if (n_ids < 1) return err_fmt(err, "the conversation is empty");
    if (n_ids >= n_ctx)
        return err_fmt(err, "the conversation has %d token%s and the context holds %d position%s: no room for a reply",
                       n_ids, plural(n_ids), n_ctx, plural(n_ctx));
    size_t need = (size_t)n_ids + (size_t)max_tokens;
    if (need > (size_t)c->cap) {
        int *grown = realloc(c->committed, need * sizeof *grown);
        if (!grown) return err_fmt(err, "out of memory for a conversation of %zu tokens", need);
        c->committed = grown;
        c->cap = (int)need;
    }
    const int keep = common_prefix(c, ids, n_ids);
    kv_truncate(&c->cache, keep);
    if (c->drafter) c->drafter->rollback(c->drafter, keep, NULL, 0);
    *n_reused = keep;
    memcpy(c->committed, ids, (size_t)n_ids * sizeof *ids);
    c->n = n_ids;
    return 0;
}

void conversation_commit(Conversation *c, const int *out, int n_out) {
    memcpy(c->committed + c->n, out, (size_t)n_out * sizeof *out);
    c->n += n_out;
}

int conversation_reply(Conversation *c, const int *ids, int n_ids, const SpecParams *params, int *out, int *n_out,
                       SpecStats *stats, int *n_reused, Err *err) {
    *n_out = 0;
    if (conversation_prepare(c, ids, n_ids, params->max_tokens, n_reused, err)) return -1;
    if (speculative_continue(c->target, &c->cache, c->drafter, ids, n_ids, params, out, n_out, stats, err)) {
        conversation_reset(c);  // what the caches hold is no longer known
        return -1;
    }
    conversation_commit(c, out, *n_out);
    return 0;
}

int conversation_shared(const Conversation *c, const char *key, const int *ids, int n_ids) {
    return !claimed_by(c, key) ? 0 : common_prefix(c, ids, n_ids);
}
