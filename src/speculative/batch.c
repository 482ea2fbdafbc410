// batch.c — several generations stepping their rounds together (batch.h): the scheduler's round (scheduler.h) with
// one target forward for all of them.
//
// A step, for the sequences in the batch:
//   prefilling   its next prompt tokens are its rows, BATCH_PREFILL_CHUNK a step in all, the earliest joined first
//                (share_prefill); when the prompt (but its newest token)
//                is in, it runs from the next step on — its drafter has not read the prompt: it reads it in its
//                first draft forward (scheduler_start), beside the other sequences' rows, and never if it never drafts
//   running      scheduler_draft (γ, the drafts); each draft model forward its drafter waits for is one
//                model_forward_batch of the draft over every running sequence's rows that wait (draft_together),
//                then scheduler_draft_more; its rows are scheduler_verify_rows'
//   all          one model_forward_batch of the target over every sequence's rows
//   running      its logits to scheduler_finish_round: accept or resample, commit and roll back, record; done when
//                scheduler_running says so
#include "speculative/batch.h"

#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "speculative/scheduler.h"

typedef struct {
    BatchState state;
    BatchJob job;
    Scheduler *s;
    SpecStats stats;
    double joined_at;        // when it joined (now_seconds): its prefill's time runs from there (start_rounds)
    long joined;             // the order it joined in (the step's prompt rows go to the earliest first)
    int chunk;               // prefilling: its prompt rows in this step (share_prefill)
    BatchLoad load;          // its part of the last step: 1 sequence, its rows, the tokens it committed, its drafts
    DraftForward draft;      // the draft forward its round waits for (rows.T = 0: none)
    Err err;                 // BATCH_FAILED's
} Sequence;

// Room for a forward's logits, grown as needed.
typedef struct {
    float *rows;
    size_t floats;
} Logits;

struct Batch {
    Model *target;
    int capacity;
    Sequence *seqs;         // [capacity]
    SequenceRows *rows;     // [capacity]: a forward's rows, of the sequences `fed`
    int *fed;               // [capacity]
    Logits logits;          // a forward's: rows of its model's vocabulary
    long joins;             // the sequences that joined so far
    int draft_forwards;     // the draft model forwards of every step so far
    BatchTimes times;       // of every step so far
    RowTimes target_times;  // the seconds of its target's forwards (with the accept steps on their rows), by rows:
                            // those of rounds alone (a prompt's chunk, whose rows attend to each other, is not
                            // what a plan prices)
    RowTimes draft_times;   // ... of its draft forwards (with the drafters' work on their logits), by rows
};

Batch *batch_open(Model *target, int capacity, Err *err) {
    Batch *b = calloc(1, sizeof *b);
    if (b) {
        *b = (Batch){.target = target, .capacity = capacity};
        b->seqs = calloc((size_t)capacity, sizeof *b->seqs);
        b->rows = calloc((size_t)capacity, sizeof *b->rows);
        b->fed = calloc((size_t)capacity, sizeof *b->fed);
    }
    if (!b || !b->seqs || !b->rows || !b->fed) {
        batch_close(b);
        err_fmt(err, "out of memory for a batch of %d sequences", capacity);
        return NULL;
    }
    return b;
}

void batch_close(Batch *b) {
    if (!b) return;
    for (int id = 0; id < b->capacity && b->seqs; id++) {
        int n_out;
        SpecStats stats;
        Err err;
        if (b->seqs[id].state != BATCH_FREE) batch_leave(b, id, &n_out, &stats, &err);
    }
    free(b->seqs);
    free(b->rows);
    free(b->fed);
    free(b->logits.rows);
    free(b);
}

// The prompt tokens a prefilling sequence has still to feed: all but the newest, less what its cache holds.
static int prefill_left(Sequence *q) { return q->job.n_prompt - 1 - scheduler_cache(q->s)->len; }

