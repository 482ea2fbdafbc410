// logprobs.h — a committed token's log-probability and its most likely alternatives, as OpenAI's `logprobs` report
// them: the target's own log-softmax of its raw logits at that position,
//   log p(x) = l_x − m − log Σ_y exp(l_y − m),   m = max_y l_y,
// before penalties, grammar masks, temperature and truncation (what vLLM returns by default, its "raw" logprobs).
// So a token's value is the same whether it was drafted and kept, drawn from the residual, or decoded plainly, and
// equals the log-softmax of what `specdec logits` prints for that prefix: the scheduler keeps each verified row as
// the forward gave it (scheduler.c, keep_raw_rows) before anything adjusts it in place.
//
// Computed in double from the float logits, in one fixed order of summation (libm's exp and log, the same on every
// ISA), and rounded to float, the precision OpenAI's and vLLM's values have; "%.9g" prints a float so that it reads
// back bit for bit.
#ifndef SPECDEC_LOGPROBS_H
#define SPECDEC_LOGPROBS_H

enum { LOGPROBS_TOP_MAX = 20 };  // the most alternatives reported per token (OpenAI's top_logprobs limit)

typedef struct {
    int token;                          // the committed token
    float logprob;                      // log p(token)
    int n_top;                          // alternatives below: the n_top most likely tokens, by logit, highest first,
    int top[LOGPROBS_TOP_MAX];          // the lower id first on a tie (model_top_logits' order)
    float top_logprob[LOGPROBS_TOP_MAX];
} TokenLogprobs;

// The log-softmax of a row logits [V] (finite values) at token, and its n_top (0..LOGPROBS_TOP_MAX) most likely
// tokens, into *out.
void logprobs_of_row(TokenLogprobs *out, const float *logits, int V, int token, int n_top);

#endif
