// qk.h — GGUF's quantized blocks (ggml's formats, as llama.cpp writes them): their layouts and the scalar
// dequantization that is their definition. A row of n weights is n / block blocks of bytes each; every scale is an
// IEEE half.
//
//   Q8_0  (32 weights, 34 bytes)   d; q[32] int8                          w = d·q
//   Q4_0  (32 weights, 18 bytes)   d; qs[16]: weight j in the low nibble of qs[j], weight j + 16 in the high one
//                                  w = d·(nibble − 8)
//   Q4_1  (32 weights, 20 bytes)   d, m; qs[16] as Q4_0's                 w = d·nibble + m
//   Q5_0  (32 weights, 22 bytes)   d; qh[4]: a u32 whose bit j is weight j's fifth bit; qs[16] as Q4_0's low 4 bits
//                                  w = d·(q − 16), q = nibble | bit << 4 ∈ [0, 31]
//   Q5_1  (32 weights, 24 bytes)   d, m; qh[4], qs[16] as Q5_0's         w = d·q + m
//   Q4_K  (256 weights, 144 bytes) d, dmin; scales[12]: 8 pairs (scale, min) of 6 bits; qs[128]: 4-bit quants.
//                                  Sub-block s of 32 weights: w = (d·scale_s)·q − dmin·min_s; sub-blocks 2i and
//                                  2i + 1 share qs[32i .. 32i + 32), low nibbles then high ones.
//   Q5_K  (256 weights, 176 bytes) as Q4_K, with qh[32] holding each quant's fifth bit: bit s of qh[l] for weight
//                                  l of sub-block s.
//   Q6_K  (256 weights, 210 bytes) ql[128] low 4 bits, qh[64] high 2 bits, scales[16] int8 (one per 16 weights), d.
//                                  w = d·scale·(q − 32), q of 6 bits; in each half of 128 weights, l < 32, the
//                                  weights l, l + 32, l + 64, l + 96 take the low nibble of ql[l], of ql[l + 32], the
//                                  high nibble of ql[l], of ql[l + 32], and bits 0–1, 2–3, 4–5, 6–7 of qh[l].
//
// The products are rounded as llama.cpp's dequantize_row_* round them (a scale times a scale first, then the quant;
// the min subtracted last; Q4_1 and Q5_1: d·q, then + m, two roundings), so that the floats are the ones it computes.
#ifndef SPECDEC_QK_H
#define SPECDEC_QK_H

#include <stddef.h>
#include <stdint.h>

// The ggml tensor types specdec reads (their numbers in GGUF files).
enum {
    GGML_F32 = 0, GGML_F16 = 1, GGML_Q4_0 = 2, GGML_Q4_1 = 3, GGML_Q5_0 = 6, GGML_Q5_1 = 7, GGML_Q8_0 = 8,
    GGML_Q4_K = 12, GGML_Q5_K = 13, GGML_Q6_K = 14, GGML_BF16 = 30,
};

// out [n] = the n weights (a whole number of `type`'s blocks) at blocks. type: one qk_reads (another is a caller's
// error: aborts).
void qk_dequantize_row(float *out, const uint8_t *blocks, uint32_t type, size_t n);

// Whether qk_dequantize_row reads `type`.
int qk_reads(uint32_t type);

// Bytes of a row of n weights (a whole number of blocks) of a type qk_reads.
size_t qk_row_bytes(uint32_t type, size_t n);

#endif
