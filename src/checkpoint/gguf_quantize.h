// gguf_quantize.h — floats into GGUF's quantized blocks (qk.h's layouts), by the same arithmetic as ggml's reference
// quantizers (ggml-quants.c's quantize_row_*_ref, which llama-quantize runs when it has no importance matrix), so
// that `specdec convert` writes the bytes llama-quantize writes: each step below is a float operation in the
// order ggml's reference makes it, with no fused multiply-add (this file is compiled without -mfma, and -std=c11
// keeps the compiler from contracting).
//
//   Q8_0  d = amax/127; q = round(x/d) (halves away from zero)
//   Q4_0  d = max/−8 where max is the value of largest magnitude; q = min(15, trunc(x/d + 8.5))
//   Q5_0  d = max/−16 likewise; q = min(31, trunc(x/d + 16.5))
//   Q5_1  m = min(x), d = (max(x) − m)/31; q = trunc((x − m)/d + 0.5)
//   Q6_K  per 16 weights a scale by make_qx_quants (RMSE-weighted search of 19 trial scales around −32/max, weights
//         x²); the 16 scales as int8 times d = max_scale/−128; then q = clamp(round(x/(d·scale)), −32, 31) + 32
//   Q4_K  per 32 weights a scale and a min by make_qkx2_quants (weights √mean(x²) + |x|, 21 trial scales, least
//         squares for scale and min), both as 6 bits times d = max_scale/63 and dmin = max_min/63; then
//         q = clamp(round((x + dmin·min)/(d·scale)), 0, 15)
//   Q5_K  as Q4_K with codes 0..31 (16 trial scales, from (31 − 0.5)/range up by 0.1/range)
// ("round" in the K-quants is to nearest, ties to even, as ggml's nearest_int.)
#ifndef SPECDEC_GGUF_QUANTIZE_H
#define SPECDEC_GGUF_QUANTIZE_H

#include <stddef.h>
#include <stdint.h>

// F32 to IEEE half, rounded to nearest, ties to even (overflow to ±inf; a NaN stays a NaN).
uint16_t f32_to_f16(float x);

// Whether gguf_quantize_row writes `type` (GGML_Q8_0, GGML_Q4_0, GGML_Q5_0, GGML_Q5_1, GGML_Q4_K, GGML_Q5_K,
// GGML_Q6_K).
int gguf_quantizes(uint32_t type);

// out [qk_row_bytes(type, n)] = the blocks of x [n], n a whole number of the type's blocks, every x finite.
void gguf_quantize_row(uint8_t *out, const float *x, uint32_t type, size_t n);

#endif
