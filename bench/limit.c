// limit.c — the physical limit: memory bandwidth, the matmul kernels against it and against OpenBLAS, and what
// a forward over T tokens costs relative to one (the price of verifying γ = T − 1 drafts).
#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "qk.h"

// ---- memory bandwidth: one thread against all, paired -------------------------------------------------------

static void bench_bandwidth(Bench *b, Memory *memory, json_t *j) {
    Err err;
    ThreadPool *one = pool_create(1, &err);
    if (!one) die("%s", err.msg);
    const int reps = b->opt.reps, all = pool_size(b->pool);
    out(b, "### Memory bandwidth\n\nOne pass over arrays of %.0f MiB, GB/s (10⁹ bytes, counted as STREAM does); "
        "median [min–max] of %d rounds, 1 thread and %d alternating\n\n", memory->n * 8.0 / (1 << 20), reps, all);
    out(b, "| pass | 1 thread | %d threads | %d threads / 1 |\n|---|---:|---:|---:|\n", all, all);
    json_t *rows = json_array();
    double *seconds = malloc(sizeof(double) * 2 * reps);
    for (MemoryOp op = MEM_READ; op < MEM_OPS; op++) {
        MemoryPass passes[2] = {{memory, op, one}, {memory, op, b->pool}};
        Trial trials[2] = {{memory_pass, &passes[0]}, {memory_pass, &passes[1]}};
        measure_rounds(b, memory_op_name(op), trials, 2, reps, 0.05, seconds);
        double bytes = (double)memory_op_bytes(memory, op);
        Summary gbs1 = summary_inverse(summarize(seconds, reps), bytes / 1e9);
        Summary gbs = summary_inverse(summarize(seconds + reps, reps), bytes / 1e9);
        Summary scaling = summarize_ratio(seconds, seconds + reps, reps);
        char c1[64], c2[64], c3[64];
        out(b, "| %s | %s | %s | %s |\n", memory_op_name(op), fmt_range(c1, sizeof c1, gbs1, 1, 1),
            fmt_range(c2, sizeof c2, gbs, 1, 1), fmt_range(c3, sizeof c3, scaling, 1, 2));
        json_array_append_new(rows, json_pack("{s:s, s:I, s:o, s:o, s:o}", "pass", memory_op_name(op), "bytes",
                                              (json_int_t)bytes, "gbs_1_thread", summary_json(gbs1), "gbs_all_threads",
                                              summary_json(gbs), "scaling", summary_json(scaling)));
    }
    json_object_set_new(j, "bandwidth", rows);
    free(seconds);
    pool_free(one);
}

// ---- matmul kernels -----------------------------------------------------------------------------------------

static void matmul_thread(void *ctx, int thread, int n_threads) {
    const Matmul *mm = ctx;
    int j0, j1;
    pool_share(mm->n_out, 16, thread, n_threads, &j0, &j1);
    if (j0 == j1) return;
    if (weight_quantized(mm->type))
        quantized_matmul(mm->kernels, mm->type)(mm->out, mm->xq, mm->w, NULL, mm->T, mm->n_in, mm->n_out, j0, j1);
    else if (mm->type == BF16_DOT)
        mm->kernels->matmul_bf16_dot(mm->out, mm->xb, mm->w, NULL, mm->T, mm->n_in, mm->n_out, j0, j1);
    else if (mm->kernels)
        mm->kernels->matmul[mm->type](mm->out, mm->x, mm->w, NULL, mm->T, mm->n_in, mm->n_in, mm->n_out, j0, j1);
    else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, mm->T, j1 - j0, mm->n_in, 1.0f, mm->x, mm->n_in,
                    (const float *)mm->w + (size_t)j0 * mm->n_in, mm->n_in, 0.0f, mm->out + j0, mm->n_out);
}

double matmul_run(void *ctx, int rep) {
    (void)rep;
    Matmul *mm = ctx;
    double t0 = now_seconds();
    pool_run_on(mm->pool, mm->threads, matmul_thread, mm);
    return now_seconds() - t0;
}

