// test_isa.c — the same bits under every kernel variant this CPU runs (SPECDEC_ISA = scalar, avx2, avxvnni,
// avx512): the kernels keep one order of arithmetic (kernels.h, SUM_LANES; docs/kernels.md, "One order of
// arithmetic"), so a model's logits, and the text sampled from them, do not depend on the variant. Every fixture
// (as stored: F32, F16, BF16; in q8 and in q4) and the shipped pair, prompts of 1 to 512 tokens in one forward;
// and speculative sampling at a temperature, whose γ policy must not depend on the variant either (nor on whether
// a CPU is free for pipelined drafting); the coupled sampler's text, whatever γ; README.md's example output.
// `--quant bf16` is left out: AVX512_BF16's dot product has its own order (docs/kernels.md).
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/file.h"
#include "harness.h"
#include "hf_expected.h"
#include "model/model.h"
#include "random_checkpoint.h"

#define TARGET "weights/pystd/target"
#define DRAFT "weights/pystd/draft"

// SPECDEC_ISA as the test found it, put back when it ends.
typedef struct {
    bool was_set;
    char value[32];
} SavedIsa;

static SavedIsa save_isa(void) {
    SavedIsa s = {.was_set = getenv("SPECDEC_ISA") != NULL};
    if (s.was_set) snprintf(s.value, sizeof s.value, "%s", getenv("SPECDEC_ISA"));
    return s;
}

static void restore_isa(const SavedIsa *s) {
    if (s->was_set) setenv("SPECDEC_ISA", s->value, 1);
    else unsetenv("SPECDEC_ISA");
}

// Every position's logits [T, *V] of tokens[0, T) fed in one forward on 2 threads under the variant `isa`, or NULL.
static float *logits_under(const char *isa, const char *dir, Quant quant, const int *tokens, int T, int *V) {
    setenv("SPECDEC_ISA", isa, 1);
    Err err = {{0}};
    ThreadPool *pool = pool_create(2, &err);
    Model m;
    KVCache cache;
    float *logits = NULL;
    if (pool && model_load_quantized(&m, dir, pool, quant, &err) == 0) {
        m.work_per_thread = 0;  // every job split over both threads, small as the models are
        if (model_kv_init(&m, &cache, &err) == 0) {
            *V = m.n_vocab;
            logits = malloc(sizeof(float) * (size_t)T * m.n_vocab);
            if (model_forward(&m, &cache, tokens, T, logits, true, &err)) free(logits), logits = NULL;
            kv_free(&cache);
        }
        model_free(&m);
    }
    if (pool) pool_free(pool);
    CHECK(logits, "%s under %s (%s, T = %d): %s", dir, isa, quant_name(quant), T, err.msg);
    return logits;
}

// The logits of every position of a random prompt of each length in `lengths`, fed in one forward (ids below 50,
// which every vocabulary here holds), under every variant against the scalar reference's, bit for bit.
static void check_identical(const char *dir, Quant quant, const int *lengths, int n_lengths) {
    int n;
    const Kernels *const *list = kernels_available(&n);
    for (int l = 0; l < n_lengths && !test_failures(); l++) {
        const int T = lengths[l];
        int *tokens = malloc(sizeof(int) * T), V = 0, V_k = 0;
        for (int i = 0; i < T; i++) tokens[i] = test_rand_int(0, 49);
        float *want = logits_under("scalar", dir, quant, tokens, T, &V);
        for (int v = 1; v < n && want; v++) {
            float *got = logits_under(list[v]->name, dir, quant, tokens, T, &V_k);
            for (int t = 0; got && t < T; t++)
                if (memcmp(got + (size_t)t * V, want + (size_t)t * V, sizeof(float) * V) != 0) {
                    CHECK(false, "%s, %s, T = %d: position %d's logits under %s differ from scalar's", dir,
                          quant_name(quant), T, t, list[v]->name);
                    break;
                }
            free(got);
        }
        free(want);
        free(tokens);
    }
}

static const Quant QUANTS[] = {QUANT_NONE, QUANT_Q8, QUANT_Q4};
enum { N_QUANTS = sizeof QUANTS / sizeof *QUANTS };