// The prompt is in: the rounds, the drafter's prefill left to its first draft forward. A drafter's prefill alone is
// a forward of the draft per sequence; in its first round's it rides with the other sequences' draft rows, the
// weights read once, and a sequence whose plan stays plain in the batch (greedy beside many: policy.h) never pays it.
// Its prefill took the time since it joined: the steps that fed its prompt, whole (the other sequences' rows and
// drafts in them too), and those it waited through while earlier prompts took the steps' rows (share_prefill) — the
// time a user waits for its prompt to be read, where the forwards alone that carried it would leave the waits out.
static void start_rounds(Sequence *q) {
    q->load = (BatchLoad){.sequences = 1, .rows = 1, .tokens = 1};  // before its first round: as a plain one
    const double prefill_seconds = now_seconds() - q->joined_at;
    q->state = scheduler_start(q->s, prefill_seconds, false, &q->err) ? BATCH_FAILED : BATCH_RUNNING;
    if (q->state == BATCH_RUNNING && !scheduler_running(q->s)) q->state = BATCH_DONE;
}

int batch_join(Batch *b, const BatchJob *job, Err *err) {
    int id = 0;
    while (id < b->capacity && b->seqs[id].state != BATCH_FREE) id++;
    if (id == b->capacity) return err_fmt(err, "the batch is full: %d sequences", b->capacity);
    Sequence *q = &b->seqs[id];
    *q = (Sequence){.job = *job, .joined = b->joins++, .joined_at = now_seconds()};
    q->s = scheduler_open(b->target, job->cache, job->drafter, job->prompt, job->n_prompt, job->params, job->out,
                          &q->stats, false, err);
    if (!q->s) return -1;
    q->state = BATCH_PREFILLING;
    if (prefill_left(q) == 0) start_rounds(q);
    return id;
}

// Each running sequence's γ policy is told the rest of the batch before it drafts (policy.h: rate_batch): the
// others' last rounds — their rows and tokens summed, the longest of their drafting and how many drafted — and the
// prefilling ones as sequences without rows; and what the batch's forwards cost, the lines through the times of
// every row count its steps ran (BatchCosts: a greedy or coupled plan prices its rows with them, not with the cost
// model of sizes). A prefill chunk's rows are work the batch does whatever γ is, and in F(R) = S + R · A they would
// only add a constant to the step's time, which makes deeper drafts look cheaper than they are (their rows cost as
// much in that step as in any other): the plan prices γ against the rounds' rows alone.
static void share_loads(Batch *b) {
    const BatchCosts costs = {row_times_fit(&b->target_times), row_times_fit(&b->draft_times)};
    for (int id = 0; id < b->capacity; id++)
        if (b->seqs[id].state == BATCH_PREFILLING) b->seqs[id].load = (BatchLoad){.sequences = 1};
    for (int id = 0; id < b->capacity; id++) {
        if (b->seqs[id].state != BATCH_RUNNING) continue;
        BatchLoad others = {0};
        for (int other = 0; other < b->capacity; other++) {
            const Sequence *o = &b->seqs[other];
            if (other == id || (o->state != BATCH_PREFILLING && o->state != BATCH_RUNNING)) continue;
            others.sequences++;
            others.rows += o->load.rows;
            others.tokens += o->load.tokens;
            others.draft_forwards =
                o->load.draft_forwards > others.draft_forwards ? o->load.draft_forwards : others.draft_forwards;
            others.drafting += o->load.draft_forwards > 0;
        }
        scheduler_share(b->seqs[id].s, others, costs);
    }
}

// Room for a forward's logits: rows of V.
static int reserve_logits(Logits *logits, size_t rows, int V, Err *err) {
    if (rows * V <= logits->floats) return 0;
    float *grown = realloc(logits->rows, sizeof(float) * rows * V);
    if (!grown) return err_fmt(err, "out of memory for a batch's logits (%zu rows)", rows);
    logits->rows = grown;
    logits->floats = rows * V;
    return 0;
}

// The logit rows a sequence's rows get from the forward.
static size_t logit_rows(const SequenceRows *rows) { return rows->all_logits ? (size_t)rows->T : 1; }

