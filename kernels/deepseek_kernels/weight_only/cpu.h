// Weight-only low-precision GEMV / small-M GEMM on the CPU: y[m, n] = sum_k x[m, k] * dequant(W)[n, k].
//
// The weights stay in their stored format (bf16, int8 with a float scale per block, FP8 e4m3 with a float scale
// per block, MXFP4 e2m1 pairs with an e8m0 scale per 32 inputs) and are decoded eight at a time in registers:
// each weight is decoded to float32 and multiplied by its block's scale, one float32 multiplication, so every
// dequantised weight has the bits of the reference's dequantised matrix (`reference.py`); the dot products then
// sum in a different order than the reference's float32 matrix product (eight lanes, then the lanes added in
// order), the only difference (bounded in `__init__.py`, tested in tests/kernels/test_weight_only.py).
//
// Memory-bound by design: each weight byte is read once per call whatever the number of rows M of x (rows are
// processed in tiles against the decoded weights, which stay in registers), and threads split the output rows
// (at::parallel_for).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>
#if defined(__AVX__) && defined(__FMA__)
#include <immintrin.h>
#define DK_WO_AVX 1
#endif

namespace dk_wo {

enum Fmt : int64_t { BF16 = 0, INT8 = 1, FP8 = 2, MXFP4 = 3, F32 = 4 };  // F32: decoded panels (internal)

// Bytes of one weight row of `k` values (MXFP4: two values per byte).
inline int64_t row_bytes(int64_t fmt, int64_t k) {
    return fmt == F32 ? 4 * k : fmt == BF16 ? 2 * k : fmt == MXFP4 ? k / 2 : k;
}

inline float bits_float(uint32_t b) {
    float f;
    std::memcpy(&f, &b, 4);
    return f;
}

// e8m0 exponent -> 2^(e - 127) (e = 255: NaN; e = 0: 2^-127, a subnormal).
inline float e8m0(uint8_t e) {
    return e == 255 ? bits_float(0x7FC00000u) : e == 0 ? bits_float(0x00400000u) : bits_float(uint32_t(e) << 23);
}

// e4m3 (fn) bits -> float (exact; the NaN codes 0x7F / 0xFF are refused when the weights are packed).
inline float e4m3(uint8_t b) {
    const float mag = bits_float(uint32_t(b & 0x7F) << 20) * 0x1p120f;
    return (b & 0x80) ? -mag : mag;
}

inline float e2m1(uint8_t code) {
    static const float values[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                     -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
    return values[code & 15];
}

// One weight of a row, unscaled.
inline float decode_one(int64_t fmt, const uint8_t *row, int64_t k) {
    switch (fmt) {
        case BF16: {
            uint16_t h;
            std::memcpy(&h, row + 2 * k, 2);
            return bits_float(uint32_t(h) << 16);
        }
        case INT8: return float(int8_t(row[k]));
        case FP8: return e4m3(row[k]);
        case F32: {
            float f;
            std::memcpy(&f, row + 4 * k, 4);
            return f;
        }
        default: return e2m1((row[k >> 1] >> ((k & 1) * 4)) & 15);
    }
}

// The scales of one weight row: float scales of the row's block row, or its e8m0 exponents (MXFP4).
struct RowScale {
    const float *f = nullptr;    // [ceil(K / block_cols)] (INT8 / FP8), or null (BF16)
    const uint8_t *e = nullptr;  // [K / 32] (MXFP4)
    int64_t block_cols = 1;
    float at(int64_t k) const { return e ? e8m0(e[k >> 5]) : f ? f[k / block_cols] : 1.0f; }
};

// Lookup tables: e4m3 byte -> float; MXFP4 byte -> its two values (low nibble first).
struct Tables {
    float fp8[256];
    float fp4[256][2];
    Tables() {
        for (int b = 0; b < 256; b++) {
            fp8[b] = e4m3(uint8_t(b));
            fp4[b][0] = e2m1(uint8_t(b & 15));
            fp4[b][1] = e2m1(uint8_t(b >> 4));
        }
    }
};
inline const Tables &tables() {
    static const Tables t;
    return t;
}

// Eight consecutive weights [k, k + 8) of a row, decoded (unscaled) into `out`.
inline void decode8(int64_t fmt, const uint8_t *row, int64_t k, float *out) {
    switch (fmt) {
        case BF16: {
            uint16_t h[8];
            std::memcpy(h, row + 2 * k, 16);
            for (int j = 0; j < 8; j++) out[j] = bits_float(uint32_t(h[j]) << 16);
            return;
        }
        case INT8:
            for (int j = 0; j < 8; j++) out[j] = float(int8_t(row[k + j]));
            return;
        case F32:
            std::memcpy(out, row + 4 * k, 32);
            return;
        case FP8: {
            const float *t = tables().fp8;
            for (int j = 0; j < 8; j++) out[j] = t[row[k + j]];
            return;
        }
        default: {
            const auto &t = tables().fp4;
            for (int j = 0; j < 4; j++) std::memcpy(out + 2 * j, t[row[(k >> 1) + j]], 8);
        }
    }
}

#ifdef __AVX2__
// The same eight weights decoded in registers (AVX2 integer instructions), scaled by `scale`.
inline __m256 decode8v(int64_t fmt, const uint8_t *row, int64_t k, float scale) {
    __m256 v;
    switch (fmt) {
        case BF16:
            v = _mm256_castsi256_ps(
                _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(row + 2 * k))), 16));
            break;
        case INT8:
            v = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(row + k))));
            break;
        case F32: return _mm256_loadu_ps((const float *)row + k);
        case FP8: {
            const __m256i b = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(row + k)));
            const __m256i mag = _mm256_slli_epi32(_mm256_and_si256(b, _mm256_set1_epi32(0x7F)), 20);
            const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(b, _mm256_set1_epi32(0x80)), 24);
            v = _mm256_mul_ps(_mm256_castsi256_ps(mag), _mm256_set1_ps(0x1p120f));
            v = _mm256_or_ps(v, _mm256_castsi256_ps(sign));
            break;
        }
        default: {
            int32_t four;
            std::memcpy(&four, row + (k >> 1), 4);
            const __m128i bytes = _mm_shuffle_epi8(_mm_cvtsi32_si128(four),
                                                   _mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, -1, -1, -1, -1, -1, -1, -1, -1));
            const __m256i codes = _mm256_and_si256(
                _mm256_srlv_epi32(_mm256_cvtepu8_epi32(bytes), _mm256_setr_epi32(0, 4, 0, 4, 0, 4, 0, 4)),
                _mm256_set1_epi32(15));
            const __m256 mag = _mm256_permutevar8x32_ps(
                _mm256_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f), codes);
            const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(codes, _mm256_set1_epi32(8)), 28);
            v = _mm256_or_ps(mag, _mm256_castsi256_ps(sign));
        }
    }
    return _mm256_mul_ps(v, _mm256_set1_ps(scale));
}
#endif

