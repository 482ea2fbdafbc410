// args.c — the option table and its parser (see args.h).
#include "cli/args.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { OPT_FLAG, OPT_INT, OPT_FLOAT, OPT_STRING, OPT_U64, OPT_REPEATED } OptType;

typedef struct {
    const char *name;   // --name
    char short_name;    // -x, or 0
    OptType type;
    size_t offset;      // of the field in Args
    double min, max;    // accepted range of a number
    const char *value;  // the value's name in --help ("FILE"); NULL for a flag
    const char *help;
} Option;

#define FIELD(f) offsetof(Args, f)
static const Option options[] = {
    {"model", 'm', OPT_STRING, FIELD(model_dir), 0, 0, "DIR", "target checkpoint folder (config.json + model.safetensors), or a .gguf file"},
    {"draft", 'd', OPT_STRING, FIELD(draft_dir), 0, 0, "DIR", "draft checkpoint folder or .gguf file: decode speculatively"},
    {"ids", 0, OPT_STRING, FIELD(ids), 0, 0, "IDS", "prompt as token ids, e.g. \"464 3290 318\""},
    {"prompt", 'p', OPT_STRING, FIELD(prompt), 0, 0, "TEXT", "prompt text (- : read it from standard input)"},
    {"file", 'f', OPT_STRING, FIELD(file), 0, 0, "FILE", "read the text from FILE (- : standard input)"},
    {"tokens", 'n', OPT_INT, FIELD(n_tokens), 0, 1 << 20, "N", "tokens to generate (default 64)"},
    {"temp", 0, OPT_FLOAT, FIELD(sampling.temperature), 0, 100, "T", "temperature; 0 = greedy (default 0)"},
    {"top-k", 0, OPT_INT, FIELD(sampling.top_k), 0, 1 << 24, "K", "sample from the k most likely tokens; 0 = all"},
    {"top-p", 0, OPT_FLOAT, FIELD(sampling.top_p), 1e-6, 1, "P", "nucleus sampling mass (default 1 = off)"},
    {"min-p", 0, OPT_FLOAT, FIELD(sampling.min_p), 0, 1, "P",
     "keep the tokens at least P times as likely as the most likely one (default 0 = off)"},
    {"repetition-penalty", 0, OPT_FLOAT, FIELD(penalties.repetition), 0.01, 100, "R",
     "divide the positive logits of tokens in the prompt or the output by R, multiply the negative (default 1 = off)"},
    {"presence-penalty", 0, OPT_FLOAT, FIELD(penalties.presence), -2, 2, "A",
     "subtract A from the logits of tokens in the output (default 0)"},
    {"frequency-penalty", 0, OPT_FLOAT, FIELD(penalties.frequency), -2, 2, "F",
     "subtract F times its count in the output from a token's logit (default 0)"},
    {"seed", 0, OPT_U64, FIELD(seed), 0, 0, "N", "random seed (default 0): same seed, files and options, same tokens"},
    {"gamma", 0, OPT_STRING, FIELD(gamma), 0, 0, "G",
     "draft length (a tree's depth): N (1-16), heuristic, or auto (default)"},
    {"sampler", 0, OPT_STRING, FIELD(sampler), 0, 0, "NAME",
     "coupled: output = target-only's for the seed; rejection: Algorithm 1 (default rejection)"},
    {"lookup", 0, OPT_FLAG, FIELD(lookup), 0, 0, NULL,
     "draft by n-gram lookup over the prompt and the text so far (with -d: per round, its run or the draft's, as "
     "by default)"},
    {"no-lookup", 0, OPT_FLAG, FIELD(no_lookup), 0, 0, NULL, "with -d, draft with the model alone"},
    {"tree-width", 0, OPT_INT, FIELD(tree_width), 1, 4, "W",
     "draft a tree: W first-level children, each then a chain (-d; --lookup alone: shorter matches; default 1)"},
    {"tree", 0, OPT_FLAG, FIELD(tree), 0, 0, NULL,
     "pick the tree's width (up to --tree-width, default 4) and depth by measured cost; a chain if none pays"},
    {"pipeline", 0, OPT_STRING, FIELD(pipeline), 0, 0, "MODE",
     "draft the next round while the target verifies, on a core of its own: on, off, or auto (default: on where a "
     "CPU is free beyond --threads)"},
    {"draft-p-min", 0, OPT_FLOAT, FIELD(draft_p_min), 0, 1, "P", "stop drafting when the draft's top probability < P"},
    {"ctx", 0, OPT_INT, FIELD(ctx), 1, 1 << 24, "N",
     "positions the KV cache holds (default: the model's context, at most 4096)"},
    {"threads", 't', OPT_INT, FIELD(threads), 1, 1024, "N",
     "worker threads (default: the CPUs this process may use)"},
    {"draft-threads", 0, OPT_INT, FIELD(draft_threads), 1, 1024, "N",
     "threads the draft uses, at most --threads (default: the count whose steps measure fastest)"},
    {"quant", 0, OPT_STRING, FIELD(quant), 0, 0, "TYPE", "the target's weight matrices: q8, quantized to 8 bits at load; "
                                                 "q4, to 4 bits (the embeddings, the head and the first and last "
                                                 "layers' attention to 8); bf16, held in BF16, "
                                                 "times activations rounded to BF16 (AVX512_BF16); none (or stored), "
                                                 "as stored (default)"},
    {"draft-quant", 0, OPT_STRING, FIELD(draft_quant), 0, 0, "TYPE", "the draft's: q8 (default: it only proposes, the "
                                                             "target decides), q4, bf16 or none"},
    {"print-ids", 0, OPT_FLAG, FIELD(print_ids), 0, 0, NULL, "print token ids instead of text"},
    {"stats", 0, OPT_FLAG, FIELD(stats), 0, 0, NULL, "print one JSON line of statistics on stderr"},
    {"show", 0, OPT_FLAG, FIELD(show), 0, 0, NULL, "mark accepted, rejected and target tokens (colour on a terminal)"},
    {"trace", 0, OPT_STRING, FIELD(trace), 0, 0, "FILE", "write one JSON line per speculative round to FILE (- for stderr)"},
    {"logprobs", 0, OPT_INT, FIELD(logprobs), 0, 20, "K",
     "write each generated token's log-probability and its K most likely alternatives to --logprobs-file"},
    {"logprobs-file", 0, OPT_STRING, FIELD(logprobs_file), 0, 0, "FILE",
     "where --logprobs writes: one JSON line per generated token to FILE (- for stderr)"},
    {"compare", 0, OPT_FLAG, FIELD(compare), 0, 0, NULL, "also run target-only decoding and compare speeds"},
    {"allow-special", 0, OPT_FLAG, FIELD(allow_special), 0, 0, NULL, "\"<|endoftext|>\" in text is the special token"},
    {"stop", 0, OPT_REPEATED, FIELD(stops), 0, 0, "TEXT",
     "end the text where TEXT first occurs, TEXT not printed (repeatable: the first of them to occur)"},
    {"chat", 0, OPT_FLAG, FIELD(chat), 0, 0, NULL,
     "the prompt is one user message, rendered by the checkpoint's chat template (tokenizer_config.json)"},
    {"system", 0, OPT_STRING, FIELD(system), 0, 0, "TEXT", "a system message before the user's first"},
    {"grammar", 0, OPT_STRING, FIELD(grammar), 0, 0, "FILE", "the output follows the GBNF grammar in FILE (docs/structured.md)"},
    {"json-schema", 0, OPT_STRING, FIELD(json_schema), 0, 0, "SCHEMA",
     "the output is JSON that the schema (FILE, or inline JSON) validates"},
    {"json", 0, OPT_FLAG, FIELD(json), 0, 0, NULL, "the output is a JSON object"},
    {"add-generation-prompt", 0, OPT_FLAG, FIELD(add_generation_prompt), 0, 0, NULL,
     "end the rendering with the template's opening of the assistant's reply"},
    {"chat-var", 0, OPT_REPEATED, FIELD(chat_vars), 0, 0, "NAME=JSON",
     "a further variable for the chat template, e.g. enable_thinking=false (repeatable)"},
    {"tools", 0, OPT_STRING, FIELD(tools), 0, 0, "FILE",
     "a JSON list of OpenAI function tools, the template's variable tools (docs/cli.md)"},
    {"all", 0, OPT_FLAG, FIELD(all), 0, 0, NULL, "logits of every position, not only the last"},
    {"host", 0, OPT_STRING, FIELD(host), 0, 0, "ADDRESS", "the address to listen on (default 127.0.0.1: this machine only)"},
    {"port", 0, OPT_INT, FIELD(port), 0, 65535, "N", "the port to listen on (default 8080; 0: any free port)"},
    {"api-key", 0, OPT_STRING, FIELD(api_key), 0, 0, "KEY", "require \"Authorization: Bearer KEY\" (all but /health)"},
    {"queue", 0, OPT_INT, FIELD(queue), 0, 4096, "N", "requests that may wait beside those generating (default 8); "
                                                 "more get 503"},
    {"max-body", 0, OPT_INT, FIELD(max_body), 1, 1 << 30, "BYTES", "the largest request body in bytes (default 1048576)"},
    {"timeout", 0, OPT_INT, FIELD(timeout), 1, 86400, "S", "seconds a connection may stay idle (default 30)"},
    {"output", 'o', OPT_STRING, FIELD(output), 0, 0, "FILE", "write the answers to FILE (default: standard output)"},
    {"type", 0, OPT_STRING, FIELD(type), 0, 0, "TYPE", "the GGUF file's weights: bf16, q8_0, q4_0, q4_k_m, q5_k_m or q6_k "
                                               "(llama.cpp's types; docs/checkpoints.md)"},
    {"parallel", 0, OPT_INT, FIELD(parallel), 1, 256, "N", "generations at once, in one batch (default 4)"},
    {"help", 'h', OPT_FLAG, FIELD(help), 0, 0, NULL, "show this help"},
};
#define N_OPTIONS (int)(sizeof options / sizeof options[0])

