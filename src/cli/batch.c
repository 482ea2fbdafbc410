// batch.c — specdec batch (see batch.h). Each input line goes through the server's own steps: request_parse (a body
// with "messages" is a chat completion, any other a completion), engine_prompt, engine_begin; the generations run
// side by side, up to --parallel of them, in one speculative batch (batch_step); each one's end through engine_end
// and api_completion_json — or, for a line refused on the way, api_error_json. A line's answer is written once it
// and every line before it are answered, so the output is always the answers of a prefix of the input, in order:
// after Ctrl-C (SIGINT), what is finished of that prefix.
#include "base/file.h"
#include "cli/batch.h"

#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "cli/session.h"
#include "serve/api.h"
#include "serve/engine.h"

// One input line, from its request to its answer.
typedef struct {
    const char *body;       // the line (in the input's buffer)
    size_t body_len;
    Request req;
    int *prompt, n_prompt;
    char id[32];
    ApiResponse response;
    EngineResult result;
    EngineRun *run;
    char *text;             // the generated text so far (the sink's)
    size_t len;
    TokenReportList logprobs;   // its tokens' logprobs so far, with the request's logprobs (the sink's)
    bool lost;              // ... out of memory: text or logprobs dropped
    int place;              // in the batch, or −1
    char *answer;           // the output line (JSON), once answered
} Line;

static volatile sig_atomic_t interrupted;
static void on_interrupt(int signo) {
    (void)signo;
    interrupted = 1;
}

static void take_text(void *ctx, const char *text, size_t len, const TextMarks *marks, const TokenReports *logprobs) {
    (void)marks;
    Line *l = ctx;
    if (logprobs && token_reports_append(&l->logprobs, logprobs)) l->lost = true;
    char *grown = realloc(l->text, l->len + len + 1);
    if (!grown) {
        l->lost = true;
        return;
    }
    memcpy(grown + l->len, text, len);
    l->len += len;
    grown[l->len] = '\0';
    l->text = grown;
}

static void refuse(Line *l, const ApiError *e) { l->answer = api_error_json(e); }

// A generation that ended (or failed) leaves the batch, and the line gets its answer.
static void end_line(Line *l, Batch *b) {
    int n_out;
    Err err;
    ApiError e;
    const int failed = batch_leave(b, l->place, &n_out, &l->result.stats, &err);
    l->place = -1;
    if (failed) {
        engine_abort(l->run);
        api_error(&e, 500, NULL, NULL, "generation failed: %s", err.msg);
        refuse(l, &e);
    } else if (engine_end(l->run, n_out, &e)) {
        refuse(l, &e);
    } else if (l->lost) {
        api_error(&e, 500, NULL, NULL, "out of memory for the generated text");
        refuse(l, &e);
    } else {
        const TokenReports logprobs = {.tokens = l->logprobs.tokens, .n = l->logprobs.n};
        l->answer = api_completion_json(&l->response, l->text ? l->text : "", l->len, &l->result,
                                        l->req.logprobs ? &logprobs : NULL);
    }
    l->run = NULL;
}

// Reads the line's request and joins the batch; a line refused gets its error object as its answer.
static void start_line(Line *l, int index, const Engine *en, Batch *b, const char *model, EngineSink *sink) {
    ApiError e;
    json_t *body = json_loadb(l->body, l->body_len, 0, NULL);
    const ApiKind kind = json_is_object(body) && json_object_get(body, "messages") ? API_CHAT : API_COMPLETIONS;
    json_decref(body);
    snprintf(l->id, sizeof l->id, "%s-batch-%d", kind == API_CHAT ? "chatcmpl" : "cmpl", index + 1);
    l->response = (ApiResponse){.kind = kind, .id = l->id, .created = (long long)time(NULL), .model = model,
                                .tok = en->tok};
    l->place = -1;
    *sink = (EngineSink){.on_text = take_text, .ctx = l};
    BatchJob job;
    if (request_parse(&l->req, kind, l->body, l->body_len, &e) ||
        engine_prompt(en, &l->req, &l->prompt, &l->n_prompt, &e) ||
        !(l->run = engine_begin(en, &l->req, l->prompt, l->n_prompt, sink, &l->result, &job, &e))) {
        refuse(l, &e);
        return;
    }
    Err err;
    if ((l->place = batch_join(b, &job, &err)) < 0) {
        engine_abort(l->run);
        l->run = NULL;
        api_error(&e, 500, NULL, NULL, "%s", err.msg);
        refuse(l, &e);
    } else if (batch_state(b, l->place) >= BATCH_DONE) {  // nothing to generate (the prompt filled the context)
        end_line(l, b);
    }
}

