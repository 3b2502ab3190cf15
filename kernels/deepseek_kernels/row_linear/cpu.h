// Row-independent linear map (torch-free CPU kernel): y = x @ w.T with small_linear's order of float32 operations.
#pragma once
#include "../csrc/lanes.h"

/* The order of operations, per output y[t, j] (the reference, row_linear/reference.py, writes it out):
   for n >= 8 eight running sums s[0..7] from +0, column k < n8 = n - n % 8 adding the product x[t, k] * w[j, k]
   (rounded to float32, then added: no fused multiply-add) into s[k mod 8] in increasing k; then
   ((((+0 + s[0]) + s[1]) + ...) + s[7]); then the columns k >= n8 one by one, each product rounded then added.
   For n < 8 one running sum from +0 over every column. The weights are float32 or bfloat16 (each converted to
   float32 exactly, in registers, as it is read). Nothing in the order depends on T, on which rows share a call,
   on how outputs are split across threads, nor on the instruction set: the three paths below do the same
   operations on the same values (lanes of a vector are independent IEEE float32 operations), so they give the
   same bits, which the tests check by forcing each (row_linear_path). */

enum RowLinearPath { ROW_LINEAR_SCALAR = 0, ROW_LINEAR_AVX2 = 1, ROW_LINEAR_AVX512 = 2 };

/* The widest path this build compiles to native vectors (the default). */
static inline RowLinearPath row_linear_native_path() {
#if defined(__AVX512F__)
    return ROW_LINEAR_AVX512;
#elif defined(__AVX2__) || defined(__AVX__)
    return ROW_LINEAR_AVX2;
#else
    return ROW_LINEAR_SCALAR;
#endif
}

typedef uint16_t v8u16 __attribute__((vector_size(16)));
typedef uint32_t v8u32 __attribute__((vector_size(32)));

static inline float rl_scalar(const float *w, int64_t k) { return w[k]; }
static inline float rl_scalar(const uint16_t *w, int64_t k) {
    const uint32_t bits = (uint32_t)w[k] << 16;
    float f;
    memcpy(&f, &bits, sizeof(f));
    return f;
}

/* Eight consecutive weights as float32 lanes. */
static inline v8f rl_load8(const float *w) {
    v8f v;
    memcpy(&v, w, sizeof(v));
    return v;
}
static inline v8f rl_load8(const uint16_t *w) {
#if defined(__AVX2__)
    return (v8f)_mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)w)), 16));
#else
    v8u16 h;
    memcpy(&h, w, sizeof(h));
    return (v8f)(__builtin_convertvector(h, v8u32) << 16);
#endif
}

/* Eight weights of row a then eight of row b (at the same column) as sixteen float32 lanes. */
static inline v16f rl_load8x2(const float *a, const float *b) {
    return __builtin_shufflevector(rl_load8(a), rl_load8(b), 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
}
static inline v16f rl_load8x2(const uint16_t *a, const uint16_t *b) {
#if defined(__AVX512F__)
    const __m256i h = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)a)),
                                              _mm_loadu_si128((const __m128i *)b), 1);
    /* (the masked forms: GCC 12 warns about the _mm512_undefined inside the unmasked ones) */
    return (v16f)((v16i)_mm512_maskz_cvtepu16_epi32((__mmask16)0xFFFF, h) << 16);
#else
    return __builtin_shufflevector(rl_load8(a), rl_load8(b), 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
#endif
}

/* The columns k >= n8 and the lane sums of one output: ((+0 + s[0]) + ... + s[7]) then the tail products. */
template <typename Wt>
static inline float rl_finish(const float *s, const float *xr, const Wt *wr, int64_t n8, int64_t n) {
    float dot = 0.0f;
    if (n8)
        for (int l = 0; l < 8; l++) dot += s[l];
    for (int64_t k = n8; k < n; k++) dot += xr[k] * rl_scalar(wr, k);
    return dot;
}

