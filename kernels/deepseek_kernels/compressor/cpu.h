// Compressor pooling (torch-free CPU kernel): a softmax over the window axis of the gate, per channel, weights
// the window's KV rows.
#pragma once
#include <math.h>
#include <stdint.h>
#include <string.h>

/* kv, gate: [N, R, C]; out [N, C]: out[n, c] = sum_r kv[n, r, c] * softmax_r(gate[n, :, c])[r]. */
static inline void compress_pool(const float *kv, const float *gate, int64_t N, int64_t R, int64_t C, float *out,
                                 float *w) {
    for (int64_t n = 0; n < N; n++) {
        const float *kn = kv + n * R * C, *gn = gate + n * R * C;
        for (int64_t c = 0; c < C; c++) {
            float mx = -INFINITY;
            for (int64_t r = 0; r < R; r++) mx = gn[r * C + c] > mx ? gn[r * C + c] : mx;
            float s = 0.0f;
            for (int64_t r = 0; r < R; r++) {
                w[r] = expf(gn[r * C + c] - mx);
                s += w[r];
            }
            float acc = 0.0f;
            for (int64_t r = 0; r < R; r++) acc += kn[r * C + c] * (w[r] / s);
            out[n * C + c] = acc;
        }
    }
}

#if defined(__AVX512F__)
#include <immintrin.h>

/* expf of sixteen floats with the bits of glibc's expf (2.27 and later, its FMA build, the one that a machine with
   AVX-512 runs): x * 32 / ln 2 rounded to an integer k by the 1.5 * 2^52 shift (both through one fused
   multiply-add), r = x * 32 / ln 2 - k (fused), 2^(k / 32) from the 32-entry table of 2^(i / 32) with k / 32's
   integer part added to the exponent, the degree-3 polynomial in r in double precision with the same fused
   steps, rounded to float once. Lanes with |x| >= 88 or NaN take glibc's special cases: -inf gives 0, the others
   call expf itself. */
typedef float ef_v8f __attribute__((vector_size(32)));
typedef double ef_v8d __attribute__((vector_size(64)));
typedef int64_t ef_v8l __attribute__((vector_size(64)));
typedef uint32_t ef_v16u __attribute__((vector_size(64)));

static inline __m512 expf_glibc16(__m512 x) {
    static const uint64_t tab[32] = {
        0x3ff0000000000000, 0x3fefd9b0d3158574, 0x3fefb5586cf9890f, 0x3fef9301d0125b51, 0x3fef72b83c7d517b,
        0x3fef54873168b9aa, 0x3fef387a6e756238, 0x3fef1e9df51fdee1, 0x3fef06fe0a31b715, 0x3feef1a7373aa9cb,
        0x3feedea64c123422, 0x3feece086061892d, 0x3feebfdad5362a27, 0x3feeb42b569d4f82, 0x3feeab07dd485429,
        0x3feea47eb03a5585, 0x3feea09e667f3bcd, 0x3fee9f75e8ec5f74, 0x3feea11473eb0187, 0x3feea589994cce13,
        0x3feeace5422aa0db, 0x3feeb737b0cdc5e5, 0x3feec49182a3f090, 0x3feed503b23e255d, 0x3feee89f995ad3ad,
        0x3feeff76f2fb5e47, 0x3fef199bdd85529c, 0x3fef3720dcef9069, 0x3fef5818dcfba487, 0x3fef7c97337b9b5f,
        0x3fefa4afa2a490da, 0x3fefd0765b6e4540};
    const __m512i t0 = _mm512_loadu_si512(tab), t1 = _mm512_loadu_si512(tab + 8);
    const __m512i t2 = _mm512_loadu_si512(tab + 16), t3 = _mm512_loadu_si512(tab + 24);
    const __m512d inv_ln2n = _mm512_set1_pd(0x1.71547652b82fep+5), shift = _mm512_set1_pd(0x1.8p52);
    const __m512d c0 = _mm512_set1_pd(0x1.c6af84b912394p-20), c1 = _mm512_set1_pd(0x1.ebfce50fac4f3p-13);
    const __m512d c2 = _mm512_set1_pd(0x1.62e42ff0c52d6p-6), one = _mm512_set1_pd(1.0);
    /* generic vector conversions and shifts (the intrinsics' undefined pass-through operands draw warnings) */
    float xs[16], ys[16];
    memcpy(xs, &x, sizeof(xs));
    for (int h = 0; h < 2; h++) {
        ef_v8f xh;
        memcpy(&xh, xs + 8 * h, sizeof(xh));
        const __m512d xd = (__m512d)__builtin_convertvector(xh, ef_v8d);
        const __m512d kds = _mm512_fmadd_pd(inv_ln2n, xd, shift);
        const ef_v8l ki = (ef_v8l)kds;
        const __m512d kd = (__m512d)((ef_v8d)kds - (ef_v8d)shift);
        const __m512d r = _mm512_fmsub_pd(inv_ln2n, xd, kd);
        const __m512i lo = _mm512_permutex2var_epi64(t0, (__m512i)ki, t1);
        const __m512i hi = _mm512_permutex2var_epi64(t2, (__m512i)ki, t3);
        const __m512i t = _mm512_mask_blend_epi64(_mm512_test_epi64_mask((__m512i)ki, _mm512_set1_epi64(16)), lo, hi);
        const ef_v8d s = (ef_v8d)((ef_v8l)t + (ki << 47));
        const __m512d z = _mm512_fmadd_pd(r, c0, c1);
        const __m512d r2 = (__m512d)((ef_v8d)r * (ef_v8d)r);
        __m512d y = _mm512_fmadd_pd(r, c2, one);
        y = _mm512_fmadd_pd(z, r2, y);
        const ef_v8f yf = __builtin_convertvector((ef_v8d)y * s, ef_v8f);
        memcpy(ys + 8 * h, &yf, sizeof(yf));
    }
    __m512 out;
    memcpy(&out, ys, sizeof(out));
    const ef_v16u top = ((ef_v16u)x >> 20) & 0x7ffu;
    const __mmask16 special = _mm512_cmpge_epu32_mask((__m512i)top, _mm512_set1_epi32(0x42b));
    if (special) {
        const __mmask16 neg_inf = _mm512_cmpeq_epi32_mask((__m512i)x, _mm512_set1_epi32((int)0xff800000u));
        const unsigned rest = special & ~neg_inf;
        for (int l = 0; l < 16; l++) {
            if (neg_inf >> l & 1) ys[l] = 0.0f;
            else if (rest >> l & 1) ys[l] = expf(xs[l]);
        }
        memcpy(&out, ys, sizeof(out));
    }
    return out;
}