// A weight matrix in F32, BF16 (the same values, rounded), q8 and q4, and in GGUF's Q4_K and Q6_K as K-panels of
// random blocks (bench has no K quantizer; the values change no timing), activations for up to max_T rows (and
// quantized), room for out.
typedef struct {
    const char *name;           // "cache", "large", "GPT-2 MLP"
    int n_out, n_in;
    float *w32, *x, *out;       // [n_out, n_in], [max_T, n_in], [max_T, n_out]
    uint16_t *w16;              // [n_out, n_in]
    uint8_t *w8;                // q8_matrix_bytes(n_out, n_in)
    uint8_t *w4;                // q4_matrix_bytes(n_out, n_in)
    Q8Block *xq;                // [max_T, q8_blocks(n_in)]
    uint16_t *xb;               // [max_T, panel_row_length(n_in)]
    uint8_t *wk[2];             // Q4_K's and Q6_K's quantized_matrix_bytes; NULL where n_in % 256 ≠ 0
} Weights;

static void *aligned(size_t bytes) {
    void *p = aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!p) die("out of memory (%zu bytes)", bytes);
    return p;
}

// The K-quants the matmul table times: GGUF's Q4_K and Q6_K (Q4_K_M files' two), beside q8 and q4.
static const WeightType K_TIMED[2] = {WEIGHT_Q4_K, WEIGHT_Q6_K};

// A [n_out, n_in] matrix of random GGUF blocks of K-quant `type` in K-panels, their F16 scales (d, dmin) 2⁻⁷.
static uint8_t *random_k_matrix(WeightType type, int n_out, int n_in, uint32_t *state) {
    const uint32_t ggml = type == WEIGHT_Q4_K ? GGML_Q4_K : GGML_Q6_K;
    const size_t row_bytes = qk_row_bytes(ggml, (size_t)n_in), super_bytes = qk_row_bytes(ggml, K_SUPER);
    uint8_t *w = aligned(quantized_matrix_bytes(type, n_out, n_in)), *blocks = aligned(row_bytes);
    memset(w, 0, quantized_matrix_bytes(type, n_out, n_in));
    for (int j = 0; j < n_out; j++) {
        for (size_t i = 0; i < row_bytes; i++) blocks[i] = (uint8_t)((*state = *state * 1664525u + 1013904223u) >> 24);
        for (size_t at = 0; at < row_bytes; at += super_bytes) {  // d and dmin (Q4_K at 0 and 2; Q6_K's d at 208)
            static const uint8_t HALF_2_TO_MINUS_7[2] = {0x00, 0x20};
            memcpy(blocks + at + (ggml == GGML_Q6_K ? 208 : 0), HALF_2_TO_MINUS_7, 2);
            if (ggml == GGML_Q4_K) memcpy(blocks + at + 2, HALF_2_TO_MINUS_7, 2);
        }
        k_pack_row(w + (size_t)(j / Q8_PANEL) * k_panel_bytes(type, n_in), type, j % Q8_PANEL, blocks, n_in);
    }
    free(blocks);
    return w;
}

static void weights_init(Weights *w, const char *name, int n_out, int n_in, int max_T) {
    const size_t n = (size_t)n_out * n_in;
    *w = (Weights){name, n_out, n_in, aligned(4 * n), aligned(4 * (size_t)max_T * n_in),
                   aligned(4 * (size_t)max_T * n_out), aligned(2 * n), aligned(q8_matrix_bytes(n_out, n_in)),
                   aligned(q4_matrix_bytes(n_out, n_in)),
                   aligned(sizeof(Q8Block) * (size_t)max_T * q8_blocks(n_in)),
                   aligned(2 * (size_t)max_T * panel_row_length(n_in)), {NULL, NULL}};
    uint32_t state = 12345;
    for (size_t i = 0; i < n; i++) {
        state = state * 1664525u + 1013904223u;
        float v = (float)(state >> 8) * 0x1p-24f - 0.5f;
        uint32_t bits;
        memcpy(&bits, &v, 4);
        w->w16[i] = (uint16_t)(bits >> 16);
        w->w32[i] = bf16_to_f32(w->w16[i]);  // the same values in both dtypes
    }
    for (size_t i = 0; i < (size_t)max_T * n_in; i++) w->x[i] = (float)(i % 17) * 0.1f - 0.8f;
    for (int j = 0; j < n_out; j += Q8_PANEL)
        q8_quantize_panel(w->w8 + (size_t)(j / Q8_PANEL) * q8_panel_bytes(n_in), w->w32 + (size_t)j * n_in,
                          n_out - j < Q8_PANEL ? n_out - j : Q8_PANEL, n_in, n_in);
    for (int j = 0; j < n_out; j += Q4_PANEL)
        q4_quantize_panel(w->w4 + (size_t)(j / Q4_PANEL) * q4_panel_bytes(n_in), w->w32 + (size_t)j * n_in,
                          n_out - j < Q4_PANEL ? n_out - j : Q4_PANEL, n_in, n_in);
    for (int k = 0; k < 2 && n_in % K_SUPER == 0; k++) w->wk[k] = random_k_matrix(K_TIMED[k], n_out, n_in, &state);
    q8_quantize_rows(w->xq, w->x, max_T, n_in, n_in);
    bf16_round_rows(w->xb, w->x, max_T, n_in, n_in, false);  // (the order of pairs changes no timing)
}

