// record.c — what a round's record feeds besides the γ policy: the statistics, the trace and --show (round.h).
#include "speculative/round.h"

void record_stats(SpecStats *st, Tally *tally, const Round *r) {
    const int k = r->tree.n;
    st->rounds++;
    st->drafted += k;
    st->accepted += r->n_accepted;
    st->sibling_accepted += r->n_sibling_kept;
    st->plain_rounds += k == 0;
    st->tree_rounds += r->width > 1;
    st->lookup_rounds += r->report.run_proposed;
    st->lookup_drafted += r->report.run_proposed ? k : 0;
    st->draft_rows += r->report.rows;
    st->target_seconds += r->target_seconds;
    st->q_seconds += r->report.q_seconds;
    st->p_seconds += r->p_seconds;
    st->accept_seconds += r->accept_seconds;
    st->commit_seconds += r->commit_seconds;
    tally->gamma_sum += r->depth;
    tally->rounds_by_shape[r->width][r->depth]++;
    st->rounds_by_depth[r->depth]++;
    for (int level = 1; level <= r->depth; level++) {
        st->level_reached[level] += r->n_accepted >= level - 1;
        st->level_kept[level] += r->n_accepted >= level;
    }
    st->lookup_accepted += r->report.run_proposed ? r->n_accepted : 0;
    for (int i = 0; i < r->n_verified; i++) {
        st->sum_min_pq += r->overlap[i];
        st->n_min_pq++;
        tally->alpha_sum += r->learned[i];
    }
    if (r->wide_width >= 2) tally->wide_tried[r->wide_width]++, tally->wide_kept[r->wide_width] += r->wide_kept;
    tally->draft_seconds += r->draft_seconds;
    tally->draft_calls += r->draft_calls;
    tally->ahead_chains += r->drafted_ahead > 0;
    st->ahead_rounds += r->report.ahead;
    st->ahead_extended += r->report.ahead && r->report.calls > 0;
    st->ahead_handoff_seconds += r->ahead_handoff_seconds;
}

const char *spec_token_kind_name(TokenKind kind) {
    static const char *const names[] = {[TOKEN_ACCEPTED] = "accepted", [TOKEN_REJECTED] = "rejected",
                                        [TOKEN_RESAMPLED] = "resampled", [TOKEN_BONUS] = "bonus",
                                        [TOKEN_TARGET] = "target"};
    return names[kind];
}

// The token that ended a round and its kind, for the trace: the first accepted draft that is the end-of-text token
// (generation stops there: nothing after it is used), or else the target's token, of the round's kind.
static int round_end(const Round *r, const SpecParams *params, TokenKind *kind) {
    *kind = r->kind;
    for (int i = 0; i < r->n_accepted; i++)
        if (spec_is_end_of_text(params, r->tree.node[r->path[i]].token)) {
            *kind = TOKEN_ACCEPTED;
            return r->tree.node[r->path[i]].token;
        }
    return r->next;
}

static void trace_ints(FILE *f, const char *name, const int *v, int n) {
    fprintf(f, ", \"%s\": [", name);
    for (int i = 0; i < n; i++) fprintf(f, "%s%d", i ? ", " : "", v[i]);
    fputc(']', f);
}