#if defined(__AVX512F__) && defined(__AVX512DQ__)
// One MXFP4 group (32 weights, 16 bytes, one scale) decoded and scaled into four vectors of eight, in order: the
// sixteen e2m1 values times the group's scale form one 16-float table (each product exact: a power of two times a
// small value), and each code picks its weight from it (one permutation per sixteen weights). The bits are those
// of the AVX2 decode below and of `decode8v` (value x scale, one exact multiplication).
inline void decode32_fp4(const uint8_t *row, int64_t k, float scale, __m256 out[4]) {
    const __m128i bytes = _mm_loadu_si128((const __m128i *)(row + (k >> 1)));
    const __m128i lo = _mm_and_si128(bytes, _mm_set1_epi8(15));
    const __m128i hi = _mm_and_si128(_mm_srli_epi16(bytes, 4), _mm_set1_epi8(15));
    const __m512 table = _mm512_mul_ps(_mm512_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f, -0.0f, -0.5f,
                                                      -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f),
                                       _mm512_set1_ps(scale));
    const __m512 a = _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(_mm_unpacklo_epi8(lo, hi)), table);  // 0..15
    const __m512 b = _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(_mm_unpackhi_epi8(lo, hi)), table);  // 16..31
    out[0] = _mm512_castps512_ps256(a);
    out[1] = _mm512_extractf32x8_ps(a, 1);
    out[2] = _mm512_castps512_ps256(b);
    out[3] = _mm512_extractf32x8_ps(b, 1);
}
#elif defined(__AVX2__)
// One MXFP4 group (32 weights, 16 bytes, one scale) decoded and scaled into four vectors of eight, in order. Twice
// each e2m1 value is a small integer (0, 1, 2, 3, 4, 6, 8, 12 and their negatives): one byte shuffle looks all 32
// up, they widen to float32 and one multiplication by scale / 2 gives value x scale exactly (a power of two).
inline void decode32_fp4(const uint8_t *row, int64_t k, float scale, __m256 out[4]) {
    const __m128i bytes = _mm_loadu_si128((const __m128i *)(row + (k >> 1)));
    const __m128i lo = _mm_and_si128(bytes, _mm_set1_epi8(15));
    const __m128i hi = _mm_and_si128(_mm_srli_epi16(bytes, 4), _mm_set1_epi8(15));
    const __m128i table = _mm_setr_epi8(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12);
    const __m128i first = _mm_shuffle_epi8(table, _mm_unpacklo_epi8(lo, hi));   // weights 0..15
    const __m128i second = _mm_shuffle_epi8(table, _mm_unpackhi_epi8(lo, hi));  // weights 16..31
    const __m256 half = _mm256_set1_ps(scale * 0.5f);
    out[0] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(first)), half);
    out[1] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(first, 8))), half);
    out[2] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(second)), half);
    out[3] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(second, 8))), half);
}
#endif