static void weights_free(Weights *w) {
    free(w->w32), free(w->x), free(w->out), free(w->w16), free(w->w8), free(w->w4), free(w->xq), free(w->xb);
    free(w->wk[0]), free(w->wk[1]);
}

const char *matmul_type_name(int type) {
    static const char *const NAMES[] = {
        [WEIGHT_F32] = "F32",   [WEIGHT_F16] = "F16",   [WEIGHT_BF16] = "BF16",   [WEIGHT_Q8] = "q8",
        [WEIGHT_Q4] = "q4",     [WEIGHT_Q8_0] = "Q8_0", [WEIGHT_Q4_0] = "Q4_0",   [WEIGHT_Q5_0] = "Q5_0",
        [WEIGHT_Q5_1] = "Q5_1", [WEIGHT_Q4_1] = "Q4_1", [WEIGHT_Q4_K] = "Q4_K",   [WEIGHT_Q5_K] = "Q5_K",
        [WEIGHT_Q6_K] = "Q6_K", [BF16_DOT] = "BF16, x BF16"};
    return NAMES[type];
}

// Bytes of W in `type`.
static double weight_bytes(const Weights *w, int type) {
    return weight_quantized(type) && type != BF16_DOT ? (double)quantized_matrix_bytes(type, w->n_out, w->n_in)
                                                      : (double)w->n_out * w->n_in * (type == WEIGHT_F32 ? 4 : 2);
}

enum { MAX_KERNELS = 8 };

// Times every kernel variant — and OpenBLAS first, for F32 — on one weight matrix, dtype and T, in rounds.
// Returns their number k; kernels[i] is NULL for OpenBLAS.   seconds: [k, reps]
static int time_matmuls(Bench *b, const Weights *w, int type, int T, const Kernels **kernels, double *seconds) {
    int n_variants, k = 0;
    const Kernels *const *variants = kernels_available(&n_variants);
    Matmul cases[MAX_KERNELS];
    Trial trials[MAX_KERNELS];
    for (int v = type == WEIGHT_F32 ? -1 : 0; v < n_variants && k < MAX_KERNELS; v++) {
        if (type == BF16_DOT && !variants[v]->matmul_bf16_dot) continue;
        kernels[k] = v < 0 ? NULL : variants[v];
        const void *weights = type == WEIGHT_F32    ? (void *)w->w32
                              : type == WEIGHT_Q8   ? (void *)w->w8
                              : type == WEIGHT_Q4   ? (void *)w->w4
                              : type == WEIGHT_Q4_K ? (void *)w->wk[0]
                              : type == WEIGHT_Q6_K ? (void *)w->wk[1]
                                                    : w->w16;
        cases[k] = (Matmul){kernels[k], type, weights, w->x, w->xq, w->xb, w->out, T, w->n_in, w->n_out, b->pool,
                            pool_size(b->pool)};
        trials[k] = (Trial){matmul_run, &cases[k]};
        k++;
    }
    char label[96];
    snprintf(label, sizeof label, "matmul %s %s T=%d", w->name, matmul_type_name(type), T);
    measure_rounds(b, label, trials, k, b->opt.reps, 0.02, seconds);
    return k;
}