/* Whether this process's expf has the bits expf_glibc16 copies (glibc 2.27 or later on a CPU with FMA; all 2^32
   inputs were compared on the build machine), probed once on 4096 inputs spread over every exponent of
   [-104, 0] (the range the pooling uses) and the edges of the special cases; where it does not, the pooling
   calls expf one lane at a time, as before. */
static inline bool expf_glibc16_matches_expf() {
    static const bool ok = [] {
        float xs[16 * 257];
        uint32_t state = 12345u;
        for (int i = 0; i < 16 * 256; i++) {
            state = state * 1664525u + 1013904223u;
            const uint32_t bits = 0x80000000u + state % 0x42D00000u;  /* -0 .. -104 */
            memcpy(&xs[i], &bits, sizeof(float));
        }
        const float edges[16] = {0.0f, -0.0f, -87.33f, -88.0f, -88.72f, -103.27f, -103.28f, -103.97f, -103.98f,
                                 -1e30f, -INFINITY, INFINITY, NAN, 88.0f, 1e-30f, -1e-30f};
        memcpy(xs + 16 * 256, edges, sizeof(edges));
        for (int i = 0; i < 16 * 257; i += 16) {
            float ys[16];
            _mm512_storeu_ps(ys, expf_glibc16(_mm512_loadu_ps(xs + i)));
            for (int l = 0; l < 16; l++) {
                const float want = expf(xs[i + l]);
                if (memcmp(&want, &ys[l], sizeof(float)) != 0) return false;
            }
        }
        return true;
    }();
    return ok;
}

/* expf of sixteen floats: expf_glibc16 where it has expf's bits, else expf lane by lane. */
static inline __m512 expf16(__m512 x, bool lanes_match) {
    if (lanes_match) return expf_glibc16(x);
    float v[16];
    _mm512_storeu_ps(v, x);
    for (int l = 0; l < 16; l++) v[l] = expf(v[l]);
    return _mm512_loadu_ps(v);
}
#endif

// The op's entry points that other ops call (torch types; defined in cpu.cpp). decode_stack composes them,
// so each is declared here, where its op lives, not found by the order of the translation unit.
#include <ATen/ATen.h>
#include <optional>
#include <tuple>
#include <vector>

void compress_windows_cpu(at::Tensor entry_pool, const at::Tensor &kv_pool, const at::Tensor &gate_pool,
                                 const at::Tensor &ape, const at::Tensor &window_slots, const at::Tensor &prior_slots,
                                 const at::Tensor &has_prior, bool overlap, const at::Tensor &norm_weight, double eps,
                                 const at::Tensor &c, const at::Tensor &s, const at::Tensor &out_slots);