static bool accepts(const Command *cmd, const char *name) {
    size_t len = strlen(name);
    for (const char *p = cmd->accepted; (p = strstr(p, name)); p += len)
        if ((p == cmd->accepted || p[-1] == ' ') && (p[len] == ' ' || p[len] == '\0')) return true;
    return false;
}

// The option as cmd describes it: the table's entry, with cmd's own value name and text where it has them.
static Option described(const Command *cmd, const Option *o) {
    Option shown = *o;
    for (const OptionText *t = cmd->own_texts; t && t->name; t++)
        if (strcmp(t->name, o->name) == 0) {
            if (t->value) shown.value = t->value;
            shown.help = t->help;
        }
    return shown;
}

// An option as --help shows it: "-x, --name VALUE", or "    --name" for a flag without a short form.
static void option_flag(char flag[64], const Option *o) {
    char shorter[8] = "    ";
    if (o->short_name) snprintf(shorter, sizeof shorter, "-%c, ", o->short_name);
    snprintf(flag, 64, "%s--%s%s%s", shorter, o->name, o->value ? " " : "", o->value ? o->value : "");
}

void args_print_help(FILE *out, const Command *cmd) {
    fprintf(out, "usage: specdec %s\n%s\n\noptions:\n", cmd->usage, cmd->summary);
    int width = 0;  // the widest option shown: every help text starts two spaces after it
    char flag[64];
    for (int i = 0; i < N_OPTIONS; i++) {
        if (!accepts(cmd, options[i].name)) continue;
        const Option shown = described(cmd, &options[i]);
        option_flag(flag, &shown);
        if ((int)strlen(flag) > width) width = (int)strlen(flag);
    }
    for (int i = 0; i < N_OPTIONS; i++) {
        if (!accepts(cmd, options[i].name)) continue;
        const Option shown = described(cmd, &options[i]);
        option_flag(flag, &shown);
        fprintf(out, "  %-*s  %s\n", width, flag, shown.help);
    }
}