static const char *kernel_name(const Kernels *k) { return k ? k->name : "OpenBLAS"; }

// One row per kernel: time, GB/s of W, GFLOP/s, and the time over the selected variant's in the same round.
static void matmul_rows(Bench *b, const Weights *w, int type, int T, json_t *rows) {
    const int reps = b->opt.reps;
    const Kernels *kernels[MAX_KERNELS];
    double *seconds = malloc(sizeof(double) * MAX_KERNELS * reps);
    const int k = time_matmuls(b, w, type, T, kernels, seconds);
    int selected = 0;
    for (int i = 0; i < k; i++) selected = kernels[i] == b->kernels ? i : selected;
    const char *dtype = matmul_type_name(type);
    const double bytes = weight_bytes(w, type), flops = 2.0 * T * w->n_out * w->n_in;
    for (int i = 0; i < k; i++) {
        Summary s = summarize(seconds + (size_t)i * reps, reps);
        Summary rel = summarize_ratio(seconds + (size_t)i * reps, seconds + (size_t)selected * reps, reps);
        char c1[64], c2[64];
        out(b, "| %s [%d, %d] | %s | %d | %s | %s | %.1f | %.1f | %s |\n", w->name, w->n_out, w->n_in, dtype, T,
            kernel_name(kernels[i]), fmt_range(c1, sizeof c1, s, 1e6, 0), bytes / s.median / 1e9,
            flops / s.median / 1e9, fmt_range(c2, sizeof c2, rel, 1, 2));
        json_array_append_new(rows, json_pack("{s:s, s:i, s:i, s:s, s:i, s:s, s:o, s:f, s:f, s:o}", "weights",
                                              w->name, "n_out", w->n_out, "n_in", w->n_in, "dtype", dtype, "T", T,
                                              "kernel", kernel_name(kernels[i]), "seconds", summary_json(s), "gbs",
                                              bytes / s.median / 1e9, "gflops", flops / s.median / 1e9,
                                              "time_vs_selected", summary_json(rel)));
    }
    free(seconds);
}

// Matrix sizes: one that stays in the L2 caches of the threads, and a large one, 4× a 32 MiB L3 as F32 — served
// from memory on such a CPU in F32 and BF16, but from the L3 of one with more, and in q4 from this one's (bench_matmul
// says which).
enum { N_SIZES = 2, N_TYPES = 7, N_T = 2 };
static const int TYPES[N_TYPES] = {WEIGHT_F32, WEIGHT_BF16, BF16_DOT, WEIGHT_Q8, WEIGHT_Q4, WEIGHT_Q4_K, WEIGHT_Q6_K};
static const struct {
    const char *name;
    int n_out, n_in;
} SIZES[N_SIZES] = {{"cache", 384, 384}, {"large", 8192, 4096}};
static const int TS[N_T] = {1, 8};

