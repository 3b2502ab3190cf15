// Dequantisation of DeepSeek checkpoint formats (torch-free CPU kernels): e4m3 FP8 with block scales and
// MXFP4 (packed e2m1 pairs, one e8m0 exponent per 32 inputs).
#pragma once
#include <math.h>
#include <stdint.h>

/* e4m3fn byte -> float: 1 sign, 4 exponent (bias 7), 3 mantissa bits; 0x7f / 0xff are NaN, no infinities. */
static inline float e4m3_to_float(uint8_t b) {
    const int sign = b >> 7, exp = (b >> 3) & 0xF, man = b & 7;
    float v;
    if (exp == 0xF && man == 7) return NAN;
    if (exp == 0) v = ldexpf((float)man, -9); /* subnormal: man / 8 * 2^-6 */
    else v = ldexpf(1.0f + (float)man / 8.0f, exp - 7);
    return sign ? -v : v;
}

/* e8m0 exponent byte -> 2^(e - 127); 255 is NaN. */
static inline float e8m0_to_float(uint8_t e) { return e == 255 ? NAN : ldexpf(1.0f, (int)e - 127); }

/* out[i, j] = w[i, j] * scale[i / bo, j / bi] for w [O, I] (e4m3 bytes), scale [ceil(O/bo), ceil(I/bi)]. */
static inline void dequant_fp8_blocks(const uint8_t *w, int64_t O, int64_t I, const float *scale, int64_t bo,
                                      int64_t bi, float *out) {
    float lut[256];
    for (int v = 0; v < 256; v++) lut[v] = e4m3_to_float((uint8_t)v);
    const int64_t sc = (I + bi - 1) / bi;
    for (int64_t i = 0; i < O; i++) {
        const float *srow = scale + (i / bo) * sc;
        for (int64_t j = 0; j < I; j++) out[i * I + j] = lut[w[i * I + j]] * srow[j / bi];
    }
}

/* MXFP4: packed [O, I / 2] bytes (low nibble = even input), scale [O, I / 32] e8m0 bytes -> out [O, I]. */
static inline void dequant_mxfp4(const uint8_t *packed, int64_t O, int64_t I, const uint8_t *scale, float *out) {
    static const float e2m1[16] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,
                                   -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
    const int64_t half = I / 2, groups = I / 32;
    for (int64_t i = 0; i < O; i++) {
        for (int64_t g = 0; g < groups; g++) {
            const float s = e8m0_to_float(scale[i * groups + g]);
            for (int64_t k = 0; k < 16; k++) {
                const uint8_t b = packed[i * half + g * 16 + k];
                out[i * I + g * 32 + 2 * k] = e2m1[b & 0xF] * s;
                out[i * I + g * 32 + 2 * k + 1] = e2m1[b >> 4] * s;
            }
        }
    }
}
