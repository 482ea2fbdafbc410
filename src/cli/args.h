// args.h — the command line's options: one table (args.c) of names, types, accepted ranges and help lines, parsed
// into Args; each subcommand (main.c) names the options it takes.
#ifndef SPECDEC_CLI_ARGS_H
#define SPECDEC_CLI_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/error.h"
#include "speculative/sampling.h"
#include "speculative/speculative.h"

enum { MAX_POSITIONAL = 4096, MAX_REPEATED = 32 };

// The values of an option that may be given several times (--chat-var, --stop), in order.
typedef struct {
    const char *items[MAX_REPEATED];
    int n;
} Repeated;

typedef struct {
    const char *model_dir;      // -m
    const char *draft_dir;      // -d
    const char *ids;            // --ids "1 2 3"
    const char *prompt;         // -p
    const char *file;           // -f
    const char *gamma;          // --gamma N | heuristic | auto
    const char *sampler;        // --sampler coupled | rejection
    const char *pipeline;       // --pipeline auto | on | off
    const char *trace;          // --trace FILE
    int logprobs;               // --logprobs K: each token's log-probability and K alternatives (−1: not given)
    const char *logprobs_file;  // --logprobs-file FILE: where their lines go
    float draft_p_min;          // --draft-p-min
    int n_tokens;               // -n
    SamplingParams sampling;    // --temp, --top-k, --top-p, --min-p
    Penalties penalties;        // --repetition-penalty, --presence-penalty, --frequency-penalty
    uint64_t seed;              // --seed
    int threads;                // --threads (0 = cpus_available())
    int ctx;                    // --ctx (0 = the command's default)
    int draft_threads;          // --draft-threads (0 = the count whose draft steps measure fastest)
    int tree_width;             // --tree-width W (0: a chain; with --tree the widest tried, default 4)
    const char *quant;          // --quant none | q8 | bf16: the target's matrices
    const char *draft_quant;    // --draft-quant none | q8 | bf16: the draft's (NULL: DRAFT_QUANT_DEFAULT)
    const char *host;           // serve --host
    const char *api_key;        // serve --api-key
    int port;                   // serve --port (0: any free port)
    int queue;                  // serve --queue: requests that may wait beside those generating
    int max_body;               // serve --max-body, bytes
    int timeout;                // serve --timeout, seconds a connection may stay idle
    const char *output;         // batch -o FILE (NULL: standard output); convert -o FILE.gguf
    const char *type;           // convert --type bf16 | q8_0 | q4_0 | q4_k_m | q5_k_m | q6_k
    int parallel;               // serve and batch --parallel: generations at once
    Repeated chat_vars;         // --chat-var NAME=JSON
    const char *tools;          // render --tools FILE: OpenAI function tools for the template
    Repeated stops;             // --stop TEXT
    const char *system;         // --system TEXT: the conversation's system message
    const char *grammar;        // --grammar FILE: GBNF the output follows (docs/structured.md)
    const char *json_schema;    // --json-schema FILE | JSON
    bool json;                  // --json: the output is a JSON object
    bool print_ids, stats, all, show, compare, allow_special, lookup, no_lookup, tree, help;
    bool add_generation_prompt; // --add-generation-prompt
    bool chat;                  // --chat: the prompt is a user message, through the chat template
    const char *positional[MAX_POSITIONAL];
    int n_positional;
} Args;

// A command's own --help text of an option, where the table's (written for generate) would mislead: convert's -m
// reads no .gguf file, logits' --threads has no draft to leave a thread to.
typedef struct {
    const char *name;       // the option's long name
    const char *value;      // the value's name ("FILE"), or NULL: the table's
    const char *help;
} OptionText;

typedef struct {
    const char *name;
    int (*run)(const Args *args, Err *err);
    const char *usage;
    const char *summary;
    const char *accepted;   // space-separated option names this command takes
    int min_positional, max_positional;
    const OptionText *own_texts;  // {NULL}-ended, or NULL: options this command describes in its own words
} Command;

// Parses argv (the words after the subcommand) into args for cmd: unknown options, missing values and numbers out
// of range are errors.
int args_parse(Args *args, const Command *cmd, int argc, char **argv, Err *err);

// Prints cmd's usage and the options it accepts.
void args_print_help(FILE *out, const Command *cmd);

// --gamma N | heuristic | auto (NULL: auto) into params->policy and params->gamma.
int parse_gamma(const char *text, SpecParams *params, Err *err);

// --sampler coupled | rejection (NULL: rejection).
int parse_sampler(const char *text, SpecSampler *sampler, Err *err);

// --pipeline auto | on | off (NULL: auto).
int parse_pipeline(const char *text, Pipelining *pipeline, Err *err);

// -n where each answer generates up to N — chat's replies, and in serve and batch a request that sets no max_tokens
// (an API request's own max_tokens is at least 1): 0 would leave every one empty, and is refused, naming `command`
// and `answers`. (generate -n 0 has a meaning of its own: the prompt prefilled, nothing generated.)
int require_tokens(const Args *args, const char *command, const char *answers, Err *err);

// Parses token ids ("1 2 3" or "1,2,3") into a malloc'd array.
int parse_ids(const char *text, int **ids_out, int *n_out, Err *err);


#endif
