// q5_avx2.c — GGUF's Q5_0, Q5_1 and Q4_1 multiplied as stored (kernels.h, "GGUF's Q5_0, Q5_1 and Q4_1, as stored")
// with AVX2 and with AVX-VNNI, on q8's panel walk (panel_walk_avx2.h): a q5 panel's 16 rows as two halves of 8, one
// 32-bit lane per weight row. A block's 8 groups of 8 rows × 4 inputs are unpacked once for all the pass's
// activation rows: the nibbles as q4's (q4_avx2.c), and for Q5_0 and Q5_1 each group's fifth bits shifted to bit 4
// from the block's last line and or-ed in, u = q. Q5_0's block sums start at −16 · Σ q_x (Q8Block.offset / 8), so
// that they are the exact Σ (q − 16) · q_x; Q5_1's and Q4_1's at 0, Σ q · q_x. The float steps are the walk's, the
// reference's (q8.c; the mins' too), so the result is bit-identical to it.
#include "panel_walk_avx2.h"

enum { GROUPS = Q8_BLOCK / Q8_GROUP };

// The half's 8 groups of a block of `type` (group g: its 8 rows × inputs 4g..4g+3) as u = q.
//   q: the block's quants from the half's first row
static inline __attribute__((always_inline)) void q5_unpack(__m256i w[GROUPS], const uint8_t *q,
                                                            const WeightType type) {
    const __m256i nibble = _mm256_set1_epi8(0x0f), fifth = _mm256_set1_epi8(0x10);
    for (int line = 0; line < GROUPS / 2; line++) {  // line l: groups l (low nibbles) and l + 4 (high ones)
        const __m256i packed = _mm256_load_si256((const __m256i *)(q + 64 * line));
        w[line] = _mm256_and_si256(packed, nibble);
        w[line + GROUPS / 2] = _mm256_and_si256(_mm256_srli_epi16(packed, 4), nibble);
    }
    if (!fifth_bits(type)) return;
    const __m256i high = _mm256_load_si256((const __m256i *)(q + Q5_NIBBLE_BYTES));
    for (int g = 0; g < GROUPS; g++) {  // group g's fifth bits: bit g of each byte, to bit 4
        const __m256i bits = g < 4 ? _mm256_slli_epi16(high, 4 - g) : _mm256_srli_epi16(high, g - 4);
        w[g] = _mm256_or_si256(w[g], _mm256_and_si256(bits, fifth));
    }
}

// Where a block's sum starts: −16 · Σ q_x for Q5_0, 0 for Q5_1 and Q4_1.
static inline int32_t sum_start(const Q8Block *xb, const WeightType type) {
    return type == WEIGHT_Q5_0 ? xb->offset / 8 : 0;
}

// The walk's BlockSumsAvx2 for `type`: vpmaddubsw multiplies u by the activation bytes into pairs of 16 bits, and
// four groups' pairs add up in 16 bits (each |·| ≤ 4 · 2 · 31 · 127 = 31496 < 2¹⁵; vpaddsw, which never saturates
// here, as q4_avx2.c adds them) before vpmaddwd by ones widens them into 32 bits.
static inline __attribute__((always_inline)) void q5_block_sums(__m256i isum[MAX_ROWS_PER_PASS], const uint8_t *q,
                                                                const Q8Block *x, int nb, const int n,
                                                                const WeightType type) {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i w[GROUPS];
    q5_unpack(w, q, type);
    for (int t = 0; t < n; t++) {
        const Q8Block *xb = &x[(size_t)t * nb];
        isum[t] = _mm256_set1_epi32(sum_start(xb, type));
        for (int g0 = 0; g0 < GROUPS; g0 += GROUPS / 2) {
            __m256i pairs = _mm256_setzero_si256();
            for (int g = g0; g < g0 + GROUPS / 2; g++)
                pairs = _mm256_adds_epi16(pairs, _mm256_maddubs_epi16(w[g], broadcast_group(xb->q + Q8_GROUP * g)));
            isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(pairs, ones));
        }
    }
}

// The same with AVX-VNNI: u unsigned into vpdpbusd.
static inline __attribute__((always_inline)) AVX_VNNI void q5_block_sums_vnni(__m256i isum[MAX_ROWS_PER_PASS],
                                                                              const uint8_t *q, const Q8Block *x,
                                                                              int nb, const int n,
                                                                              const WeightType type) {
    __m256i w[GROUPS];
    q5_unpack(w, q, type);
    for (int t = 0; t < n; t++) {
        const Q8Block *xb = &x[(size_t)t * nb];
        isum[t] = _mm256_set1_epi32(sum_start(xb, type));
        for (int g = 0; g < GROUPS; g++)
            isum[t] = _mm256_dpbusd_avx_epi32(isum[t], w[g], broadcast_group(xb->q + Q8_GROUP * g));
    }
}

// Each type's matmul with plain AVX2 and with AVX-VNNI, and the walk's BlockSumsAvx2 for it.
#define Q5_MATMULS(name, TYPE)                                                                                        \
    static inline __attribute__((always_inline)) void name##_block_sums(__m256i isum[MAX_ROWS_PER_PASS],              \
                                                                        const uint8_t *q, const Q8Block *x, int nb,   \
                                                                        const int n) {                                \
        q5_block_sums(isum, q, x, nb, n, TYPE);                                                                       \
    }                                                                                                                 \
    static inline __attribute__((always_inline)) AVX_VNNI void name##_block_sums_vnni(                                \
        __m256i isum[MAX_ROWS_PER_PASS], const uint8_t *q, const Q8Block *x, int nb, const int n) {                   \
        q5_block_sums_vnni(isum, q, x, nb, n, TYPE);                                                                  \
    }                                                                                                                 \
    void name##_matmul_avx2(float *out, const Q8Block *x, const void *w, const float *bias, int T, int n_in,          \
                            int ld_out, int j0, int j1) {                                                             \
        walk_panels(out, x, w, bias, T, n_in, ld_out, j0, j1, q5_panel_bytes(TYPE, n_in), q5_block_bytes(TYPE),       \
                    TYPE, 8, false, name##_block_sums);                                                               \
    }                                                                                                                 \
    AVX_VNNI void name##_matmul_avxvnni(float *out, const Q8Block *x, const void *w, const float *bias, int T,         \
                                        int n_in, int ld_out, int j0, int j1) {                                       \
        walk_panels(out, x, w, bias, T, n_in, ld_out, j0, j1, q5_panel_bytes(TYPE, n_in), q5_block_bytes(TYPE),       \
                    TYPE, 8, false, name##_block_sums_vnni);                                                          \
    }

Q5_MATMULS(q5_0, WEIGHT_Q5_0)
Q5_MATMULS(q5_1, WEIGHT_Q5_1)
Q5_MATMULS(q4_1, WEIGHT_Q4_1)
