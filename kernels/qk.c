// qk.c — dequantizing GGUF's quantized blocks (qk.h has the layouts), written from the formats' definitions.
#include "qk.h"

#include <stdlib.h>

#include "kernels.h"

static float half(const uint8_t *p) { return f16_to_f32((uint16_t)(p[0] | p[1] << 8)); }

// Q8_0: w = d·q.
static void q8_0_block(float *out, const uint8_t *b) {
    const float d = half(b);
    for (int j = 0; j < 32; j++) out[j] = d * (float)(int8_t)b[2 + j];
}

// Q4_0: w = d·(nibble − 8), low nibbles the first 16 weights.
static void q4_0_block(float *out, const uint8_t *b) {
    const float d = half(b);
    for (int j = 0; j < 16; j++) {
        out[j] = d * (float)((b[2 + j] & 0xF) - 8);
        out[j + 16] = d * (float)((b[2 + j] >> 4) - 8);
    }
}

// The 6-bit scale and min of sub-block s (of 8) from a K-block's 12 bytes: s < 4 in the low 6 bits of bytes s and
// s + 4; s ≥ 4 in the nibbles of byte s + 4, their top 2 bits in the top bits of bytes s − 4 (scale) and s (min).
static void scale_min(const uint8_t *scales, int s, int *scale, int *min) {
    if (s < 4) {
        *scale = scales[s] & 63;
        *min = scales[s + 4] & 63;
    } else {
        *scale = (scales[s + 4] & 0xF) | (scales[s - 4] >> 6) << 4;
        *min = (scales[s + 4] >> 4) | (scales[s] >> 6) << 4;
    }
}

// Q4_K (qh NULL) and Q5_K: sub-block s of 32 weights, w = (d·scale_s)·q − dmin·min_s.
static void k_block(float *out, const uint8_t *b, const uint8_t *qh, const uint8_t *qs) {
    const float d = half(b), dmin = half(b + 2);
    for (int s = 0; s < 8; s++) {
        int scale, min;
        scale_min(b + 4, s, &scale, &min);
        const float ds = d * (float)scale, ms = dmin * (float)min;
        const uint8_t *q = qs + 32 * (s / 2);
        for (int l = 0; l < 32; l++) {
            int v = s % 2 ? q[l] >> 4 : q[l] & 0xF;
            if (qh) v += (qh[l] >> s & 1) << 4;
            out[32 * s + l] = ds * (float)v - ms;
        }
    }
}

// Q6_K: w = (d·scale)·(q − 32), per half of 128 weights as qk.h lays it out.
static void q6_k_block(float *out, const uint8_t *b) {
    const uint8_t *ql = b, *qh = b + 128;
    const int8_t *sc = (const int8_t *)(b + 192);
    const float d = half(b + 208);
    for (int h = 0; h < 2; h++, out += 128, ql += 64, qh += 32, sc += 8)
        for (int l = 0; l < 32; l++) {
            const int q[4] = {(ql[l] & 0xF) | (qh[l] & 3) << 4, (ql[l + 32] & 0xF) | (qh[l] >> 2 & 3) << 4,
                              (ql[l] >> 4) | (qh[l] >> 4 & 3) << 4, (ql[l + 32] >> 4) | (qh[l] >> 6 & 3) << 4};
            for (int k = 0; k < 4; k++) out[32 * k + l] = d * (float)sc[l / 16 + 2 * k] * (float)(q[k] - 32);
        }
}

int qk_reads(uint32_t type) {
    return type == GGML_Q8_0 || type == GGML_Q4_0 || type == GGML_Q4_K || type == GGML_Q5_K || type == GGML_Q6_K;
}

size_t qk_row_bytes(uint32_t type, size_t n) {
    switch (type) {
    case GGML_Q8_0: return n / 32 * 34;
    case GGML_Q4_0: return n / 32 * 18;
    case GGML_Q4_K: return n / 256 * 144;
    case GGML_Q5_K: return n / 256 * 176;
    case GGML_Q6_K: return n / 256 * 210;
    }
    abort();
}

void qk_dequantize_row(float *out, const uint8_t *blocks, uint32_t type, size_t n) {
    switch (type) {
    case GGML_Q8_0:
        for (size_t i = 0; i < n / 32; i++) q8_0_block(out + 32 * i, blocks + 34 * i);
        return;
    case GGML_Q4_0:
        for (size_t i = 0; i < n / 32; i++) q4_0_block(out + 32 * i, blocks + 18 * i);
        return;
    case GGML_Q4_K:
        for (size_t i = 0; i < n / 256; i++) k_block(out + 256 * i, blocks + 144 * i, NULL, blocks + 144 * i + 16);
        return;
    case GGML_Q5_K:
        for (size_t i = 0; i < n / 256; i++)
            k_block(out + 256 * i, blocks + 176 * i, blocks + 176 * i + 16, blocks + 176 * i + 48);
        return;
    case GGML_Q6_K:
        for (size_t i = 0; i < n / 256; i++) q6_k_block(out + 256 * i, blocks + 210 * i);
        return;
    }
    abort();  // a caller that did not check qk_reads
}