// The sequence failed with err: it is out of the step's forwards from now on, and leaves with err.
static void fail(Sequence *q, const Err *err) {
    q->state = BATCH_FAILED;
    q->err = *err;
    q->draft = (DraftForward){0};
}

// The running sequences' drafts: while any round waits for a draft forward, one model_forward_batch over the rows of
// every sequence that waits on the same draft model — each one's j-th draft forward beside the others' j-th, the
// weights read once — each one's logits to where its drafter wants them, and its next (scheduler_draft_more). A
// sequence whose forward or drafter fails is BATCH_FAILED; the others go on.
static void draft_together(Batch *b) {
    for (;;) {
        Model *model = NULL;
        int n = 0, fed_rows = 0;
        size_t rows = 0;
        for (int id = 0; id < b->capacity; id++) {
            Sequence *q = &b->seqs[id];
            if (q->state != BATCH_RUNNING || q->draft.rows.T == 0 || (model && q->draft.model != model)) continue;
            model = q->draft.model;
            b->rows[n] = q->draft.rows;
            rows += logit_rows(&q->draft.rows);
            fed_rows += q->draft.rows.T;
            b->fed[n++] = id;
        }
        if (n == 0) return;
        const double t0 = now_seconds();
        Err err;
        const bool fed = !reserve_logits(&b->logits, rows, model->n_vocab, &err) &&
                         !model_forward_batch(model, b->rows, n, b->logits.rows, &err);
        b->draft_forwards += fed;
        size_t at = 0;  // the forward's logit rows so far
        for (int k = 0; k < n; k++) {
            Sequence *q = &b->seqs[b->fed[k]];
            const size_t out_rows = logit_rows(&b->rows[k]);
            if (!fed) fail(q, &err);
            else {
                const size_t V = model->n_vocab;
                memcpy(q->draft.logits, b->logits.rows + at * V, sizeof(float) * out_rows * V);
                if (scheduler_draft_more(q->s, &q->draft, &q->err)) fail(q, &q->err);
            }
            at += out_rows;
        }
        if (fed) row_times_add(&b->draft_times, fed_rows, now_seconds() - t0);
    }
}

// This step's prompt rows: BATCH_PREFILL_CHUNK in all, to the prefilling sequences in the order they joined, each
// as many as it has left (a token budget per step, as in Sarathi-Serve: Agrawal et al. 2024). Prompts that join
// together are read one after the other, not side by side: the first gets its first token after its own prompt's
// arithmetic, not after everyone's, and the running sequences' rounds go on beside a chunk of bounded size.
static void share_prefill(Batch *b) {
    for (int id = 0; id < b->capacity; id++) b->seqs[id].chunk = 0;
    for (int budget = BATCH_PREFILL_CHUNK; budget > 0;) {
        Sequence *first = NULL;  // the earliest joined that has no rows yet
        for (int id = 0; id < b->capacity; id++) {
            Sequence *q = &b->seqs[id];
            if (q->state == BATCH_PREFILLING && q->chunk == 0 && (!first || q->joined < first->joined)) first = q;
        }
        if (!first) return;
        const int left = prefill_left(first);
        first->chunk = left < budget ? left : budget;
        budget -= first->chunk;
    }
}

// A sequence's rows for the target's forward this step: its prompt's next chunk, or its round's verification.
static SequenceRows step_rows(Sequence *q) {
    if (q->state == BATCH_RUNNING) return scheduler_verify_rows(q->s);
    KVCache *cache = scheduler_cache(q->s);
    return (SequenceRows){.cache = cache, .tokens = q->job.prompt + cache->len, .T = q->chunk};
}