// The progress line on a terminal: lines answered, tokens per second, the time left at that pace.
static void show_progress(const Line *lines, int n, double t0) {
    int done = 0;
    long tokens = 0;
    for (int i = 0; i < n; i++) {
        done += lines[i].answer != NULL;
        tokens += lines[i].result.completion_tokens;
    }
    const double seconds = now_seconds() - t0, left = done ? seconds * (n - done) / done : 0;
    fprintf(stderr, "\rspecdec batch: %d/%d requests, %.1f tokens/s, ETA %.0f s   ", done, n,
            seconds > 0 ? tokens / seconds : 0, left);
}

// Where the batch's time went, on stderr (docs/server.md, "What a batched round costs").
static void report_times(BatchTimes t) {
    const double all = t.target_seconds + t.draft_seconds + t.rest_seconds;
    if (t.steps == 0 || all <= 0) return;
    fprintf(stderr, "specdec batch: %d steps of %.1f rows on average; of their %.3f s, the target's forwards %.1f%%, "
            "the draft's %.1f%%, the rest (γ, accept, commit) %.1f%%\n", t.steps, (double)t.rows / t.steps, all,
            100 * t.target_seconds / all, 100 * t.draft_seconds / all, 100 * t.rest_seconds / all);
}

// Runs the lines: joins them as places free up, steps the batch, writes each answer to out in input order.
static int run_lines(Line *lines, int n, const Engine *en, int parallel, const char *model, FILE *out, Err *err) {
    Batch *b = batch_open(en->target, parallel, err);
    EngineSink *sinks = calloc((size_t)n, sizeof *sinks);
    if (!b || !sinks) {
        batch_close(b);
        free(sinks);
        return b ? err_fmt(err, "out of memory") : -1;
    }
    const bool progress = isatty(STDERR_FILENO);
    const double t0 = now_seconds();
    int next = 0, written = 0;
    while (written < n && !interrupted) {
        for (; next < n && batch_active(b) < parallel; next++)
            start_line(&lines[next], next, en, b, model, &sinks[next]);
        if (batch_step(b, err)) break;
        for (int i = 0; i < next; i++)
            if (lines[i].place >= 0 && batch_state(b, lines[i].place) >= BATCH_DONE) end_line(&lines[i], b);
        for (; written < next && lines[written].answer; written++) fprintf(out, "%s\n", lines[written].answer);
        fflush(out);
        if (progress) show_progress(lines, n, t0);
    }
    if (progress) fputc('\n', stderr);
    report_times(batch_times(b));
    for (int i = 0; i < next; i++)
        if (lines[i].place >= 0) {
            int n_out;
            SpecStats stats;
            Err ignored;
            batch_leave(b, lines[i].place, &n_out, &stats, &ignored);
            engine_abort(lines[i].run);
        }
    batch_close(b);
    free(sinks);
    if (interrupted) fprintf(stderr, "specdec batch: interrupted: %d of %d answers written\n", written, n);
    return written == n || interrupted ? 0 : -1;
}

// Whether text[0..len) is only spaces, tabs and carriage returns.
static bool blank(const char *text, size_t len) {
    for (size_t i = 0; i < len; i++)
        if (!strchr(" \t\r", text[i]) || text[i] == '\0') return false;
    return true;
}

