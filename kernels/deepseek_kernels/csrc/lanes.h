// Eight-lane float helpers shared by the CPU kernels (GCC vector extensions; torch-free).
#pragma once
#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(__AVX__)
#include <immintrin.h>
#endif

typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));

/* Sixteen-lane vectors pass by value between static inline helpers only (no ABI boundary), so GCC's note that
   their calling convention differs without AVX-512 does not apply. */
#pragma GCC diagnostic ignored "-Wpsabi"
typedef float v16f __attribute__((vector_size(64)));
typedef int32_t v16i __attribute__((vector_size(64)));

/* exp of a vector of floats (F: float lanes, I: the int32 lanes of the same width): range reduction by ln 2
   (split in two parts) and a degree-7 polynomial, within about two float32 ulps of the exact value; 0 below
   -87.33 (where expf would give a subnormal). Every operation is lane-wise, so every width (vexp16, vexp8, sexp:
   one lane) gives the same bits for the same input. */
template <typename F, typename I>
static inline F vexp_lanes(F x) {
    const F hi = (F){0} + 88.3762626647949f, lo = (F){0} - 87.3365447505531f;
    const I under = x < lo, over = x > hi;
    x = (F)(((I)x & ~over) | ((I)hi & over));
    x = (F)(((I)x & ~under) | ((I)lo & under));
    const F fx = x * 1.44269504088896341f + 0.5f;
    F tf = __builtin_convertvector(__builtin_convertvector(fx, I), F);
    tf = tf + __builtin_convertvector(tf > fx, F); /* floor: -1 where truncation went up */
    const I ti = __builtin_convertvector(tf, I);
    x = x - tf * 0.693359375f;
    x = x - tf * -2.12194440e-4f;
    const F z = x * x;
    F y = (F){0} + 1.9875691500E-4f;
    y = y * x + 1.3981999507E-3f;
    y = y * x + 8.3334519073E-3f;
    y = y * x + 4.1665795894E-2f;
    y = y * x + 1.6666665459E-1f;
    y = y * x + 5.0000001201E-1f;
    y = y * z + x + 1.0f;
    y = y * (F)((ti + 127) << 23);
    return (F)((I)y & ~under);
}

static inline v8f vexp8(v8f x) { return vexp_lanes<v8f, v8i>(x); }
static inline v16f vexp16(v16f x) { return vexp_lanes<v16f, v16i>(x); }

static inline float sexp(float x) { return vexp8((v8f){0} + x)[0]; }

/* Dot product of two [D] rows: eight partial sums added up in lane order when D is a multiple of
   8, else one running sum (the summation orders the attention kernels share). */
static inline float dot_row(const float *a, const float *b, int64_t D) {
    float s = 0.0f;
    if ((D & 7) != 0) {
        for (int64_t d = 0; d < D; d++) s += a[d] * b[d];
        return s;
    }
    v8f acc = {0};
    for (int64_t d = 0; d < D; d += 8) {
        v8f x, y;
        memcpy(&x, a + d, sizeof(x));
        memcpy(&y, b + d, sizeof(y));
        acc = acc + x * y;
    }
    for (int l = 0; l < 8; l++) s += acc[l];
    return s;
}

/* out = exp(x) through vexp16 (sixteen at a time), vexp8 and sexp (the rest): the same bits per element whatever
   the position; out may be x. Exposed for tests. */
static inline void exp_lanes(const float *x, int64_t n, float *out) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        v16f v;
        memcpy(&v, x + i, sizeof(v));
        v = vexp16(v);
        memcpy(out + i, &v, sizeof(v));
    }
    for (; i + 8 <= n; i += 8) {
        v8f v;
        memcpy(&v, x + i, sizeof(v));
        v = vexp8(v);
        memcpy(out + i, &v, sizeof(v));
    }
    for (; i < n; i++) out[i] = sexp(x[i]);
}

static inline v8f fma8(v8f a, v8f b, v8f c) {
#if defined(__FMA__)
    return (v8f)_mm256_fmadd_ps((__m256)a, (__m256)b, (__m256)c);
#else
    return a * b + c;
#endif
}

static inline v8f bc(float x) { return (v8f){x, x, x, x, x, x, x, x}; }

#if defined(__AVX__)
/* dots[j] = ((0 + a[j][0]) + a[j][1]) + ... + a[j][7] for eight vectors at once (the scalar lane order). */
static inline __m256 lane_sums8(const v8f *a) {
    __m256 r0 = (__m256)a[0], r1 = (__m256)a[1], r2 = (__m256)a[2], r3 = (__m256)a[3];
    __m256 r4 = (__m256)a[4], r5 = (__m256)a[5], r6 = (__m256)a[6], r7 = (__m256)a[7];
    __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
    __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
    __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
    __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
    __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    /* column l of the 8x8 matrix (lane j = a[j][l]) */
    __m256 c0 = _mm256_permute2f128_ps(u0, u4, 0x20), c1 = _mm256_permute2f128_ps(u1, u5, 0x20);
    __m256 c2 = _mm256_permute2f128_ps(u2, u6, 0x20), c3 = _mm256_permute2f128_ps(u3, u7, 0x20);
    __m256 c4 = _mm256_permute2f128_ps(u0, u4, 0x31), c5 = _mm256_permute2f128_ps(u1, u5, 0x31);
    __m256 c6 = _mm256_permute2f128_ps(u2, u6, 0x31), c7 = _mm256_permute2f128_ps(u3, u7, 0x31);
    __m256 s = _mm256_add_ps(_mm256_setzero_ps(), c0);
    s = _mm256_add_ps(s, c1); s = _mm256_add_ps(s, c2); s = _mm256_add_ps(s, c3);
    s = _mm256_add_ps(s, c4); s = _mm256_add_ps(s, c5); s = _mm256_add_ps(s, c6); s = _mm256_add_ps(s, c7);
    return s;
}
#endif

/* y[t, j] = x[t, :] . w[j, :] for x [T, n] (row stride xs), w [m, n]; eight-lane partial sums added in lane
   order (eight outputs at a time through lane_sums8 when n is a multiple of 8: the same sums). */
static inline void small_linear(const float *x, int64_t T, int64_t n, int64_t xs, const float *w, int64_t m, float *y) {
    for (int64_t t = 0; t < T; t++) {
        const float *xr = x + t * xs;
        int64_t j = 0;
#if defined(__AVX__)
        if ((n & 7) == 0) {
            for (; j + 8 <= m; j += 8) {
                v8f acc[8];
                for (int jj = 0; jj < 8; jj++) acc[jj] = (v8f){0};
                for (int64_t k = 0; k < n; k += 8) {
                    v8f a;
                    memcpy(&a, xr + k, sizeof(a));
                    for (int jj = 0; jj < 8; jj++) {
                        v8f c;
                        memcpy(&c, w + (j + jj) * n + k, sizeof(c));
                        acc[jj] = acc[jj] + a * c;
                    }
                }
                v8f dots = (v8f)lane_sums8(acc);
                memcpy(y + t * m + j, &dots, sizeof(dots));
            }
        }
#endif
        for (; j < m; j++) {
            const float *wr = w + j * n;
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
            y[t * m + j] = dot;
        }
    }
}
