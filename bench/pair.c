// pair.c — the model pair the suites run, its held-out prompts, and forward timing (see bench.h).
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench.h"
#include "random_checkpoint.h"
#include "speculative/compatibility.h"

#define DEFAULT_TARGET "weights/pystd/target"
#define DEFAULT_DRAFT "weights/pystd/draft"

// ---- the pair -----------------------------------------------------------------------------------------------

// Loads the pair's model `which` (0 target, 1 draft) from dir as --quant (--draft-quant) says, and, when the quant
// suite will compare the stored weights with q8 and q4, again in each of those forms that it is not (parse_args:
// the run holds each model as stored or in q8 then); times each load.
static void load(Pair *pair, int which, const char *dir, Bench *b) {
    Model *model = which ? &pair->draft : &pair->target;
    const Quant quant = which ? b->opt.draft_quant : b->opt.quant;
    Err err;
    double t0 = now_seconds();
    if (model_load_quantized(model, dir, b->pool, quant, &err)) die("%s", err.msg);
    pair->load_seconds[which] = now_seconds() - t0;
    if (!(pair->has_forms = b->opt.suites & SUITE_QUANT)) return;
    for (int f = 0, other = 0; f < N_FORMS; f++) {
        if (FORM_QUANTS[f] == quant) {
            pair->forms[which][f] = model;
            pair->form_load_seconds[which][f] = pair->load_seconds[which];
            continue;
        }
        Model *copy = &pair->others[which][other++];
        t0 = now_seconds();
        if (model_load_quantized(copy, dir, b->pool, FORM_QUANTS[f], &err)) die("%s", err.msg);
        pair->forms[which][f] = copy;
        pair->form_load_seconds[which][f] = now_seconds() - t0;
    }
}

// A random pair of the shipped pair's target shape (V = 8192, d = 384, 8 layers, 512 positions). The draft has
// the target's seed and width but one layer, so it shares the embeddings and the first block and agrees with
// the target often when sampling (rarely when greedy: random logits are nearly flat). Loaded, then deleted.
static void open_random(Pair *pair, Bench *b) {
    char dir[] = "/tmp/specdec-bench-XXXXXX", sub[64];
    if (!mkdtemp(dir)) die("cannot make a temporary folder for the random pair");
    RandomCheckpoint spec = {.n_layer = 8, .n_embd = 384, .n_head = 6, .vocab_size = 8192, .n_positions = 512,
                             .scale = 0.05f, .seed = 1};
    for (int i = 0; i < 2; i++) {
        Err err;
        snprintf(sub, sizeof sub, "%s/%s", dir, i ? "draft" : "target");
        spec.n_layer = i ? 1 : 8;
        if (mkdir(sub, 0700) || random_checkpoint_write(sub, &spec, &err)) die("%s: %s", sub, err.msg);
        load(pair, i, sub, b);
        random_checkpoint_remove(sub);
    }
    rmdir(dir);
    pair->random = pair->has_draft = true;
    pair->target_dir = "random (8 × 384, V = 8192)";
    pair->draft_dir = "random (1 × 384, the target's first block)";
}

// -m random:<shape>: a random-weight model of a published shape, alone: the runtime's yardsticks, comparable with
// other runtimes' figures for the same models. Its load time and the peak resident memory after loading are
// recorded (the file was just written, so it is read from the page cache: a warm load; the peak includes the q8
// copy when the quant suite loads one). With -d random, a matching draft: the shape with one block and the
// target's seed (its embeddings and first block), as open_random's — for the speculative and trees suites.
static const struct {
    const char *name;
    RandomCheckpoint spec;
} SHAPES[] = {
    {"gpt2-small", {.n_layer = 12, .n_embd = 768, .n_head = 12, .vocab_size = 50257, .n_positions = 1024}},
    {"gpt2-small-f32", {.n_layer = 12, .n_embd = 768, .n_head = 12, .vocab_size = 50257, .n_positions = 1024}},
    {"gpt2-small-bf16", {.n_layer = 12, .n_embd = 768, .n_head = 12, .vocab_size = 50257, .n_positions = 1024,
                         .bf16 = true}},
    // Llama-3.2-1B: 16 × 2048, 32 heads, 8 KV heads, F = 8192, V = 128256, tied; context cut to 2048
    {"llama-3.2-1b", {.model_type = "llama", .n_layer = 16, .n_embd = 2048, .n_head = 32, .n_kv_head = 8,
                      .n_inner = 8192, .vocab_size = 128256, .n_positions = 2048, .bf16 = true}},
    // Qwen2.5-0.5B: 24 × 896, 14 heads, 2 KV heads, F = 4864, V = 151936, tied, q/k/v biases
    {"qwen2.5-0.5b", {.model_type = "qwen2", .n_layer = 24, .n_embd = 896, .n_head = 14, .n_kv_head = 2,
                      .n_inner = 4864, .vocab_size = 151936, .n_positions = 2048, .bf16 = true}},
};