// The input's non-blank lines text[0..len) (a NUL byte in one is the JSON parser's to refuse).
static int split_lines(const char *text, size_t len, Line **lines, int *n, Err *err) {
    int cap = 0;
    *lines = NULL;
    *n = 0;
    for (const char *p = text, *stop = text + len, *end; p < stop; p = end + (end < stop)) {
        end = memchr(p, '\n', (size_t)(stop - p));
        if (!end) end = stop;
        if (blank(p, (size_t)(end - p))) continue;
        if (*n == cap) {
            cap = cap ? 2 * cap : 64;
            Line *grown = realloc(*lines, sizeof **lines * cap);
            if (!grown) return err_fmt(err, "out of memory for %d lines", *n);
            *lines = grown;
        }
        (*lines)[(*n)++] = (Line){.body = p, .body_len = (size_t)(end - p), .place = -1};
    }
    return 0;
}

// Whether -o names the requests' file itself (the same file by another path too), which the answers would replace.
static bool answers_over_requests(const Args *args) {
    struct stat in, out;
    return args->output && strcmp(args->file, "-") != 0 && stat(args->file, &in) == 0 &&
           stat(args->output, &out) == 0 && in.st_dev == out.st_dev && in.st_ino == out.st_ino;
}

int cmd_batch(const Args *args, Err *err) {
    const char *target_dir, *draft_dir;
    SpecParams spec;
    if (!args->file) return err_fmt(err, "batch: give the requests' file with -f FILE (- for standard input)");
    if (require_tokens(args, "batch", "the answer to every request that sets no max_tokens", err)) return -1;
    if (answers_over_requests(args))
        return err_fmt(err, "batch: -o %s is the requests' file (-f %s): the answers would replace the requests; write "
                       "them to another file", args->output, args->file);
    if (model_dirs(args, &target_dir, &draft_dir, err) || spec_params_from_args(args, &spec, err)) return -1;
    char *text = NULL;
    size_t len;
    Line *lines = NULL;
    int n = 0, rc = -1;
    FILE *out = stdout;
    Session s;
    Tokenizer tok;
    ChatTemplate chat;
    bool have_session = false, have_tok = false, have_chat = false;
    if (read_file(args->file, &text, &len, err) || split_lines(text, len, &lines, &n, err)) goto done;
    if (args->output && !(out = fopen(args->output, "w"))) {
        out = stdout;
        err_fmt(err, "%s: cannot open for writing", args->output);
        goto done;
    }
    have_session = true;  // (closed even when opening fails: session.h)
    if (session_open_batched(&s, args, target_dir, draft_dir, err) ||
        load_tokenizer(&tok, target_dir, true, &have_tok, err))
        goto done;
    if (tokenizer_vocab_size(&tok) < s.target.n_vocab) model_limit_vocab(&s.target, tokenizer_vocab_size(&tok));
    Err no_chat;
    have_chat = chat_template_load(&chat, target_dir, &no_chat) == 0;
    const Engine engine = {.target = &s.target, .draft = s.has_draft ? &s.draft : NULL,
                           .lookup = session_drafts_by_lookup(args, s.has_draft),
                           .tok = &tok, .chat = have_chat ? &chat : NULL, .no_chat = no_chat.msg, .spec = spec,
                           .draft_p_min = args->draft_p_min, .default_max_tokens = args->n_tokens};
    signal(SIGINT, on_interrupt);
    rc = run_lines(lines, n, &engine, args->parallel, target_dir, out, err);
    signal(SIGINT, SIG_DFL);
done:
    for (int i = 0; i < n; i++) {
        request_free(&lines[i].req);
        engine_result_free(&lines[i].result);
        free(lines[i].prompt);
        free(lines[i].text);
        token_reports_free(&lines[i].logprobs);
        free(lines[i].answer);
    }
    if (out != stdout) fclose(out);
    if (have_chat) chat_template_free(&chat);
    if (have_tok) tokenizer_free(&tok);
    if (have_session) session_close(&s);
    free(lines);
    free(text);
    return rc;
}