// Parses one option value into its field, checking syntax and range.
static int set_option(Args *args, const Option *o, const char *value, Err *err) {
    void *field = (char *)args + o->offset;
    char *end;
    errno = 0;
    switch (o->type) {
    case OPT_FLAG: *(bool *)field = true; return 0;
    case OPT_STRING: *(const char **)field = value; return 0;
    case OPT_REPEATED: {
        Repeated *r = field;
        if (r->n == MAX_REPEATED) return err_fmt(err, "--%s: given more than %d times", o->name, MAX_REPEATED);
        r->items[r->n++] = value;
        return 0;
    }
    case OPT_U64: {
        unsigned long long v = strtoull(value, &end, 0);
        if (errno || end == value || *end || value[0] == '-')
            return err_fmt(err, "--%s: expected a non-negative integer, got \"%s\"", o->name, value);
        *(uint64_t *)field = v;
        return 0;
    }
    case OPT_INT: {
        long v = strtol(value, &end, 10);
        if (errno || end == value || *end || v < o->min || v > o->max)
            return err_fmt(err, "--%s: expected an integer in [%ld, %ld], got \"%s\"", o->name, (long)o->min,
                           (long)o->max, value);
        *(int *)field = (int)v;
        return 0;
    }
    case OPT_FLOAT: {
        double v = strtod(value, &end);
        if (errno || end == value || *end || !(v >= o->min && v <= o->max))
            return err_fmt(err, "--%s: expected a number in [%g, %g], got \"%s\"", o->name, o->min, o->max, value);
        *(float *)field = (float)v;
        return 0;
    }
    }
    return 0;
}