static bool open_random_shape(Pair *pair, Bench *b) {
    const char *name = pair->target_dir;
    int shape = -1;
    for (int i = 0; i < (int)(sizeof SHAPES / sizeof SHAPES[0]); i++)
        if (strncmp(name, "random:", 7) == 0 && strcmp(name + 7, SHAPES[i].name) == 0) shape = i;
    if (shape < 0) return false;
    char dir[] = "/tmp/specdec-bench-XXXXXX";
    if (!mkdtemp(dir)) die("cannot make a temporary folder for %s", name);
    RandomCheckpoint spec = SHAPES[shape].spec;
    spec.scale = 0.05f;
    spec.seed = 1;
    Err err;
    if (random_checkpoint_write(dir, &spec, &err)) die("%s: %s", dir, err.msg);
    load(pair, 0, dir, b);
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    pair->load_peak_mb = usage.ru_maxrss * 1024.0 / 1e6;  // ru_maxrss is in KiB; MB as the weights are counted
    random_checkpoint_remove(dir);
    pair->random = true;
    if (pair->draft_dir && strcmp(pair->draft_dir, "random") == 0) {
        spec.n_layer = 1;
        if (mkdir(dir, 0700) || random_checkpoint_write(dir, &spec, &err)) die("%s: %s", dir, err.msg);
        load(pair, 1, dir, b);
        random_checkpoint_remove(dir);
        pair->has_draft = true;
        pair->draft_dir = "random (1 block: the target's first, and its embeddings)";
    } else {
        pair->draft_dir = NULL;
    }
    return true;
}

void pair_open(Pair *pair, Bench *b) {
    *pair = (Pair){.target_dir = b->opt.target_dir, .draft_dir = b->opt.draft_dir};
    if (pair->target_dir && open_random_shape(pair, b)) return;
    if (!pair->target_dir) {
        if (access(DEFAULT_TARGET "/config.json", F_OK) != 0) {
            fprintf(stderr, "run-bench: NOTE: %s is absent (make weights); benchmarking a RANDOM pair of its shape "
                            "instead — speeds are representative, acceptance and speed-ups are not\n",
                    DEFAULT_TARGET);
            open_random(pair, b);
            return;
        }
        pair->target_dir = DEFAULT_TARGET;
        pair->draft_dir = pair->draft_dir ? pair->draft_dir : DEFAULT_DRAFT;
    }
    load(pair, 0, pair->target_dir, b);
    if (pair->draft_dir) {
        load(pair, 1, pair->draft_dir, b);
        pair->has_draft = true;
    }
    Err err;
    if (pair->has_draft) {  // the pairs specdec generate accepts: one tokenizer, embeddings maybe padded apart
        int n_shared;
        if (draft_shared_vocabulary(&pair->target, pair->target_dir, &pair->draft, pair->draft_dir, &n_shared, &err))
            die("%s", err.msg);
        model_limit_vocab(&pair->target, n_shared);
        model_limit_vocab(&pair->draft, n_shared);
        for (int i = 0; i < 2 * (N_FORMS - 1) && pair->has_forms; i++)
            model_limit_vocab(&pair->others[i / (N_FORMS - 1)][i % (N_FORMS - 1)], n_shared);
    }
    pair->has_tok = dir_has_tokenizer(pair->target_dir);
    if (pair->has_tok && tokenizer_load_dir(&pair->tok, pair->target_dir, &err)) die("%s", err.msg);
}