static void bench_matmul(Bench *b, json_t *j) {
    out(b, "\n### Matmul kernels\n\nout = x Wᵀ on %d threads (each its share of W's rows, as in the model); "
        "median µs [min–max] of %d rounds in which every kernel runs; GB/s of W and GFLOP/s from the median; the "
        "last column is the time over the %s kernel's in the same round (model_forward's choice). q8, q4: W quantized "
        "(kernels.h), x quantized to 8 bits once beforehand (the model does it once per matmul, on one thread); BF16, x BF16: "
        "x rounded to BF16 once beforehand, the BF16 dot product of the variants that have one (--quant bf16); Q4_K, "
        "Q6_K: GGUF's K-quants as stored (kernels.h's K-panels, random blocks), against the same x as q8's, where n_in "
        "is whole super-blocks of 256\n\n",
        pool_size(b->pool), b->opt.reps, b->kernels->name);
    // Which forms of the large W stream from memory: those of at least twice the L3.
    const long l3 = l3_bytes(), n_out = SIZES[1].n_out, n_in = SIZES[1].n_in;
    const struct {
        const char *name;
        long bytes;
    } forms[] = {{"F32", n_out * n_in * 4},
                 {"BF16", n_out * n_in * 2},
                 {"q8", (long)q8_matrix_bytes((int)n_out, (int)n_in)},
                 {"q4", (long)q4_matrix_bytes((int)n_out, (int)n_in)}};
    if (l3 > 0) {
        out(b, "The large W is");
        for (size_t f = 0; f < sizeof forms / sizeof *forms; f++)
            out(b, "%s %.0f MiB as %s (%s)", f ? "," : "", forms[f].bytes / 1048576.0, forms[f].name,
                forms[f].bytes >= 2 * l3 ? "from memory" : "may be served from the L3");
        out(b, "; this CPU's L3 is %ld MiB. The model's decode step is the memory-bound figure (suite decode).\n\n",
            l3 >> 20);
    }
    out(b, "| W | dtype | T | kernel | µs | GB/s | GFLOP/s | time / %s |\n|---|---|---:|---|---:|---:|---:|---:|\n",
        b->kernels->name);
    json_t *rows = json_array();
    for (int s = 0; s < N_SIZES; s++) {
        Weights w;
        weights_init(&w, SIZES[s].name, SIZES[s].n_out, SIZES[s].n_in, 8);
        for (int type = 0; type < N_TYPES; type++)
            for (int t = 0; t < N_T && (!k_quant(TYPES[type]) || w.wk[0]); t++) matmul_rows(b, &w, TYPES[type], TS[t], rows);
        weights_free(&w);
    }
    json_object_set_new(j, "matmul", rows);
}

// Where OpenBLAS's sgemm overtakes each variant as T grows, on GPT-2-small's MLP matrix [3072, 768] in F32: what a
// long F32 prompt gives up by keeping the canonical order of arithmetic (kernels.h), which sgemm does not.
enum { N_CROSSOVER = 7 };
static const int CROSSOVER_TS[N_CROSSOVER] = {8, 16, 32, 64, 128, 256, 512};

static void bench_crossover(Bench *b, json_t *j) {
    const int reps = b->opt.reps;
    Weights w;
    weights_init(&w, "GPT-2 MLP", 3072, 768, CROSSOVER_TS[N_CROSSOVER - 1]);
    const Kernels *kernels[MAX_KERNELS];
    double *seconds = malloc(sizeof(double) * MAX_KERNELS * reps);
    json_t *rows = json_array();
    int k = 0, first_win[MAX_KERNELS] = {0};  // per variant, the least T at which OpenBLAS is faster (0: none)
    for (int t = 0; t < N_CROSSOVER; t++) {
        const int T = CROSSOVER_TS[t];
        k = time_matmuls(b, &w, WEIGHT_F32, T, kernels, seconds);
        if (t == 0) {
            out(b, "\n### OpenBLAS crossover\n\nF32 W [%d, %d] (GPT-2-small's MLP), %d threads: time of each kernel "
                "over OpenBLAS's in the same round, median [min–max] of %d rounds (> 1: OpenBLAS is faster)\n\n| T |",
                w.n_out, w.n_in, pool_size(b->pool), reps);
            for (int i = 1; i < k; i++) out(b, " %s / OpenBLAS |", kernels[i]->name);
            out(b, "\n|---:|");
            for (int i = 1; i < k; i++) out(b, "---:|");
            out(b, "\n");
        }
        out(b, "| %d |", T);
        for (int i = 1; i < k; i++) {
            Summary ratio = summarize_ratio(seconds + (size_t)i * reps, seconds, reps);
            char c1[64];
            out(b, " %s |", fmt_range(c1, sizeof c1, ratio, 1, 2));
            if (ratio.median > 1 && !first_win[i]) first_win[i] = T;
            json_array_append_new(rows, json_pack("{s:i, s:s, s:o}", "T", T, "kernel", kernels[i]->name,
                                                  "time_vs_openblas", summary_json(ratio)));
        }
        out(b, "\n");
    }
    out(b, "\n");
    for (int i = 1; i < k; i++)
        out(b, "- %s: OpenBLAS faster from T = %s%d (measured here; the forward never calls it)\n", kernels[i]->name,
            first_win[i] ? "" : "never up to ", first_win[i] ? first_win[i] : CROSSOVER_TS[N_CROSSOVER - 1]);
    json_object_set_new(j, "openblas_crossover", rows);
    free(seconds);
    weights_free(&w);
}