// The option `arg` names: "-x", "--name" or the name of "--name=value" (name_len bytes after the dashes).
static const Option *find_option(const char *arg, size_t name_len) {
    for (int i = 0; i < N_OPTIONS; i++) {
        const Option *o = &options[i];
        if (arg[1] == '-' ? strlen(o->name) == name_len && strncmp(arg + 2, o->name, name_len) == 0
                          : arg[1] == o->short_name && arg[2] == '\0')
            return o;
    }
    return NULL;
}

// Words that start with '-' are options, except "-" alone (standard input) and negative numbers; after "--",
// every word is positional. An option's value is the next word, or follows '=' in "--name=value".
int args_parse(Args *args, const Command *cmd, int argc, char **argv, Err *err) {
    bool options_end = false;
    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i];
        if (options_end || arg[0] != '-' || arg[1] == '\0' || (arg[1] >= '0' && arg[1] <= '9')) {
            if (args->n_positional == MAX_POSITIONAL)
                return err_fmt(err, "%s: more than %d arguments", cmd->name, MAX_POSITIONAL);
            args->positional[args->n_positional++] = arg;
            continue;
        }
        if (strcmp(arg, "--") == 0) {
            options_end = true;
            continue;
        }
        const char *equals = arg[1] == '-' ? strchr(arg, '=') : NULL;
        const size_t name_len = equals ? (size_t)(equals - arg - 2) : strlen(arg + 2);
        const Option *o = find_option(arg, name_len);
        if (!o && arg[1] != '-' && arg[2] == '=' && (o = find_option((char[]){'-', arg[1], '\0'}, 1)) &&
            accepts(cmd, o->name))
            return err_fmt(err, "%s: a short option takes no '=': %.2s %s, or --%s=%s", cmd->name, arg, arg + 3,
                           o->name, arg + 3);
        if (!o || !accepts(cmd, o->name))
            return err_fmt(err, "%s: unknown option %.*s (see 'specdec %s --help')", cmd->name,
                           (int)(equals ? equals - arg : (long)strlen(arg)), arg, cmd->name);
        if (o->type == OPT_FLAG && equals) return err_fmt(err, "option --%s takes no value", o->name);
        if (o->type != OPT_FLAG && !equals && i + 1 == argc) return err_fmt(err, "option %s needs a value", arg);
        const char *value = o->type == OPT_FLAG ? NULL : equals ? equals + 1 : argv[++i];
        if (set_option(args, o, value, err)) return -1;
    }
    if (args->help) return 0;
    if (args->n_positional > cmd->max_positional)
        return err_fmt(err, "%s: unexpected argument \"%s\" (see 'specdec %s --help')", cmd->name,
                       args->positional[cmd->max_positional], cmd->name);
    if (args->n_positional < cmd->min_positional) return err_fmt(err, "usage: specdec %s", cmd->usage);
    return 0;
}