// One JSON line: where the drafts came from (the lookup's run, the draft model, or none: a plain round), the lookup's
// match and run (proposed or not), the draft model's forwards and the rows they fed, the tree (its nodes' tokens and
// parents, −1 for the newest committed token), the children the accept rule tried (nodes) with p(x), q(x) and r of
// each, and the accepted path (nodes, root first).
void trace_round(FILE *f, int round, const Round *r, const SpecParams *params) {
    const bool coupled = params->sampler == SAMPLER_COUPLED;
    const char *source = r->tree.n == 0 ? "plain" : r->report.run_proposed ? "lookup" : "draft";
    fprintf(f, "{\"round\": %d, \"gamma\": %d, \"width\": %d, \"source\": \"%s\", \"match\": %d, \"run\": %d, "
            "\"draft_forwards\": %d, \"draft_rows\": %d", round, r->depth, r->width, source, r->report.match_length,
            r->report.n_run, r->report.calls, r->report.rows);
    trace_ints(f, "drafted", r->tokens + 1, r->tree.n);
    trace_ints(f, "parents", r->tree.parent, r->tree.n);
    trace_ints(f, "tried", r->tried, r->n_verified);
    const double *columns[3] = {r->p_x, r->q_x, coupled ? NULL : r->r};  // coupling draws no acceptance number
    const char *names[3] = {"p", "q", "r"};
    for (int c = 0; c < 3; c++) {
        if (!columns[c]) continue;
        fprintf(f, ", \"%s\": [", names[c]);
        for (int i = 0; i < r->n_verified; i++) fprintf(f, "%s%.6g", i ? ", " : "", columns[c][i]);
        fputc(']', f);
    }
    trace_ints(f, "path", r->path, r->n_accepted);
    TokenKind kind;
    const int token = round_end(r, params, &kind);
    fprintf(f, ", \"accepted\": %d, \"token\": %d, \"kind\": \"%s\", \"residual_mass\": %.6g", r->n_accepted,
            token, spec_token_kind_name(kind), r->residual_mass);
    // pipelined drafting: whether this round's drafts were drafted ahead, and how many it drafted ahead for the next
    fprintf(f, ", \"from_ahead\": %s, \"drafted_ahead\": %d}\n", r->report.ahead ? "true" : "false",
            r->drafted_ahead);
}

// The committed tokens to --show's callback, as decided: the children tried and rejected at a node are shown (never
// emitted) just before the token that took their place — a kept sibling, or the correction — as in the paper's
// Figure 1.
void show_round(const SpecParams *params, const Round *r) {
    int t = 0;  // the children tried, in order: at each level, rejected ones, then the kept one (or none)
    for (int i = 0; i < r->n_committed; i++) {
        const int kept = i < r->n_accepted ? r->path[i] : -1;
        for (; t < r->n_verified && r->tried[t] != kept; t++)
            params->on_token(params->ctx, r->tree.node[r->tried[t]].token, TOKEN_REJECTED);
        t++;
        params->on_token(params->ctx, kept >= 0 ? r->tree.node[kept].token : r->next,
                         kept >= 0 ? TOKEN_ACCEPTED : r->kind);
    }
}

void finish_stats(SpecStats *st, const Tally *tally, double target_t1_seconds, double draft_step_seconds) {
    st->draft_calls = tally->draft_calls;
    st->draft_seconds = tally->draft_seconds;
    st->target_t1_seconds = target_t1_seconds;
    st->draft_step_seconds = draft_step_seconds;
    st->mean_gamma = st->rounds ? tally->gamma_sum / st->rounds : 0;
    st->ahead_discarded = tally->ahead_chains - st->ahead_rounds;
    const double alpha = st->n_min_pq ? tally->alpha_sum / st->n_min_pq : 0;
    for (int width = 1; width <= TREE_FIRST_WIDTH_MAX; width++) {  // a tree's a_W: the run's rate of kept wide levels
        const double a_first =
            tally->wide_tried[width] ? (double)tally->wide_kept[width] / tally->wide_tried[width] : alpha;
        for (int gamma = 0; gamma <= GAMMA_MAX; gamma++)
            st->expected_tokens += tally->rounds_by_shape[width][gamma] *
                                   (width == 1 ? spec_expected_tokens(alpha, gamma)
                                               : spec_tree_expected_tokens(a_first, alpha, gamma));
    }
    const double forwards = st->target_seconds + st->draft_seconds;
    st->predicted_speedup = forwards > 0 ? st->expected_tokens * st->target_t1_seconds / forwards : 1.0;
}