// ---- verification cost --------------------------------------------------------------------------------------

enum { MAX_T = 16, VERIFY_CONTEXT = 64 };

// time(T) / time(1) for T = 1..16 after 64 cached positions, every T once per round: [MAX_T] each.
static void verify_curve(Bench *b, Model *m, const char *label, Summary *ms, Summary *ratio) {
    Workload w;
    workload_init(&w, m, VERIFY_CONTEXT);
    Forward forwards[MAX_T];
    Trial trials[MAX_T];
    for (int t = 0; t < MAX_T; t++) forwards[t] = (Forward){&w, t + 1}, trials[t] = (Trial){forward_run, &forwards[t]};
    const int reps = b->opt.reps;
    double *seconds = malloc(sizeof(double) * MAX_T * reps);
    measure_rounds(b, label, trials, MAX_T, reps, 0.01, seconds);
    for (int t = 0; t < MAX_T; t++) {
        ms[t] = summary_scaled(summarize(seconds + (size_t)t * reps, reps), 1e3);
        ratio[t] = summarize_ratio(seconds + (size_t)t * reps, seconds, reps);
    }
    free(seconds);
    workload_free(&w);
}

// Beside each ratio, the rate of the forward's matrix arithmetic, 2 · T · model_matrix_multiply_adds FLOPs over its
// median time: where time(T) rises with T, a forward runs at the pace of its arithmetic, and this rate is then
// close to what the kernel table above measures with the weights in cache — the floor of a verification's cost.
static void bench_verify(Bench *b, Pair *pair, json_t *j) {
    const int n = pair->has_draft ? 2 : 1;
    Model *models[2] = {&pair->target, &pair->draft};
    const char *names[2] = {"target", "draft"};
    Summary ms[2][MAX_T], ratio[2][MAX_T];
    for (int i = 0; i < n; i++) verify_curve(b, models[i], names[i], ms[i], ratio[i]);
    out(b, "\n### Verification cost\n\nOne forward of T new tokens (logits for all T) after %d cached positions; "
        "time(T) / time(1) is the median [min–max] of ratios within rounds in which every T runs once (%d rounds); "
        "GFLOP/s: the weight matrices' arithmetic, 2 · T · multiply-adds per token, over the median time"
        "\n\n| T | target ms | target GFLOP/s | target time(T) / time(1) |%s\n|---:|---:|---:|---:|%s\n",
        VERIFY_CONTEXT, b->opt.reps, n > 1 ? " draft ms | draft GFLOP/s | draft time(T) / time(1) |" : "",
        n > 1 ? "---:|---:|---:|" : "");
    json_t *curves = json_object();
    for (int i = 0; i < n; i++) json_object_set_new(curves, names[i], json_array());
    for (int t = 0; t < MAX_T; t++) {
        out(b, "| %d |", t + 1);
        for (int i = 0; i < n; i++) {
            char c1[64], c2[64];
            const double gflops = 2.0 * (t + 1) * model_matrix_multiply_adds(models[i]) / (ms[i][t].median * 1e6);
            out(b, " %s | %.1f | %s |", fmt_range(c1, sizeof c1, ms[i][t], 1, 3), gflops,
                fmt_range(c2, sizeof c2, ratio[i][t], 1, 2));
            json_array_append_new(json_object_get(curves, names[i]),
                                  json_pack("{s:i, s:o, s:f, s:o}", "T", t + 1, "ms", summary_json(ms[i][t]), "gflops",
                                            gflops, "ratio", summary_json(ratio[i][t])));
        }
        out(b, "\n");
    }
    json_object_set_new(j, "verify_cost", curves);
}

void suite_limit(Bench *b, Pair *pair, Memory *memory) {
    suite_begin(b, "limit", MEM_OPS + N_SIZES * N_TYPES * N_T + N_CROSSOVER + (pair->has_draft ? 2 : 1));
    json_t *j = json_object();
    out(b, "## Limit\n\n");
    bench_bandwidth(b, memory, j);
    bench_matmul(b, j);
    bench_crossover(b, j);
    bench_verify(b, pair, j);
    suite_end(b, j);
}