int require_tokens(const Args *args, const char *command, const char *answers, Err *err) {
    if (args->n_tokens > 0) return 0;
    return err_fmt(err, "%s: -n 0 would leave %s empty; give -n 1 or more (generate -n 0 prefills its prompt alone)",
                   command, answers);
}

// Parses token ids ("1 2 3" or "1,2,3") into a malloc'd array.
int parse_ids(const char *text, int **ids_out, int *n_out, Err *err) {
    int cap = 16, n = 0;
    int *ids = malloc(sizeof(int) * cap);
    const char *p = text;
    for (;;) {
        while (*p == ' ' || *p == ',' || *p == '\t' || *p == '\n') p++;
        if (!*p) break;
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 0 || v > INT32_MAX || (*end && !strchr(" ,\t\n", *end))) {
            free(ids);
            return err_fmt(err, "token ids: expected non-negative integers separated by spaces, got \"%.40s\"", p);
        }
        if (n == cap) ids = realloc(ids, sizeof(int) * (cap *= 2));
        ids[n++] = (int)v;
        p = end;
    }
    if (n == 0) {
        free(ids);
        return err_fmt(err, "token ids: none given");
    }
    *ids_out = ids;
    *n_out = n;
    return 0;
}

int parse_gamma(const char *text, SpecParams *params, Err *err) {
    params->policy = GAMMA_AUTO;
    params->gamma = 5;  // the heuristic's start
    if (!text || strcmp(text, "auto") == 0) return 0;
    if (strcmp(text, "heuristic") == 0) {
        params->policy = GAMMA_HEURISTIC;
        return 0;
    }
    char *end;
    long v = strtol(text, &end, 10);
    if (end == text || *end || v < 1 || v > GAMMA_MAX)
        return err_fmt(err, "--gamma: expected an integer in [1, %d], heuristic or auto, got \"%s\"", GAMMA_MAX, text);
    params->policy = GAMMA_FIXED;
    params->gamma = (int)v;
    return 0;
}

int parse_pipeline(const char *text, Pipelining *pipeline, Err *err) {
    static const char *const names[] = {[PIPELINE_OFF] = "off", [PIPELINE_AUTO] = "auto", [PIPELINE_ON] = "on"};
    *pipeline = PIPELINE_AUTO;
    for (Pipelining p = PIPELINE_OFF; text && p <= PIPELINE_ON; p++)
        if (strcmp(text, names[p]) == 0) {
            *pipeline = p;
            return 0;
        }
    return text ? err_fmt(err, "--pipeline: expected auto, on or off, got \"%s\"", text) : 0;
}

int parse_sampler(const char *text, SpecSampler *sampler, Err *err) {
    *sampler = SAMPLER_REJECTION;
    if (!text || strcmp(text, "rejection") == 0) return 0;
    if (strcmp(text, "coupled") == 0) {
        *sampler = SAMPLER_COUPLED;
        return 0;
    }
    return err_fmt(err, "--sampler: expected coupled or rejection, got \"%s\"", text);
}