// After the forward: each sequence's logits to its round (a prefill's are not needed), and where it stands now.
static void finish_step(Batch *b, int n, double forward_seconds) {
    const size_t V = b->target->n_vocab;
    size_t at = 0;  // the step's logit rows so far
    for (int k = 0; k < n; k++) {
        Sequence *q = &b->seqs[b->fed[k]];
        const SequenceRows *rows = &b->rows[k];
        const size_t out_rows = logit_rows(rows);
        if (q->state == BATCH_PREFILLING) {
            if (prefill_left(q) == 0) start_rounds(q);
        } else {
            const int generated = q->stats.generated;
            memcpy(scheduler_logits(q->s), b->logits.rows + at * V, sizeof(float) * out_rows * V);
            if (scheduler_finish_round(q->s, forward_seconds, &q->err)) q->state = BATCH_FAILED;
            else if (!scheduler_running(q->s)) q->state = BATCH_DONE;
            q->load = (BatchLoad){.sequences = 1, .rows = rows->T, .tokens = q->stats.generated - generated,
                                  .draft_forwards = scheduler_draft_forwards(q->s)};
        }
        at += out_rows;
    }
}

int batch_step(Batch *b, Err *err) {
    const double begun = now_seconds(), drafted_before = b->times.draft_seconds;
    share_loads(b);
    for (int id = 0; id < b->capacity; id++) {  // the rounds begin: γ, and drafts that need no draft forward
        Sequence *q = &b->seqs[id];
        if (q->state == BATCH_RUNNING && scheduler_draft(q->s, &q->draft, &q->err)) fail(q, &q->err);
    }
    const double drafting = now_seconds();
    draft_together(b);
    share_prefill(b);
    int n = 0, prefill_rows = 0;
    size_t rows = 0;
    for (int id = 0; id < b->capacity; id++) {
        Sequence *q = &b->seqs[id];
        if (!(q->state == BATCH_PREFILLING && q->chunk > 0) && q->state != BATCH_RUNNING) continue;
        b->rows[n] = step_rows(q);
        rows += logit_rows(&b->rows[n]);
        if (q->state == BATCH_PREFILLING) prefill_rows += b->rows[n].T;
        b->fed[n++] = id;
    }
    b->times.prefill_rows += prefill_rows;
    const double t0 = now_seconds();
    b->times.draft_seconds += t0 - drafting;
    if (n == 0) return 0;
    if (reserve_logits(&b->logits, rows, b->target->n_vocab, err) ||
        model_forward_batch(b->target, b->rows, n, b->logits.rows, err)) {
        for (int k = 0; k < n; k++) fail(&b->seqs[b->fed[k]], err);
        return -1;
    }
    const double forward_seconds = now_seconds() - t0;
    finish_step(b, n, forward_seconds);
    int step_rows = 0;
    for (int k = 0; k < n; k++) step_rows += b->rows[k].T;
    if (prefill_rows == 0) row_times_add(&b->target_times, step_rows, now_seconds() - t0);
    b->times.steps++;
    b->times.sequences += n;
    b->times.rows += step_rows;
    b->times.target_seconds += forward_seconds;
    b->times.rest_seconds += now_seconds() - begun - (b->times.draft_seconds - drafted_before) - forward_seconds;
    return 0;
}

BatchTimes batch_times(const Batch *b) { return b->times; }

int batch_draft_forwards(const Batch *b) { return b->draft_forwards; }

int batch_active(const Batch *b) {
    int n = 0;
    for (int id = 0; id < b->capacity; id++)
        n += b->seqs[id].state == BATCH_PREFILLING || b->seqs[id].state == BATCH_RUNNING;
    return n;
}

BatchState batch_state(const Batch *b, int id) { return b->seqs[id].state; }

int batch_leave(Batch *b, int id, int *n_out, SpecStats *stats, Err *err) {
    Sequence *q = &b->seqs[id];
    if (q->state == BATCH_FREE) return err_fmt(err, "batch_leave: no sequence at place %d", id);
    const bool failed = q->state == BATCH_FAILED;
    scheduler_close(q->s, n_out);
    *stats = q->stats;
    if (failed) *err = q->err;
    *q = (Sequence){.state = BATCH_FREE};
    return failed ? -1 : 0;
}