// The fixtures (F32, F16 and BF16 checkpoints, Conv1D and untied heads, shards; ../shared/fixtures/hf's Llama,
// Mistral, Qwen2, Qwen3 and GPT-2) and the shipped pair, each as stored, in q8 and in q4.
TEST(isa_fixture_logits_identical_across_variants) {
    const SavedIsa saved = save_isa();
    static const int lengths[] = {13};
    glob_t found;
    CHECK(glob("tests/fixtures/*/expected.bin", 0, NULL, &found) == 0, "no fixtures");
    for (int q = 0; q < N_QUANTS; q++) {
        for (size_t f = 0; f < found.gl_pathc; f++) {
            char dir[256];
            snprintf(dir, sizeof dir, "%.*s", (int)(strlen(found.gl_pathv[f]) - strlen("/expected.bin")),
                     found.gl_pathv[f]);
            check_identical(dir, QUANTS[q], lengths, 1);
        }
        for (int f = 0; f < N_HF_FIXTURES; f++) {
            char dir[256];
            snprintf(dir, sizeof dir, "%s/%s", HF_FIXTURES, HF_FIXTURE_NAMES[f]);
            check_identical(dir, QUANTS[q], lengths, 1);
        }
    }
    check_identical(TARGET, QUANT_NONE, lengths, 1);  // (the same quantized code paths as the fixtures')
    check_identical(DRAFT, QUANT_NONE, lengths, 1);
    globfree(&found);
    restore_isa(&saved);
}

// Prompts of 2 and 512 tokens in one forward (every position's logits: 1 to 512 tokens before it), on a random
// Llama-family checkpoint of context 512 whose MLP width (800) spans two of the matmuls' 768-input chunks: as F32,
// in q8 and in q4, and stored as BF16 and as F16.
TEST(isa_long_prompt_logits_identical_across_variants) {
    const SavedIsa saved = save_isa();
    static const int lengths[] = {2, 512};
    const RandomCheckpoint specs[] = {
        {.model_type = "llama", .n_layer = 1, .n_embd = 64, .n_head = 4, .n_kv_head = 2, .n_inner = 800,
         .vocab_size = 300, .n_positions = 512, .scale = 0.3f, .seed = 11},
        {.model_type = "llama", .n_layer = 1, .n_embd = 64, .n_head = 4, .n_kv_head = 2, .n_inner = 800,
         .vocab_size = 300, .n_positions = 512, .bf16 = true, .scale = 0.3f, .seed = 12},
        {.model_type = "llama", .n_layer = 1, .n_embd = 64, .n_head = 4, .n_kv_head = 2, .n_inner = 800,
         .vocab_size = 300, .n_positions = 512, .f16 = true, .scale = 0.3f, .seed = 13},
    };
    for (size_t c = 0; c < sizeof specs / sizeof *specs && !test_failures(); c++) {
        char dir[] = "/tmp/specdec-isa-XXXXXX";
        CHECK(mkdtemp(dir) != NULL, "mkdtemp");
        Err err;
        CHECK(random_checkpoint_write(dir, &specs[c], &err) == 0, "%s", err.msg);
        for (int q = 0; q < (specs[c].bf16 || specs[c].f16 ? 1 : N_QUANTS); q++) check_identical(dir, QUANTS[q], lengths, 2);
        random_checkpoint_remove(dir);
    }
    restore_isa(&saved);
}

// What `generate` prints under the variant `isa`, and its --stats' counts of target calls, drafts and kept drafts
// (the shape of every round the γ policy chose); NULL if it failed.
static char *generated_under(const char *isa, const char *args, char *counts, size_t counts_size) {
    setenv("SPECDEC_ISA", isa, 1);
    char *out = NULL, *err = NULL;
    const int status = run_specdec(args, &out, &err);
    CHECK(status == 0, "`%s` under %s: %d, %s", args, isa, status, err ? err : "");
    const char *calls = err ? strstr(err, "\"target_calls\"") : NULL, *drafted = err ? strstr(err, "\"drafted\"") : NULL,
               *accepted = err ? strstr(err, "\"accepted\"") : NULL;
    CHECK(calls && drafted && accepted, "`%s` under %s: no --stats counts in \"%s\"", args, isa, err ? err : "");
    snprintf(counts, counts_size, "%.24s %.20s %.20s", calls ? calls : "", drafted ? drafted : "",
             accepted ? accepted : "");
    free(err);
    if (status != 0) free(out), out = NULL;
    return out;
}