#ifdef DK_WO_AVX
inline float hsum8(__m256 v) {
    alignas(32) float l[8];
    _mm256_store_ps(l, v);
    return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
}
#endif

// Memory-level parallelism for weights read from DRAM: each tile reads NR short rows (a few cache lines each), too
// short for the hardware prefetchers to follow, so while reading byte `byte` of rows n0 .. n0 + NR - 1 the same
// byte of the next NR rows is requested (a hint: never faults, changes no result).
inline void prefetch_next(const uint8_t *w, int64_t wstride, int64_t n0, int nr, int64_t byte) {
#if defined(__SSE__)
    for (int r = 0; r < nr; r++) _mm_prefetch((const char *)(w + (n0 + nr + r) * wstride + byte), _MM_HINT_T0);
#else
    (void)w, (void)wstride, (void)n0, (void)nr, (void)byte;
#endif
}

// Rows [n0, n1) of y = x @ dequant(W).T for MB rows of x (a tile: x points at its first row, stride ldx; y at
// its first row, stride ldy). NR output rows at a time share each decoded chunk of x.
template <int NR, int MB>
inline void tile(int64_t fmt, const float *x, int64_t ldx, int64_t K, const uint8_t *w, int64_t wstride,
                 const RowScale *scales, int64_t n0, float *y, int64_t ldy) {
    // the vector part: whole chunks of eight inside one scale block; the rest one weight at a time
    const int64_t bc = scales[0].block_cols;
    const bool unscaled = fmt == BF16 || fmt == F32;
    const int64_t k8 = (fmt == MXFP4 || unscaled || bc % 8 == 0 || bc >= K) ? K - K % 8 : 0;
    const int64_t step = fmt == MXFP4 ? 32 : (unscaled || bc >= K) ? (k8 ? k8 : 8) : bc;
    alignas(32) float wd[NR][8];
    (void)wd;
#ifdef DK_WO_AVX
    __m256 acc[NR][MB];
    for (int r = 0; r < NR; r++)
        for (int m = 0; m < MB; m++) acc[r][m] = _mm256_setzero_ps();
#else
    float acc[NR][MB][8] = {};
#endif
#if defined(__AVX2__) && defined(DK_WO_AVX)
    if (fmt == MXFP4) {  // whole groups of 32 (K is a multiple of 32)
        for (int64_t kb = 0; kb < k8; kb += 32) {
            if ((kb & 127) == 0) prefetch_next(w, wstride, n0, NR, kb >> 1);
            __m256 wv[NR][4];
            for (int r = 0; r < NR; r++) decode32_fp4(w + (n0 + r) * wstride, kb, scales[r].at(kb), wv[r]);
            for (int q = 0; q < 4; q++) {
                __m256 xv[MB];
                for (int m = 0; m < MB; m++) xv[m] = _mm256_loadu_ps(x + m * ldx + kb + 8 * q);
                for (int r = 0; r < NR; r++)
                    for (int m = 0; m < MB; m++) acc[r][m] = _mm256_fmadd_ps(wv[r][q], xv[m], acc[r][m]);
            }
        }
    } else
#endif
    for (int64_t kb = 0; kb < k8; kb += step) {
        const int64_t kend = kb + step < k8 ? kb + step : k8;
        float sc[NR];
        for (int r = 0; r < NR; r++) sc[r] = scales[r].at(kb);
        for (int64_t k = kb; k < kend; k += 8) {
            const int64_t byte = k * (fmt == F32 ? 4 : fmt == BF16 ? 2 : 1);
            if ((byte & 63) == 0) prefetch_next(w, wstride, n0, NR, byte);
#ifdef DK_WO_AVX
            __m256 xv[MB];
            for (int m = 0; m < MB; m++) xv[m] = _mm256_loadu_ps(x + m * ldx + k);
            for (int r = 0; r < NR; r++) {
#ifdef __AVX2__
                const __m256 wv = decode8v(fmt, w + (n0 + r) * wstride, k, sc[r]);
#else
                decode8(fmt, w + (n0 + r) * wstride, k, wd[r]);
                const __m256 wv = _mm256_mul_ps(_mm256_load_ps(wd[r]), _mm256_set1_ps(sc[r]));
#endif
                for (int m = 0; m < MB; m++) acc[r][m] = _mm256_fmadd_ps(wv, xv[m], acc[r][m]);
            }
#else
            for (int r = 0; r < NR; r++) decode8(fmt, w + (n0 + r) * wstride, k, wd[r]);
            for (int r = 0; r < NR; r++)
                for (int j = 0; j < 8; j++) {
                    const float wk = wd[r][j] * sc[r];
                    for (int m = 0; m < MB; m++) acc[r][m][j] += wk * x[m * ldx + k + j];
                }
#endif
        }
    }
    float sums[NR][MB];
    for (int r = 0; r < NR; r++)
        for (int m = 0; m < MB; m++) {
#ifdef DK_WO_AVX
            sums[r][m] = hsum8(acc[r][m]);
#else
            const float *l = acc[r][m];
            sums[r][m] = ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
#endif
        }
    for (int r = 0; r < NR; r++) {
        const uint8_t *row = w + (n0 + r) * wstride;
        for (int64_t k = k8; k < K; k++) {
            const float wk = decode_one(fmt, row, k) * scales[r].at(k);
            for (int m = 0; m < MB; m++) sums[r][m] += wk * x[m * ldx + k];
        }
        for (int m = 0; m < MB; m++) y[m * ldy + n0 + r] = sums[r][m];
    }
}

