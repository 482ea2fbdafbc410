// serve.c — specdec serve (see serve.h): generate's model, quantization and speculation options, the server's own
// (--host, --port, --api-key, --parallel, --queue, --max-body, --timeout), then requests until a signal.
#include "cli/serve.h"

#include <arpa/inet.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli/session.h"
#include "serve/server.h"

// Whether host names this machine's loopback (127.0.0.0/8, ::1 or localhost), which no other machine can reach.
static bool is_loopback(const char *host) {
    struct in_addr v4;
    struct in6_addr v6;
    if (inet_pton(AF_INET, host, &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
    if (inet_pton(AF_INET6, host, &v6) == 1) return memcmp(&v6, &in6addr_loopback, sizeof v6) == 0;
    return strcmp(host, "localhost") == 0;
}

// Serves until SIGINT or SIGTERM: the signals are blocked in every thread and awaited here.
static int serve_until_signal(const Engine *engine, const ServeOptions *options, Err *err) {
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);  // before any thread starts: they inherit the mask
    signal(SIGPIPE, SIG_IGN);                 // a client gone mid-write is an error return, not the end
    Server server;
    if (server_start(&server, engine, options, err)) return -1;
    const size_t cache_bytes = queue_cache_bytes(&server.queue);
    fprintf(stderr, "specdec serve: %d requests at once, their KV caches %.1f MiB (%d × %d positions; --parallel, "
            "--ctx)", options->parallel, cache_bytes / 1048576.0, options->parallel, engine->target->cfg.n_positions);
    if (engine->draft)  // each request's draft model drafter has a cache of its own while it runs (drafter.h)
        fprintf(stderr, ", their draft caches up to %.1f MiB more (%d × %.1f MiB, allocated per request)",
                options->parallel * model_kv_bytes(engine->draft) / 1048576.0, options->parallel,
                model_kv_bytes(engine->draft) / 1048576.0);
    fputc('\n', stderr);
    const char *drafter = engine_drafter_name(engine);
    fprintf(stderr, "specdec serve: listening on http://%s%s%s:%d/v1 (model %s, drafter: %s)\n",
            strchr(options->host, ':') ? "[" : "", options->host, strchr(options->host, ':') ? "]" : "",
            server_port(&server), options->model, drafter ? drafter : "none, target-only decoding");
    if (!is_loopback(options->host) && !options->api_key)
        fprintf(stderr, "specdec serve: warning: listening on %s without --api-key: anyone who can reach this "
                "address can use the model\n", options->host);
    int signo;
    sigwait(&stop, &signo);
    fprintf(stderr, "specdec serve: %s: stopping after the generation that runs\n", strsignal(signo));
    server_stop(&server);
    return 0;
}

// The name /v1/models and the responses give the model: its checkpoint folder's, never a path of this machine.
static void folder_name(const char *dir, char *name, size_t size) {
    size_t end = strlen(dir), start;
    while (end > 1 && dir[end - 1] == '/') end--;
    for (start = end; start > 0 && dir[start - 1] != '/'; start--) continue;
    snprintf(name, size, "%.*s", (int)(end - start), dir + start);
}

int cmd_serve(const Args *args, Err *err) {
    const char *target_dir, *draft_dir;
    SpecParams spec;
    if (require_tokens(args, "serve", "the answer to every request that sets no max_tokens", err)) return -1;
    if (args->api_key && !args->api_key[0])  // ("Bearer " alone would match it: a key that keeps no one out)
        return err_fmt(err, "--api-key: empty; give the key that clients must send (Authorization: Bearer KEY)");
    if (model_dirs(args, &target_dir, &draft_dir, err) || spec_params_from_args(args, &spec, err)) return -1;
    Session s;
    Tokenizer tok;
    ChatTemplate chat;
    bool have_tok = false, have_chat = false;
    int rc = -1;
    if (session_open_batched(&s, args, target_dir, draft_dir, err)) goto done;
    if (load_tokenizer(&tok, target_dir, true, &have_tok, err)) goto done;
    if (tokenizer_vocab_size(&tok) < s.target.n_vocab)  // as generate: ids past the tokenizer's are never sampled
        model_limit_vocab(&s.target, tokenizer_vocab_size(&tok));
    Err no_template;  // chat completions are refused with this reason when the checkpoint has no usable template
    have_chat = chat_template_load(&chat, target_dir, &no_template) == 0;
    char no_chat[sizeof no_template.msg + 64];
    snprintf(no_chat, sizeof no_chat, "this checkpoint has no chat template that specdec can use: %s",
             no_template.msg);
    if (!have_chat) fprintf(stderr, "specdec serve: /v1/chat/completions is refused: %s\n", no_chat);
    const Engine engine = {.target = &s.target, .draft = s.has_draft ? &s.draft : NULL,
                           .lookup = session_drafts_by_lookup(args, s.has_draft),
                           .tok = &tok, .chat = have_chat ? &chat : NULL, .no_chat = no_chat,
                           .spec = spec, .draft_p_min = args->draft_p_min,
                           .default_max_tokens = args->n_tokens};
    char model[256];
    folder_name(target_dir, model, sizeof model);
    const ServeOptions options = {.host = args->host ? args->host : "127.0.0.1", .port = args->port,
                                  .api_key = args->api_key, .parallel = args->parallel, .queue = args->queue,
                                  .max_body = (size_t)args->max_body,
                                  .timeout = args->timeout, .model = model};
    rc = serve_until_signal(&engine, &options, err);
done:
    if (have_chat) chat_template_free(&chat);
    if (have_tok) tokenizer_free(&tok);
    session_close(&s);
    return rc;
}
