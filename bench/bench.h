// bench.h — the benchmark harness: what its suites share.
//
// run-bench measures, on this machine, how close specdec comes to the physical limit and what speculative
// decoding buys. Ten suites: limit (memory bandwidth, the matmul kernels and where OpenBLAS overtakes them, the
// verification-cost curve), decode (tokens/s and the fraction of the bandwidth), speculative (speed-up and
// acceptance on held-out prompts, beside Theorem 3.8's prediction), tokenizer (encode MB/s), quant (q8
// against the stored weights: load time, speed, and accuracy on the held-out prompts) and threads (decode, the
// verification cost and the speculative speed-up at each thread count of a sweep) — and trees (draft trees against
// the chain by width and depth, beside the verification cost), and chat (multi-turn conversations: the prefill that
// kept caches save, the speed-up per turn), and serve (the HTTP server's overhead, and a multi-turn exchange
// through it with and without the conversation cache), and structured (decoding under a JSON Schema: the token
// masks' cost, constrained against free tokens/s). Each prints
// Markdown tables on stdout and adds its results to one JSON document, written under --out with the plots.
//
// The machine is shared and its memory bandwidth drifts, so every comparison is made within a round: the
// things compared run one after the other, in an order rotated from round to round, and what is reported is the
// median (and range) of the per-round ratios.
#ifndef SPECDEC_BENCH_H
#define SPECDEC_BENCH_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "base/clock.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

// ---- options and the run's state ----------------------------------------------------------------------------

enum {
    SUITE_LIMIT = 1, SUITE_DECODE = 2, SUITE_SPECULATIVE = 4, SUITE_TOKENIZER = 8, SUITE_QUANT = 16, SUITE_THREADS = 32,
    SUITE_TREES = 64, SUITE_CHAT = 128, SUITE_SERVE = 256, SUITE_STRUCTURED = 512, SUITE_BATCH = 1024
};

typedef struct {
    unsigned suites;            // SUITE_* bits
    const char *target_dir;     // -m (NULL: weights/pystd/target, or a random pair when that is absent)
    const char *draft_dir;      // -d
    int reps;                   // rounds of each limit and decode measurement
    int prompts;                // held-out prompts of the speculative suite (0 = all)
    int tokens;                 // tokens generated per prompt
    int threads;                // 0 = one per online CPU
    Quant quant, draft_quant;   // --quant, --draft-quant: how the target's and the draft's matrices are held
    bool quick, plots, help;
    const char *out_dir;
} Options;

// Progress on stderr: a bar redrawn in place on a terminal, a line every 15 s elsewhere.
typedef struct {
    const char *suite;
    int steps, step;            // measurement groups in this suite, and those finished
    double start;
    int printed;                // seconds into the suite of the last line printed (not a terminal)
    bool tty;
} Progress;

typedef struct {
    Options opt;
    ThreadPool *pool;
    const Kernels *kernels;     // the variant the models run on
    Progress progress;
    double probe_best;          // the fastest speed probe so far, seconds
    double probe_begin;         // the probe at the current suite's start
    double load_begin;          // the 1-minute load average at the current suite's start
    FILE *md;                   // every table, also written to latest.md: an open_memstream of md_text
    char *md_text;
    size_t md_len;
    json_t *results;            // {"machine": ..., "pair": ..., "<suite>": ...}
    bool failed;                // a check failed (a greedy mismatch): run-bench exits with status 1
} Bench;