// The weights of one matrix: bytes (row-major [N, K] in the format), its scales and their block shape.
struct Packed {
    int64_t fmt, N, K;
    const uint8_t *w;
    const float *fscale;    // [ceil(N / br), ceil(K / bc)] (INT8 / FP8) or null
    const uint8_t *escale;  // [N, K / 32] (MXFP4) or null
    int64_t br, bc;
    RowScale row(int64_t n) const {
        RowScale s;
        s.block_cols = bc;
        if (escale) s.e = escale + n * (K / 32);
        else if (fscale) s.f = fscale + (n / br) * ((K + bc - 1) / bc);
        return s;
    }
};

// Rows [n0, n1) of y [M, N] (stride ldy) = x [M, K] (stride ldx, M a multiple of the tile height) @ dequant(W).T.
inline void rows(const Packed &p, const float *x, int64_t M, int64_t ldx, int64_t n0, int64_t n1, float *y,
                 int64_t ldy);
inline void rows(const Packed &p, const float *x, int64_t M, int64_t ldx, int64_t n0, int64_t n1, float *y,
                 int64_t ldy) {
    const int64_t K = p.K, ws = row_bytes(p.fmt, K);
    int64_t n = n0;
    auto run = [&](auto nr_tag, auto mb_tag) {
        constexpr int NR = decltype(nr_tag)::value, MB = decltype(mb_tag)::value;
        for (; n + NR <= n1; n += NR) {
            RowScale s[NR];
            for (int r = 0; r < NR; r++) s[r] = p.row(n + r);
            for (int64_t m = 0; m + MB <= M; m += MB) tile<NR, MB>(p.fmt, x + m * ldx, ldx, K, p.w, ws, s, n, y + m * ldy, ldy);
        }
    };
    using I1 = std::integral_constant<int, 1>;
    if (M > 8 && p.fmt != F32) {
        // many rows: each weight row is decoded (and scaled) once into a float panel, which the tiles then read
        std::vector<float> panel(K);
        Packed f{F32, 1, K, reinterpret_cast<const uint8_t *>(panel.data()), nullptr, nullptr, 1, K};
        for (; n < n1; n++) {
            const uint8_t *row = p.w + n * ws;
            const RowScale s = p.row(n);
            int64_t k = 0;
#if defined(__AVX2__) && defined(DK_WO_AVX)
            if (p.fmt == MXFP4 || p.fmt == BF16 || p.bc % 8 == 0 || p.bc >= K)
                for (; k + 8 <= K; k += 8) _mm256_storeu_ps(panel.data() + k, decode8v(p.fmt, row, k, s.at(k)));
#endif
            for (; k < K; k++) panel[k] = decode_one(p.fmt, row, k) * s.at(k);
            rows(f, x, M, ldx, 0, 1, y + n, ldy);
        }
        return;
    }
    using I2 = std::integral_constant<int, 2>;
    using I4 = std::integral_constant<int, 4>;
    using I8 = std::integral_constant<int, 8>;
    if (M == 1) run(I4{}, I1{}), run(I1{}, I1{});
    else if (M == 2) run(I4{}, I2{}), run(I1{}, I2{});
    else if (M == 4) run(I2{}, I4{}), run(I1{}, I4{});
    else run(I1{}, I8{});
}

// The tile height rows() uses for M rows (x is padded to a multiple of it).
inline int64_t tile_rows(int64_t M) { return M <= 2 ? M : M <= 4 ? 4 : 8; }

}  // namespace dk_wo
