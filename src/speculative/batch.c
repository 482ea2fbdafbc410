// batch.c — several generations stepping their rounds together (batch.h): the scheduler's round (scheduler.h) with
// one target forward for all of them.
//
// A step, for the sequences in the batch:
//   prefilling   the next ≤ BATCH_PREFILL_CHUNK prompt tokens are its rows; when the prompt (but its newest token)
//                is in, the drafter's prefill, and it runs from the next step on
//   running      scheduler_draft (γ, the drafts), and its rows are scheduler_verify_rows'
//   all          one model_forward_batch over every sequence's rows
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
    double prefill_seconds;  // the forwards that carried its prompt
    BatchLoad load;          // its part of the last step: 1 sequence, its rows, the tokens it committed, its drafts
    Err err;                 // BATCH_FAILED's
} Sequence;

struct Batch {
    Model *target;
    int capacity;
    Sequence *seqs;         // [capacity]
    SequenceRows *rows;     // [capacity]: a step's rows, of the sequences `fed`
    int *fed;               // [capacity]
    float *logits;          // [logit_rows, V]: a step's
    size_t logit_rows;
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
    free(b->logits);
    free(b);
}

// The prompt tokens a prefilling sequence has still to feed: all but the newest, less what its cache holds.
static int prefill_left(Sequence *q) { return q->job.n_prompt - 1 - scheduler_cache(q->s)->len; }

// The prompt is in: the drafter's prefill, then the rounds.
static void start_rounds(Sequence *q) {
    q->load = (BatchLoad){.sequences = 1, .rows = 1, .tokens = 1};  // before its first round: as a plain one
    q->state = scheduler_start(q->s, q->prefill_seconds, &q->err) ? BATCH_FAILED : BATCH_RUNNING;
    if (q->state == BATCH_RUNNING && !scheduler_running(q->s)) q->state = BATCH_DONE;
}

int batch_join(Batch *b, const BatchJob *job, Err *err) {
    int id = 0;
    while (id < b->capacity && b->seqs[id].state != BATCH_FREE) id++;
    if (id == b->capacity) return err_fmt(err, "the batch is full: %d sequences", b->capacity);
    Sequence *q = &b->seqs[id];
    *q = (Sequence){.job = *job};
    q->s = scheduler_open(b->target, job->cache, job->drafter, job->prompt, job->n_prompt, job->params, job->out,
                          &q->stats, false, err);
    if (!q->s) return -1;
    q->state = BATCH_PREFILLING;
    if (prefill_left(q) == 0) start_rounds(q);
    return id;
}

// Each running sequence's γ policy is told the rest of the batch before it drafts (policy.h: rate_batch): the
// others' last rounds, and the prefilling ones' chunks of this step (rows that commit no token).
static void share_loads(Batch *b) {
    BatchLoad all = {0};
    for (int id = 0; id < b->capacity; id++) {
        Sequence *q = &b->seqs[id];
        if (q->state == BATCH_PREFILLING) {
            const int left = prefill_left(q);
            q->load = (BatchLoad){.sequences = 1, .rows = left < BATCH_PREFILL_CHUNK ? left : BATCH_PREFILL_CHUNK};
        }
        if (q->state != BATCH_PREFILLING && q->state != BATCH_RUNNING) continue;
        all = (BatchLoad){all.sequences + q->load.sequences, all.rows + q->load.rows, all.tokens + q->load.tokens,
                          all.draft_cost + q->load.draft_cost};
    }
    for (int id = 0; id < b->capacity; id++) {
        const Sequence *q = &b->seqs[id];
        if (q->state != BATCH_RUNNING) continue;
        scheduler_share(q->s, (BatchLoad){all.sequences - 1, all.rows - q->load.rows, all.tokens - q->load.tokens,
                                          all.draft_cost - q->load.draft_cost});
    }
}

// A sequence's rows for this step, or false where it has none (its drafter failed: it is BATCH_FAILED).
static bool step_rows(Sequence *q, SequenceRows *rows) {
    if (q->state == BATCH_PREFILLING) {
        KVCache *cache = scheduler_cache(q->s);
        const int left = prefill_left(q);
        *rows = (SequenceRows){.cache = cache, .tokens = q->job.prompt + cache->len,
                               .T = left < BATCH_PREFILL_CHUNK ? left : BATCH_PREFILL_CHUNK};
        return true;
    }
    if (scheduler_draft(q->s, &q->err)) {
        q->state = BATCH_FAILED;
        return false;
    }
    *rows = scheduler_verify_rows(q->s);
    return true;
}

// Room for a step's logits: rows of V.
static int reserve_logits(Batch *b, size_t rows, Err *err) {
    if (rows <= b->logit_rows) return 0;
    float *grown = realloc(b->logits, sizeof(float) * rows * b->target->n_vocab);
    if (!grown) return err_fmt(err, "out of memory for a batch's logits (%zu rows)", rows);
    b->logits = grown;
    b->logit_rows = rows;
    return 0;
}

// After the forward: each sequence's logits to its round (a prefill's are not needed), and where it stands now.
static void finish_step(Batch *b, int n, double forward_seconds) {
    const size_t V = b->target->n_vocab;
    size_t at = 0;  // the step's logit rows so far
    for (int k = 0; k < n; k++) {
        Sequence *q = &b->seqs[b->fed[k]];
        const SequenceRows *rows = &b->rows[k];
        const size_t out_rows = rows->all_logits ? (size_t)rows->T : 1;
        if (q->state == BATCH_PREFILLING) {
            q->prefill_seconds += forward_seconds;
            if (prefill_left(q) == 0) start_rounds(q);
        } else {
            const int generated = q->stats.generated;
            memcpy(scheduler_logits(q->s), b->logits + at * V, sizeof(float) * out_rows * V);
            if (scheduler_finish_round(q->s, forward_seconds, &q->err)) q->state = BATCH_FAILED;
            else if (!scheduler_running(q->s)) q->state = BATCH_DONE;
            q->load = (BatchLoad){1, rows->T, q->stats.generated - generated, scheduler_draft_cost(q->s)};
        }
        at += out_rows;
    }
}

int batch_step(Batch *b, Err *err) {
    int n = 0;
    size_t logit_rows = 0;
    share_loads(b);
    for (int id = 0; id < b->capacity; id++) {
        Sequence *q = &b->seqs[id];
        if ((q->state != BATCH_PREFILLING && q->state != BATCH_RUNNING) || !step_rows(q, &b->rows[n])) continue;
        logit_rows += b->rows[n].all_logits ? (size_t)b->rows[n].T : 1;
        b->fed[n++] = id;
    }
    if (n == 0) return 0;
    const double t0 = now_seconds();
    if (reserve_logits(b, logit_rows, err) || model_forward_batch(b->target, b->rows, n, b->logits, err)) {
        for (int k = 0; k < n; k++) {
            b->seqs[b->fed[k]].state = BATCH_FAILED;
            b->seqs[b->fed[k]].err = *err;
        }
        return -1;
    }
    finish_step(b, n, now_seconds() - t0);
    return 0;
}

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
