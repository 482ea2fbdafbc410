// chat.c — multi-turn conversations: what keeping the caches saves, and what speculation buys turn by turn.
//
// One conversation of TURNS turns over a held-out code prompt: the first message gives the code, the others ask for
// edits. Each turn the whole conversation is rendered by the pair's chat template (the target folder's; the shipped
// pair has none, so a ChatML-like template in its one special token, <|endoftext|>) and continued on the
// Conversation's caches (speculative/conversation.h). Greedy, so every decoding gives the same replies: a mismatch
// is reported and makes run-bench exit with status 1. Per turn: the prompt's tokens, those the caches held and those
// prefilled; the prefill's time with the caches kept and with them dropped (each turn a fresh conversation); the
// reply's time per token target-only, and the speed-up over it with the lookup, the draft model and both. One
// conversation, each turn run once per decoding: figures of one run, not medians.
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "chat/template.h"
#include "speculative/conversation.h"

static const char PAIR_TEMPLATE[] =
    "{%- for m in messages %}{{ '<|endoftext|>' + m.role + '\\n' + m.content + '\\n' }}{% endfor %}"
    "{%- if add_generation_prompt %}{{ '<|endoftext|>assistant\\n' }}{% endif %}";
static const char *const EDITS[] = {"Rename the variables to longer, clearer names.",
                                    "Add a docstring to every function.", "Handle bad input with clear errors.",
                                    "Write a unit test for it."};
enum { TURNS = 5, CODE_TOKENS = 150, MESSAGE_ROOM = 24 };

typedef enum { TARGET_ONLY, LOOKUP, DRAFT, STAGED, N_MODES } Mode;
static const char *const MODE_NAMES[] = {"target-only", "lookup", "draft", "lookup + draft"};

typedef struct {
    int prompt, reused, generated;
    double prefill_seconds, decode_seconds;
} TurnRecord;

typedef struct {
    Pair *pair;
    ChatTemplate ct;
    char *code;                 // the held-out prompt's text
    int reply_tokens;
} ChatBench;

// The user's message of turn t.
static char *message(const ChatBench *cb, int t) {
    char *text;
    if (t > 0) return strdup(EDITS[t - 1]);
    if (asprintf(&text, "Here is some code:\n\n%s\n\nWhat does it do?", cb->code) < 0) die("out of memory");
    return text;
}

// One conversation by `mode`, its caches kept from turn to turn or dropped before each; rec[t] and the replies'
// ids replies[t · reply_tokens ..] (n_replies[t] of them).
static void converse(Bench *b, ChatBench *cb, Mode mode, bool keep, TurnRecord *rec, int *replies, int *n_replies) {
    Pair *pair = cb->pair;
    SpecParams params = {.sampling = {0.0f, 0, 1.0f}, .policy = GAMMA_AUTO, .gamma = 5,
                         .max_tokens = cb->reply_tokens, .eos_id = pair->target.cfg.eos_token_id,
                         .eos_ids = pair->target.cfg.eos_ids, .n_eos = pair->target.cfg.n_eos};
    static const DrafterKind kinds[] = {DRAFTER_NONE, DRAFTER_LOOKUP, DRAFTER_MODEL, DRAFTER_STAGED};
    Drafters drafters = {0};
    Conversation conv;
    Err err;
    if (drafter_open(&drafters, kinds[mode], &pair->draft, &params, 0, LOOKUP_STAGED_MIN_MATCH, &err) ||
        conversation_init(&conv, &pair->target, drafters.drafter, &err))
        die("%s", err.msg);
    json_t *messages = json_array();
    for (int t = 0; t < TURNS; t++) {
        char *user = message(cb, t), *reply_text;
        json_array_append_new(messages, json_pack("{s:s, s:s}", "role", "user", "content", user));
        free(user);
        JinjaOutput rendered;
        int *ids, n_ids, *out = replies + (size_t)t * cb->reply_tokens;
        size_t len;
        SpecStats st;
        if (chat_template_render(&cb->ct, messages, true, NULL, &rendered, &err) ||
            chat_encode(&pair->tok, &rendered, &ids, &n_ids, &err))
            die("%s", err.msg);
        if (!keep) conversation_reset(&conv);
        rec[t] = (TurnRecord){.prompt = n_ids};
        if (conversation_reply(&conv, ids, n_ids, &params, out, &n_replies[t], &st, &rec[t].reused, &err) ||
            tokenizer_decode(&pair->tok, out, n_replies[t], &reply_text, &len, &err))
            die("chat suite, turn %d: %s", t + 1, err.msg);
        rec[t].generated = n_replies[t];
        rec[t].prefill_seconds = st.prefill_seconds;
        rec[t].decode_seconds = st.decode_seconds;
        json_array_append_new(messages, json_pack("{s:s, s:s%}", "role", "assistant", "content", reply_text, len));
        free(reply_text);
        free(ids);
        jinja_output_free(&rendered);
        progress_show(&b->progress, MODE_NAMES[mode], (double)(t + 1) / TURNS);
    }
    b->progress.step++;
    json_decref(messages);
    conversation_free(&conv);
    drafter_close(&drafters);
}