void pair_open_useless_draft(const Pair *pair, Bench *b, Model *draft) {
    char dir[] = "/tmp/specdec-bench-XXXXXX";
    if (!mkdtemp(dir)) die("cannot make a temporary folder for a random draft");
    const Config *c = &pair->draft.cfg;
    const RandomCheckpoint spec = {.n_layer = c->n_layer, .n_embd = c->n_embd, .n_head = c->n_head,
                                   .vocab_size = pair->target.n_vocab, .n_positions = c->n_positions,
                                   .scale = 0.05f, .seed = 4242};
    Err err;
    if (random_checkpoint_write(dir, &spec, &err)) die("%s: %s", dir, err.msg);
    if (model_load_quantized(draft, dir, b->pool, b->opt.draft_quant, &err)) die("%s", err.msg);
    random_checkpoint_remove(dir);
}

void pair_close(Pair *pair) {
    model_free(&pair->target);
    if (pair->has_draft) model_free(&pair->draft);
    for (int i = 0; i < (pair->has_draft ? 2 : 1) && pair->has_forms; i++)
        for (int f = 0; f < N_FORMS - 1; f++) model_free(&pair->others[i][f]);
    if (pair->has_tok) tokenizer_free(&pair->tok);
}

bool pair_borrow_tokenizer(Pair *pair) {
    if (pair->has_tok || !pair->random || !dir_has_tokenizer(DEFAULT_TARGET)) return pair->has_tok;
    Err err;
    if (tokenizer_load_dir(&pair->tok, DEFAULT_TARGET, &err)) die("%s", err.msg);
    const int V = tokenizer_vocab_size(&pair->tok);
    if (V > pair->target.n_vocab || (pair->has_draft && V > pair->draft.n_vocab)) {
        tokenizer_free(&pair->tok);
        return false;
    }
    model_limit_vocab(&pair->target, V);
    if (pair->has_draft) model_limit_vocab(&pair->draft, V);
    return pair->has_tok = pair->borrowed_tok = true;
}

void pair_return_tokenizer(Pair *pair) {
    if (!pair->borrowed_tok) return;
    tokenizer_free(&pair->tok);
    model_limit_vocab(&pair->target, pair->target.cfg.vocab_size);
    if (pair->has_draft) model_limit_vocab(&pair->draft, pair->draft.cfg.vocab_size);
    pair->has_tok = pair->borrowed_tok = false;
}

static json_t *model_json(const Model *m, const char *dir) {
    return json_pack("{s:s, s:i, s:i, s:i, s:i, s:i, s:I}", "dir", dir, "n_layer", m->cfg.n_layer, "n_embd",
                     m->cfg.n_embd, "n_head", m->cfg.n_head, "vocab_size", m->cfg.vocab_size, "n_positions",
                     m->cfg.n_positions, "weight_bytes", (json_int_t)m->weight_bytes);
}

json_t *pair_json(const Pair *pair) {
    json_t *j = json_pack("{s:b, s:o}", "random", pair->random, "target", model_json(&pair->target, pair->target_dir));
    if (pair->load_peak_mb > 0)
        json_object_set_new(j, "load", json_pack("{s:f, s:f}", "seconds", pair->load_seconds[0], "peak_resident_MB",
                                                 pair->load_peak_mb));
    if (pair->has_draft) json_object_set_new(j, "draft", model_json(&pair->draft, pair->draft_dir));
    return j;
}

// ---- forward timing -----------------------------------------------------------------------------------------

// A fixed token pattern: tokens[i] for i < n.
void pattern_tokens(int *tokens, int n, int offset, int V) {
    for (int i = 0; i < n; i++) tokens[i] = (int)(((long)(offset + i) * 7919 + 13) % V);
}

double forward_seconds(Model *m, KVCache *cache, int context, int T, float *logits) {
    int tokens[16];
    pattern_tokens(tokens, T, context, m->n_vocab);
    Err err;
    kv_truncate(cache, context);
    double t0 = now_seconds();
    if (model_forward(m, cache, tokens, T, logits, T > 1, &err)) die("%s", err.msg);
    return now_seconds() - t0;
}