/* One output of one row, scalar code (the definition). */
template <typename Wt>
static inline float rl_dot_scalar(const float *xr, const Wt *wr, int64_t n, int64_t n8) {
    float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int64_t k = 0; k < n8; k += 8)
        for (int l = 0; l < 8; l++) s[l] += xr[k + l] * rl_scalar(wr, k + l);
    return rl_finish(s, xr, wr, n8, n);
}

/* Outputs j0 .. j1 - 1 of rows 0 .. T - 1, scalar code. */
template <typename Wt>
static void rl_scalar_path(const float *x, int64_t T, int64_t n, int64_t xs, const Wt *w, int64_t j0, int64_t j1,
                           float *y, int64_t ys) {
    const int64_t n8 = n >= 8 ? n - n % 8 : 0;
    for (int64_t j = j0; j < j1; j++)
        for (int64_t t = 0; t < T; t++) y[t * ys + j] = rl_dot_scalar(x + t * xs, w + j * n, n, n8);
}

/* R rows times O outputs with eight-lane vectors: acc[r][o] holds s[0..7] of (row t + r, output j + o). */
template <typename Wt, int R, int O>
static inline void rl_tile8(const float *x, int64_t xs, const Wt *w, int64_t n, int64_t n8, int64_t t, int64_t j,
                            float *y, int64_t ys) {
    v8f acc[R][O];
    for (int r = 0; r < R; r++)
        for (int o = 0; o < O; o++) acc[r][o] = (v8f){0};
    for (int64_t k = 0; k < n8; k += 8) {
        v8f wv[O];
        for (int o = 0; o < O; o++) wv[o] = rl_load8(w + (j + o) * n + k);
        for (int r = 0; r < R; r++) {
            const v8f xv = rl_load8(x + (t + r) * xs + k);
            for (int o = 0; o < O; o++) acc[r][o] = acc[r][o] + xv * wv[o];
        }
    }
    for (int r = 0; r < R; r++)
        for (int o = 0; o < O; o++) {
            float s[8];
            memcpy(s, &acc[r][o], sizeof(s));
            y[(t + r) * ys + j + o] = rl_finish(s, x + (t + r) * xs, w + (j + o) * n, n8, n);
        }
}

/* Sixteen-lane vectors holding two outputs each: lanes 0-7 are s[0..7] of output j + 2p, lanes 8-15 those of
   output j + 2p + 1 (the row's eight columns are in both halves). The same sums as rl_tile8, two per register. */
template <typename Wt, int R, int P>
static inline void rl_tile16(const float *x, int64_t xs, const Wt *w, int64_t n, int64_t n8, int64_t t, int64_t j,
                             float *y, int64_t ys) {
    v16f acc[R][P];
    for (int r = 0; r < R; r++)
        for (int p = 0; p < P; p++) acc[r][p] = (v16f){0};
    for (int64_t k = 0; k < n8; k += 8) {
        v16f wv[P];
        for (int p = 0; p < P; p++) wv[p] = rl_load8x2(w + (j + 2 * p) * n + k, w + (j + 2 * p + 1) * n + k);
        for (int r = 0; r < R; r++) {
            const v8f x8 = rl_load8(x + (t + r) * xs + k);
            const v16f xv = __builtin_shufflevector(x8, x8, 0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7);
            for (int p = 0; p < P; p++) acc[r][p] = acc[r][p] + xv * wv[p];
        }
    }
    for (int r = 0; r < R; r++)
        for (int p = 0; p < P; p++) {
            float s[16];
            memcpy(s, &acc[r][p], sizeof(s));
            const float *xr = x + (t + r) * xs;
            y[(t + r) * ys + j + 2 * p] = rl_finish(s, xr, w + (j + 2 * p) * n, n8, n);
            y[(t + r) * ys + j + 2 * p + 1] = rl_finish(s + 8, xr, w + (j + 2 * p + 1) * n, n8, n);
        }
}