// The chat template: the target folder's, else PAIR_TEMPLATE; and the first held-out prompt's text, cut to its
// last CODE_TOKENS tokens so that five turns fit the context.
static bool chat_bench_open(Bench *b, ChatBench *cb, Pair *pair) {
    Err err;
    *cb = (ChatBench){.pair = pair};
    if (chat_template_load(&cb->ct, pair->target_dir, &err) &&
        chat_template_from_source(&cb->ct, PAIR_TEMPLATE, "run-bench's ChatML-like template", &err))
        die("%s", err.msg);
    const int n_ctx = pair->target.cfg.n_positions;
    int n_prompts;
    Prompt *prompts = prompts_load(pair, PROMPTS_HELD_OUT, 1, n_ctx - CODE_TOKENS, &n_prompts);
    size_t len;
    if (n_prompts < 1 || tokenizer_decode(&pair->tok, prompts[0].ids, prompts[0].n, &cb->code, &len, &err))
        die("chat suite: no held-out prompt: %s", n_prompts < 1 ? "none" : err.msg);
    prompts_free(prompts, n_prompts);
    cb->reply_tokens = (n_ctx - CODE_TOKENS) / TURNS - MESSAGE_ROOM;
    if (cb->reply_tokens > b->opt.tokens) cb->reply_tokens = b->opt.tokens;
    if (cb->reply_tokens >= 8) return true;
    out(b, "## Conversations\n\nNot run: a context of %d positions leaves no room for %d turns.\n\n", n_ctx, TURNS);
    return false;
}

static json_t *turn_json(const TurnRecord *r) {
    return json_pack("{s:i, s:i, s:i, s:f, s:f}", "prompt_tokens", r->prompt, "reused_tokens", r->reused,
                     "generated_tokens", r->generated, "prefill_seconds", r->prefill_seconds, "decode_seconds",
                     r->decode_seconds);
}

static void print_table(Bench *b, TurnRecord rec[N_MODES][TURNS], TurnRecord fresh[TURNS], bool has_draft) {
    out(b, "| turn | prompt tokens | prefilled (kept / fresh) | prefill ms (kept / fresh) | ms / token target-only |");
    for (int m = 1; m < N_MODES; m++)
        if (m == LOOKUP || has_draft) out(b, " speed-up %s |", MODE_NAMES[m]);
    out(b, "\n|---|---|---|---|---|%s\n", has_draft ? "---|---|---|" : "---|");
    for (int t = 0; t < TURNS; t++) {
        const TurnRecord *k = &rec[TARGET_ONLY][t];
        double per_token = k->decode_seconds / (k->generated > 0 ? k->generated : 1);
        out(b, "| %d | %d | %d / %d | %.1f / %.1f | %.2f |", t + 1, k->prompt, k->prompt - k->reused,
            fresh[t].prompt - fresh[t].reused, k->prefill_seconds * 1e3, fresh[t].prefill_seconds * 1e3,
            per_token * 1e3);
        for (int m = 1; m < N_MODES; m++)
            if (m == LOOKUP || has_draft)
                out(b, " %.2f |", rec[m][t].decode_seconds > 0 ? k->decode_seconds / rec[m][t].decode_seconds : 0);
        out(b, "\n");
    }
    out(b, "\n");
}