void workload_init(Workload *w, Model *m, int context) {
    Err err;
    *w = (Workload){.model = m, .context = context, .logits = malloc(sizeof(float) * 16 * m->cfg.vocab_size)};
    int *prompt = malloc(sizeof(int) * context);
    if (!w->logits || !prompt || model_kv_init(m, &w->cache, &err)) die("out of memory for a workload");
    pattern_tokens(prompt, context, 0, m->n_vocab);
    if (model_forward(m, &w->cache, prompt, context, w->logits, false, &err)) die("%s", err.msg);
    free(prompt);
}

void workload_free(Workload *w) {
    kv_free(&w->cache);
    free(w->logits);
}

double forward_run(void *ctx, int rep) {
    (void)rep;
    Forward *f = ctx;
    return forward_seconds(f->w->model, &f->w->cache, f->w->context, f->T, f->w->logits);
}

// ---- prompts ------------------------------------------------------------------------------------------------

static int compare_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

// Appends the prompts of one .jsonl file to *all.
static void read_jsonl(const char *path, json_t *all) {
    FILE *f = fopen(path, "r");
    if (!f) die("%s: cannot read", path);
    char *line = NULL;
    size_t cap = 0;
    for (int n = 1; getline(&line, &cap, f) > 0; n++) {
        json_error_t error;
        json_t *row = json_loads(line, 0, &error);
        const char *id, *text;
        if (!row || json_unpack(row, "{s:s, s:s}", "id", &id, "prompt", &text))
            die("%s:%d: expected {\"id\": \"...\", \"prompt\": \"...\"}", path, n);
        json_array_append_new(all, row);
    }
    free(line);
    fclose(f);
}

Prompt *prompts_load(const Pair *pair, const char *folder, int count, int reserve, int *n) {
    DIR *dir = opendir(folder);
    if (!dir) die("%s: cannot open the prompt folder", folder);
    char *names[256];
    int n_names = 0;
    for (struct dirent *e; (e = readdir(dir)) && n_names < 256;) {
        size_t len = strlen(e->d_name);
        if (len > 6 && strcmp(e->d_name + len - 6, ".jsonl") == 0) names[n_names++] = strdup(e->d_name);
    }
    closedir(dir);
    qsort(names, (size_t)n_names, sizeof *names, compare_names);
    json_t *all = json_array();
    for (int i = 0; i < n_names; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", folder, names[i]);
        read_jsonl(path, all);
        free(names[i]);
    }
    int total = (int)json_array_size(all);
    if (total == 0) die("%s: no prompts (*.jsonl files of {\"id\", \"prompt\"} lines)", folder);
    *n = count > 0 && count < total ? count : total;
    const int keep = pair->target.cfg.n_positions - reserve;
    Prompt *prompts = calloc((size_t)*n, sizeof *prompts);
    for (int i = 0; i < *n; i++) {
        const char *id, *text;
        json_unpack(json_array_get(all, (size_t)i * total / *n), "{s:s, s:s}", "id", &id, "prompt", &text);
        int *ids, n_ids = (int)strlen(text);
        Err err;
        if (pair->has_tok) {
            if (tokenizer_encode(&pair->tok, text, strlen(text), false, &ids, &n_ids, &err) ||
                tokenizer_add_special_tokens(&pair->tok, &ids, &n_ids, &err))  // as specdec generate does
                die("%s", err.msg);
        } else {
            ids = malloc(sizeof(int) * (n_ids > 0 ? n_ids : 1));
            for (int k = 0; k < n_ids; k++) ids[k] = (unsigned char)text[k] % pair->target.n_vocab;
        }
        if (n_ids == 0) die("%s: prompt %s is empty", folder, id);
        int skip = n_ids > keep ? n_ids - keep : 0;  // keep the prompt's end, which the continuation follows
        memmove(ids, ids + skip, sizeof(int) * (n_ids - skip));
        prompts[i] = (Prompt){strdup(id), ids, n_ids - skip};
    }
    json_decref(all);
    return prompts;
}

void prompts_free(Prompt *prompts, int n) {
    for (int i = 0; i < n; i++) free(prompts[i].id), free(prompts[i].ids);
    free(prompts);
}