// The shipped pair sampling at temperature 0.8 (rejection sampling, γ auto: the policy's cost model), with
// pipelined drafting off and on (a machine without a free CPU and one with): every variant prints the scalar
// reference's text without pipelining, after the same rounds (the same target calls, drafts and kept drafts); the
// best variant with pipelining too.
TEST(isa_sampled_speculative_text_identical_across_variants) {
    const SavedIsa saved = save_isa();
    int n;
    const Kernels *const *list = kernels_available(&n);
    static const char *const args[] = {
        "generate -m " TARGET " -d " DRAFT " -p \"def main(\" -n 10 --threads 2 --stats --temp 0.8 --seed 5 "
        "--pipeline off",
        "generate -m " TARGET " -d " DRAFT " -p \"def main(\" -n 10 --threads 2 --stats --temp 0.8 --seed 5 "
        "--pipeline on",
    };
    char want_counts[96], got_counts[96];
    char *want = generated_under("scalar", args[0], want_counts, sizeof want_counts);
    for (int o = 0; o < 2 && want; o++)
        for (int v = o ? n - 1 : 1; v < n; v++) {  // pipelining on: the best variant
            char *got = generated_under(list[v]->name, args[o], got_counts, sizeof got_counts);
            CHECK(got && strcmp(got, want) == 0 && strcmp(got_counts, want_counts) == 0,
                  "`%s`: %s printed \"%s\" (%s), scalar without pipelining \"%s\" (%s)", args[o], list[v]->name,
                  got ? got : "", got_counts, want, want_counts);
            free(got);
        }
    free(want);
    restore_isa(&saved);
}

// `--sampler coupled` at temperature 0.8: every token is the target's Gumbel-max sample under noise keyed by (seed,
// position), the drafts deciding only how many target forwards it takes, so the text must not depend on γ — and γ
// auto plans coupled rounds from the times it measures (docs/kernels.md, "What the plans depend on"), which differ
// between variants, machines and runs. For two seeds, the best variant's text at γ 1 is the reference: at γ 4 and
// auto every variant prints it (scalar, the slowest, at auto and one seed).
TEST(isa_coupled_text_identical_across_gamma_and_variants) {
    const SavedIsa saved = save_isa();
    int n;
    const Kernels *const *list = kernels_available(&n);
    static const char *const gammas[] = {"1", "4", "auto"};
    char counts[96], args[256];
    for (int seed = 1; seed <= 2 && !test_failures(); seed++) {
        char *want = NULL;
        for (int v = n - 1; v >= (seed == 1 ? 0 : 1); v--)
            for (int g = v == n - 1 ? 0 : 2; g < 3; g++) {  // the best variant at every γ, the others at auto
                snprintf(args, sizeof args,
                         "generate -m " TARGET " -d " DRAFT " -p \"def main(\" -n 10 --threads 2 --stats --temp 0.8 "
                         "--sampler coupled --seed %d --gamma %s",
                         seed, gammas[g]);
                char *got = generated_under(list[v]->name, args, counts, sizeof counts);
                if (!want) {
                    want = got;
                    continue;
                }
                CHECK(got && strcmp(got, want) == 0, "`%s` under %s printed \"%s\", %s at γ 1 \"%s\"", args,
                      list[v]->name, got ? got : "", list[n - 1]->name, want ? want : "");
                free(got);
            }
        free(want);
    }
    restore_isa(&saved);
}

// README.md's first command (the line of its "Two commands" that runs build/release/specdec) prints the output
// its "What the first command shows" shows, on 2 threads (the default on 2 CPUs; 1 to 4 print the same), under
// every SIMD variant: a reader gets it whatever the instruction set (scalar prints their text, slower:
// isa_sampled_speculative_text_identical_across_variants).
TEST(isa_readme_example_is_what_every_variant_prints) {
    const SavedIsa saved = save_isa();
    char *readme = NULL;
    size_t size;
    Err err = {{0}};
    CHECK(read_file("README.md", &readme, &size, &err) == 0, "%s", err.msg);
    const char *command = readme ? strstr(readme, "build/release/specdec generate") : NULL;
    const char *shows = readme ? strstr(readme, "### What the first command shows") : NULL;
    const char *block = shows ? strstr(shows, "```\n") : NULL, *end = block ? strstr(block + 4, "```") : NULL;
    CHECK(command && end, "README.md: no first command, or no example output after it");
    if (command && end) {
        const char *generate = command + strlen("build/release/specdec ");
        char args[256], *example = strndup(block + 4, (size_t)(end - block - 4));
        snprintf(args, sizeof args, "%.*s --threads 2", (int)strcspn(generate, "\n"), generate);
        setenv("NO_COLOR", "1", 1);
        int n;
        const Kernels *const *list = kernels_available(&n);
        char counts[96];
        for (int v = 1; v < n; v++) {  // (the command has --stats, which generated_under reads)
            char *out = generated_under(list[v]->name, args, counts, sizeof counts);
            CHECK(out && strstr(out, example), "`%s` under %s printed \"%s\", not README.md's \"%s\"", args,
                  list[v]->name, out ? out : "", example);
            free(out);
        }
        free(example);
    }
    free(readme);
    restore_isa(&saved);
}
