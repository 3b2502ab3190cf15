// Row-independent linear map (torch-free CPU kernel): y = x @ w.T with small_linear's order of float32 operations.
#pragma once
#include "../csrc/lanes.h"

/* One output: for n >= 8 eight running sums over the 8-column chunks (lane l takes columns l, 8 + l, ...), added
   up in lane order onto 0, then the tail columns one by one; for n < 8 one running sum from 0 (small_linear's
   scalar path). */
static inline float row_linear_one(const float *xr, const float *wr, int64_t n) {
    float dot = 0.0f;
    int64_t k = 0;
    if (n >= 8) {
        v8f acc = {0};
        for (; k + 8 <= n; k += 8) {
            v8f a, c;
            memcpy(&a, xr + k, sizeof(a));
            memcpy(&c, wr + k, sizeof(c));
            acc = acc + a * c;
        }
        for (int l = 0; l < 8; l++) dot += acc[l];
    }
    for (; k < n; k++) dot += xr[k] * wr[k];
    return dot;
}

/* y[t, j] = x[t, :] . w[j, :] for x [T, n] (row stride xs), w [m, n], y [T, m]. Blocks of eight outputs are the
   outer loop, so their weight rows stay in L1 while every token passes; with AVX and n a multiple of eight the
   eight dots of a block come out of lane_sums8 (the same sums in the same order). Each output's sums read its row
   of x and of w only: the result of a row never depends on the others, nor on T. */
static inline void row_linear(const float *x, int64_t T, int64_t n, int64_t xs, const float *w, int64_t m, float *y) {
    int64_t j = 0;
#if defined(__AVX__)
    if ((n & 7) == 0 && n >= 8) {
        for (; j + 8 <= m; j += 8) {
            const float *wj = w + j * n;
            for (int64_t t = 0; t < T; t++) {
                const float *xr = x + t * xs;
                v8f acc[8];
                for (int jj = 0; jj < 8; jj++) acc[jj] = (v8f){0};
                for (int64_t k = 0; k < n; k += 8) {
                    v8f a;
                    memcpy(&a, xr + k, sizeof(a));
                    for (int jj = 0; jj < 8; jj++) {
                        v8f c;
                        memcpy(&c, wj + jj * n + k, sizeof(c));
                        acc[jj] = acc[jj] + a * c;
                    }
                }
                v8f dots = (v8f)lane_sums8(acc);
                memcpy(y + t * m + j, &dots, sizeof(dots));
            }
        }
    }
#endif
    for (; j < m; j++) {
        const float *wr = w + j * n;
        for (int64_t t = 0; t < T; t++) y[t * m + j] = row_linear_one(x + t * xs, wr, n);
    }
}