void suite_chat(Bench *b, Pair *pair) {
    if (!pair->has_tok) {
        out(b, "## Conversations\n\nNot run: the pair has no tokenizer.\n\n");
        return;
    }
    ChatBench cb;
    if (!chat_bench_open(b, &cb, pair)) return;
    suite_begin(b, "chat", N_MODES + 1);
    out(b, "## Conversations\n\n%d turns over a held-out code prompt (%s, its last %d tokens) and edits asked for, "
        "rendered by %s; greedy replies of at most %d tokens, %d threads. Per turn: the tokens prefilled and the "
        "prefill's time with the caches kept from the last turn and with them dropped; the reply's time per token "
        "target-only, and the speed-up of each drafter over it (ratio of decode times). One conversation, one run "
        "per decoding.\n\n", TURNS, PROMPTS_HELD_OUT, CODE_TOKENS, cb.ct.path, cb.reply_tokens, pool_size(b->pool));
    for (int m = 0; m < 1 + pair->has_draft; m++) {  // warm-up: the weights read once, the threads awake
        Workload w;
        workload_init(&w, m ? &pair->draft : &pair->target, CODE_TOKENS);
        workload_free(&w);
    }
    static TurnRecord rec[N_MODES][TURNS], fresh[TURNS];
    int *replies = malloc(sizeof(int) * TURNS * cb.reply_tokens * (N_MODES + 1)), n_replies[N_MODES + 1][TURNS];
    if (!replies) die("out of memory");
    for (int m = 0; m < N_MODES; m++)
        if (m == TARGET_ONLY || m == LOOKUP || pair->has_draft)
            converse(b, &cb, (Mode)m, true, rec[m], replies + (size_t)m * TURNS * cb.reply_tokens, n_replies[m]);
    converse(b, &cb, TARGET_ONLY, false, fresh, replies + (size_t)N_MODES * TURNS * cb.reply_tokens,
             n_replies[N_MODES]);
    json_t *modes = json_object();
    for (int m = 0; m <= N_MODES; m++) {
        if (m < N_MODES && m != TARGET_ONLY && m != LOOKUP && !pair->has_draft) continue;
        const size_t per_mode = (size_t)TURNS * cb.reply_tokens;
        bool same = memcmp(n_replies[m], n_replies[0], sizeof n_replies[0]) == 0 &&
                    memcmp(replies + m * per_mode, replies, sizeof(int) * per_mode) == 0;
        if (!same) {
            out(b, "**Mismatch**: %s's greedy replies differ from target-only's.\n\n",
                m < N_MODES ? MODE_NAMES[m] : "the conversation without kept caches");
            b->failed = true;
        }
        json_t *turns = json_array();
        for (int t = 0; t < TURNS; t++) json_array_append_new(turns, turn_json(m < N_MODES ? &rec[m][t] : &fresh[t]));
        json_object_set_new(modes, m < N_MODES ? MODE_NAMES[m] : "target-only, caches dropped", turns);
    }
    print_table(b, rec, fresh, pair->has_draft);
    free(replies);
    free(cb.code);
    chat_template_free(&cb.ct);
    suite_end(b, json_pack("{s:i, s:i, s:o}", "turns", TURNS, "reply_tokens", cb.reply_tokens, "modes", modes));
}