/* Rows of a block: tiles of RT rows, then the remaining rows one at a time (same sums). */
template <typename Wt, int RT, int O, bool WIDE>
static inline void rl_rows(const float *x, int64_t T, int64_t xs, const Wt *w, int64_t n, int64_t n8, int64_t j,
                           float *y, int64_t ys) {
    int64_t t = 0;
    if constexpr (WIDE) {
        for (; t + RT <= T; t += RT) rl_tile16<Wt, RT, O / 2>(x, xs, w, n, n8, t, j, y, ys);
        for (; t < T; t++) rl_tile16<Wt, 1, O / 2>(x, xs, w, n, n8, t, j, y, ys);
    } else {
        for (; t + RT <= T; t += RT) rl_tile8<Wt, RT, O>(x, xs, w, n, n8, t, j, y, ys);
        for (; t < T; t++) rl_tile8<Wt, 1, O>(x, xs, w, n, n8, t, j, y, ys);
    }
}

/* Outputs j0 .. j1 - 1 of rows 0 .. T - 1 with vectors (WIDE: sixteen lanes, two outputs per register; else eight
   lanes). Rows go in blocks whose x stays in the L2 cache while the block's output tiles pass over it. */
template <typename Wt, bool WIDE>
static void rl_vector_path(const float *x, int64_t T, int64_t n, int64_t xs, const Wt *w, int64_t j0, int64_t j1,
                           float *y, int64_t ys) {
    if (n < 8) return rl_scalar_path(x, T, n, xs, w, j0, j1, y, ys);
    const int64_t n8 = n - n % 8;
    constexpr int O = WIDE ? 8 : 4, RT = WIDE ? 3 : 2;
    const int64_t row_block = n * (int64_t)sizeof(float) * 64 <= (512 << 10) ? 64 : ((512 << 10) / (n * 4) + 1);
    for (int64_t t0 = 0; t0 < T; t0 += row_block) {
        const int64_t tb = T - t0 < row_block ? T - t0 : row_block;
        const float *xb = x + t0 * xs;
        float *yb = y + t0 * ys;
        int64_t j = j0;
        for (; j + O <= j1; j += O) rl_rows<Wt, RT, O, WIDE>(xb, tb, xs, w, n, n8, j, yb, ys);
        for (; j + 2 <= j1; j += 2) rl_rows<Wt, RT, 2, WIDE>(xb, tb, xs, w, n, n8, j, yb, ys);
        for (; j < j1; j++) rl_rows<Wt, RT, 1, false>(xb, tb, xs, w, n, n8, j, yb, ys);
    }
}

/* y[t, j] (row stride ys) for j in [j0, j1): x [T, n] (row stride xs), w [m, n] (float32 or bfloat16 bits) by
   `path`. Outputs are independent, so callers may split [0, m) across threads any way they like. */
template <typename Wt>
static inline void row_linear_range(RowLinearPath path, const float *x, int64_t T, int64_t n, int64_t xs, const Wt *w,
                                    int64_t j0, int64_t j1, float *y, int64_t ys) {
    if (path == ROW_LINEAR_AVX512) rl_vector_path<Wt, true>(x, T, n, xs, w, j0, j1, y, ys);
    else if (path == ROW_LINEAR_AVX2) rl_vector_path<Wt, false>(x, T, n, xs, w, j0, j1, y, ys);
    else rl_scalar_path(x, T, n, xs, w, j0, j1, y, ys);
}

/* One output: row_linear's sums for one row and one weight row (float32). */
static inline float row_linear_one(const float *xr, const float *wr, int64_t n) {
    return rl_dot_scalar(xr, wr, n, n >= 8 ? n - n % 8 : 0);
}

/* y[t, j] = x[t, :] . w[j, :] for x [T, n] (row stride xs), w [m, n], y [T, m], on the calling thread (the
   native path). Each output's sums read its row of x and of w only: the result of a row never depends on the
   others, nor on T. */
static inline void row_linear(const float *x, int64_t T, int64_t n, int64_t xs, const float *w, int64_t m, float *y) {
    row_linear_range(row_linear_native_path(), x, T, n, xs, w, 0, m, y, m);
}

// The op's entry point that other ops call (torch types; defined in cpu.cpp): decode_stack's products.
#include <ATen/ATen.h>

at::Tensor row_linear_cpu(const at::Tensor &x, const at::Tensor &weight);