// Prints to stdout and to b->md.
void out(Bench *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

// Prints "run-bench: ..." on stderr and exits with status 1 (the harness has no way around a failed load).
void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

// ---- measurement (measure.c) --------------------------------------------------------------------------------

// The median and range of n values.
typedef struct {
    double median, min, max;
    int n;
} Summary;

Summary summarize(const double *v, int n);
Summary summarize_ratio(const double *num, const double *den, int n);   // of num[i] / den[i], pair by pair
Summary summary_scaled(Summary s, double factor);                        // every figure × factor (≥ 0)
Summary summary_inverse(Summary s, double numerator);                    // numerator / each figure (> 0)

// One thing to measure: run(ctx, rep) does it once, for repetition `rep`, and returns its cost (seconds, or
// seconds per token).
typedef struct {
    double (*run)(void *ctx, int rep);
    void *ctx;
} Trial;

// Measures k trials against each other: a warm-up call of each, then `reps` rounds in each of which every
// trial gives one sample, in an order rotated round by round (A B, B A, ...) so that drift and ordering hit all
// alike. A sample is the mean cost over as many calls as make it last min_seconds (one call when 0).
//   values: [k, reps] — values[i·reps + r] is trial i's sample in round r; compare trials within a round.
void measure_rounds(Bench *b, const char *label, const Trial *trials, int k, int reps, double min_seconds,
                    double *values);

void progress_show(Progress *p, const char *label, double part);  // part ∈ [0, 1] of the current step

// A suite's frame: suite_begin starts the progress bar (`steps` measurement groups); suite_end stores the suite's
// results j in b->results under its name and ends the bar. Both time a fixed piece of arithmetic, so that j
// records the machine's speed at either end relative to the best seen in this run ("machine_speed"), and the
// tables carry a warning when it fell below 75%: another tenant or throttling slowed the whole machine down,
// which pairing within rounds cannot cancel. They also record the 1-minute load average at either end, and warn
// when other work kept more than LOAD_WARNING of every core busy.
#define LOAD_WARNING 0.5
void suite_begin(Bench *b, const char *name, int steps);
void suite_end(Bench *b, json_t *j);

// ---- report (report.c) --------------------------------------------------------------------------------------

// "12.3 [11.9–13.0]": the median and range of s × scale with `decimals` decimals.
const char *fmt_range(char *buf, size_t size, Summary s, double scale, int decimals);

json_t *summary_json(Summary s);
json_t *summaries_json(const double *v, int n);   // the raw values, for later analysis

// The size of the last-level (L3) cache, 0 if unknown.
long l3_bytes(void);

// The machine, the kernel variant, threads, date and git commit: recorded with every result.
json_t *machine_json(const Bench *b, const char **cpu);

// Makes the folder --out names, and those above it (at start, so that one that cannot be made is refused before the
// suites run); dies naming it where it cannot.
void make_out_folder(const char *dir);

// Writes b->results to DIR/results-<date>.json and DIR/latest.json, b->md to DIR/latest.md, and the plots.
void write_results(Bench *b);

// PNG plots of the suites in `results` under dir (plots.c); a note on stderr when gnuplot is missing.
void write_plots(const json_t *results, const char *dir);

// ---- the model pair and the workloads (pair.c) --------------------------------------------------------------

// The forms the quant suite compares, by index: as stored, q8, q4.
enum { N_FORMS = 3 };
static const Quant FORM_QUANTS[N_FORMS] = {QUANT_NONE, QUANT_Q8, QUANT_Q4};

typedef struct {
    Model target, draft;
    bool has_draft;
    bool random;                // a random pair (-m random:SHAPE, or weights/pystd absent), written for this run
    double load_seconds[2];     // [target, draft] as the run holds them (--quant, --draft-quant)
    // The quant suite's forms of each model, [target, draft][as stored, q8, q4] (FORM_QUANTS): the model the run
    // holds, and copies (others[]) in the forms it does not hold; with their load times.
    Model *forms[2][N_FORMS];
    Model others[2][N_FORMS - 1];
    bool has_forms;
    double form_load_seconds[2][N_FORMS];
    const char *target_dir, *draft_dir;
    Tokenizer tok;              // the target's, when its folder has one
    bool has_tok;
    bool borrowed_tok;          // tok is the shipped target's, lent to a random pair (pair_borrow_tokenizer)
    double load_peak_mb;        // random:<shape>: the process's peak resident memory right after loading (0
                                // otherwise); load_seconds[0] is then the target's load from a file just written
} Pair;

// Loads -m/-d, or weights/pystd, or (when that is absent and no -m was given) a random pair of its shape.
void pair_open(Pair *pair, Bench *b);
void pair_close(Pair *pair);
// A draft of random weights over the target's vocabulary, in the GPT-2 layout at the pair's draft's depth, width
// and context, seeded apart from every pair's (its drafts are nearly never the target's); as --draft-quant says.
void pair_open_useless_draft(const Pair *pair, Bench *b, Model *draft);

// For a random pair (no tokenizer): the shipped target's tokenizer (weights/pystd/target), and the models' logits
// kept to its ids (model_limit_vocab), so that every id generated decodes — the serve suite's server decodes text.
// Returns whether the pair has a tokenizer now; pair_return_tokenizer undoes it.
bool pair_borrow_tokenizer(Pair *pair);
void pair_return_tokenizer(Pair *pair);
json_t *pair_json(const Pair *pair);

// Seconds of one forward of T tokens after `context` cached positions (the cache is cut back to context first).
//   logits: [T, V]
double forward_seconds(Model *m, KVCache *cache, int context, int T, float *logits);

// A cache with `context` positions of a fixed token pattern prefilled, and room for [16, V] logits.
typedef struct {
    Model *model;
    KVCache cache;
    int context;
    float *logits;
} Workload;
void workload_init(Workload *w, Model *m, int context);
void workload_free(Workload *w);
// n tokens of the fixed pattern a workload's cache holds, from position offset on (ids below V).
void pattern_tokens(int *tokens, int n, int offset, int V);

// A Trial of one forward of T tokens on a workload: {forward_run, &(Forward){w, T}}.
typedef struct {
    Workload *w;
    int T;
} Forward;
double forward_run(void *ctx, int rep);

typedef struct {
    char *id;
    int *ids;
    int n;
} Prompt;

// Held-out prompts: those of folder/*.jsonl ({"id", "prompt"} per line) — PROMPTS_HELD_OUT, or PROMPTS_COPY, the
// copy-heavy set (code whose continuation repeats earlier lines, written for it) — `count` of them spread evenly over
// the set (all when count is 0 or larger), as token ids of the pair's tokenizer — or their bytes when the pair
// has none (the random pair) — cut to their last n_positions − reserve tokens. *n receives their number.
#define PROMPTS_HELD_OUT "bench/prompts"
#define PROMPTS_COPY "bench/prompts/copy"
Prompt *prompts_load(const Pair *pair, const char *folder, int count, int reserve, int *n);
void prompts_free(Prompt *prompts, int n);

// ---- memory bandwidth (memory.c) ----------------------------------------------------------------------------

typedef enum { MEM_READ, MEM_COPY, MEM_TRIAD, MEM_OPS } MemoryOp;

// Three arrays of doubles, each far larger than the caches.
typedef struct {
    double *a, *b, *c;          // [n] each
    size_t n;
} Memory;

// One pass of `op` over the arrays on `pool`'s threads: a Trial (memory_pass returns its seconds).
typedef struct {
    Memory *memory;
    MemoryOp op;
    ThreadPool *pool;
} MemoryPass;

// Each array's size: 256 MiB, or 4 times the L3 where that is more (STREAM's rule: no pass can then be served
// from the cache, even one repeated at once — measure_rounds repeats a pass shorter than a sample's minimum), but at
// most a sixteenth of the machine's memory. The L3 is the larger of what sysfs describes and what cpuid reports (a
// virtual machine may give either alone; cpuid may count the whole processor's, more than one core can use: too
// large an array costs only time).
size_t memory_array_bytes(void);
void memory_init(Memory *m, size_t array_bytes);
void memory_free(Memory *m);
const char *memory_op_name(MemoryOp op);                // "read (Σ a)", ...
size_t memory_op_bytes(const Memory *m, MemoryOp op);   // bytes one pass moves, counted as STREAM does
double memory_pass(void *pass, int rep);
// The seconds one read pass over memory takes for as many bytes as target's weights (its median over b->opt.reps
// rounds), and the read pass's GB/s in *gbs: the least time of a step that reads every weight once.
double weights_read_seconds(Bench *b, const Model *target, double *gbs);

// ---- one matmul on a pool's threads (limit.c) -----------------------------------------------------------------

// The matmuls timed: a WeightType's, or BF16 weights against activations rounded to BF16 (Kernels.matmul_bf16_dot,
// the model's QUANT_BF16), in the variants that have it.
enum { BF16_DOT = WEIGHT_Q6_K + 1 };

// out = x Wᵀ with one kernel variant, or OpenBLAS's sgemm (kernels == NULL), the output columns split between
// the first `threads` of the pool's threads as forward.c splits them: a Trial (matmul_run returns its seconds).
//   W: [n_out, n_in] in the variant's layout   x: [T, n_in]   out: [T, n_out]
typedef struct {
    const Kernels *kernels;
    int type;                   // a WeightType or BF16_DOT
    const void *w;
    const float *x;
    const Q8Block *xq;          // x quantized, for quantized weights (quantized once, outside the timing)
    const uint16_t *xb;         // x rounded to BF16, for BF16_DOT (likewise)
    float *out;
    int T, n_in, n_out;
    ThreadPool *pool;
    int threads;
} Matmul;
double matmul_run(void *ctx, int rep);
// "F32", "q8", "BF16, x BF16", ...: a WeightType's or BF16_DOT's name in the tables
const char *matmul_type_name(int type);

// ---- the suites ---------------------------------------------------------------------------------------------

void suite_limit(Bench *b, Pair *pair, Memory *memory);
void suite_decode(Bench *b, Pair *pair, Memory *memory);
void suite_speculative(Bench *b, Pair *pair);
void suite_tokenizer(Bench *b, Pair *pair);
void suite_quant(Bench *b, Pair *pair, Memory *memory);
// sweep: --threads-sweep, comma-separated counts (NULL: 1, 2, 4, ... up to the pool's size)
void suite_threads(Bench *b, Pair *pair, Memory *memory, const char *sweep);
void suite_trees(Bench *b, Pair *pair);
void suite_chat(Bench *b, Pair *pair);      // chat.c: multi-turn conversations on kept caches

// The HTTP server's overhead: time to first token and tokens/s through it against in process, and a multi-turn
// exchange (serve.c).
void suite_serve(Bench *b, Pair *pair);
// The serve suite's ceiling of many clients (serve_ceiling.c): for each of `clients[0..n_counts)` greedy clients in
// one batch (≤ 8), the most aggregate tokens/s any schedule of γs could reach over one client's, priced with the
// target's and the draft's measured forwards over 1..32 rows, the draft's acceptance by level and the prompts'
// prefill measured on the prompts — for requests of each of lengths[0..n_lengths), with the draft and without, into
// ceiling[(length · 2 + with the draft) · n_counts + k], and the best schedule with the draft into best[k]. Prints
// its tables; returns their JSON.
typedef struct {
    double depth;   // its sequences' mean γ
    double kept;    // the share of its drafts expected kept
} CeilingSchedule;
json_t *serve_ceiling(Bench *b, Pair *pair, const Prompt *prompts, int n, const int *clients, int n_counts,
                      const int *lengths, int n_lengths, double *ceiling, CeilingSchedule *best);
// Plain decoding of 1, 2, 4, 8 sequences at once in one batch against the read pass's bound (batch.c).
void suite_batch(Bench *b, Pair *pair);
// Decoding under a JSON Schema (structured.c): token masks per token (median, p99) at the pair's vocabulary and
// Llama 3's, and greedy tokens/s free and constrained, target-only and speculative.
void suite_structured(Bench *b, Pair *pair);

#endif
