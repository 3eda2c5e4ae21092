// Weight-only quantised matmul for jaxlab.lm, as an XLA FFI custom call (CPU).
//
//   out[m, n] = sum_k x[m, k] * W[n, k],   W[n, k] = q[n, k] * scale[n, b] + offset[n, b],
//   b = k / 32 (one scale and one offset per block of 32 weights of a row).
//
// q is int8 (bits = 8: one byte per weight) or 4-bit unsigned (bits = 4: byte j of
// a block holds weight j in its low nibble and weight j + 16 in its high nibble, the
// GGUF Q4_0/Q4_1 layout). Each block of 32 weights is dequantised to float32 in
// registers (q * scale + offset, one FMA) and multiplied with up to 8 rows of x at
// once, so the weights stream from memory exactly once per call whatever M is:
// batch-1 decode reads 1.25 (int8) or 0.75 (4-bit) bytes per weight instead of 4.
//
// The block's dequantisation and products use the widest vectors the build targets:
// AVX-512F (two 16-lane vectors per block), AVX2 + FMA (four 8-lane vectors: int8 levels
// widened with `vpmovsxbd`, 4-bit bytes with `vpmovzxbd` then split into nibbles, converted
// with `vcvtdq2ps`; MT < 4 rows keep 2 or 4 independent accumulators per row so the FMA
// latency is hidden at M = 1), or a portable C++ loop (no AVX2, or -DJAXLAB_LM_PORTABLE,
// which the tests build too). `LmQMatmulIsa()` names the one compiled. Every path sums
// the products of a row in float32 in its own order (lanes, then a horizontal sum).
//
// Rows of W are split into chunks worked on by the calling thread and XLA's intra-op
// thread pool (lm_matmul.h).
#include <algorithm>
#include <cstdint>
#include <cstring>

#if defined(JAXLAB_LM_PORTABLE)
#define LM_Q_PORTABLE 1
#elif defined(__AVX512F__)
#define LM_Q_AVX512 1
#elif defined(__AVX2__) && defined(__FMA__)
#define LM_Q_AVX2 1
#else
#define LM_Q_PORTABLE 1
#endif

#if !defined(LM_Q_PORTABLE)
#include <immintrin.h>
#endif

#include "lm_matmul.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

using jaxlab_lm::kBlock;

#if defined(LM_Q_AVX512)
constexpr const char* kIsa = "avx512";
#elif defined(LM_Q_AVX2)
constexpr const char* kIsa = "avx2";
#else
constexpr const char* kIsa = "portable";
#endif

struct Problem {
  const float* x;
  const uint8_t* q;
  const float* scale;
  const float* offset;
  float* out;
  int64_t m, n, k, bits;
};

#if defined(LM_Q_AVX512)
// Dequantise one block of 32 weights of row `row` into two vectors.
template <int Bits>
inline void LoadBlock(const uint8_t* qrow, int64_t b, float s, float o, __m512& w0, __m512& w1) {
  const __m512 vs = _mm512_set1_ps(s), vo = _mm512_set1_ps(o);
  __m512i i0, i1;
  if constexpr (Bits == 8) {
    const int8_t* p = reinterpret_cast<const int8_t*>(qrow) + b * kBlock;
    i0 = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    i1 = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16)));
  } else {
    const uint8_t* p = qrow + b * (kBlock / 2);
    __m512i v = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    i0 = _mm512_and_si512(v, _mm512_set1_epi32(0x0F));
    i1 = _mm512_srli_epi32(v, 4);
  }
  w0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(i0), vs, vo);
  w1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(i1), vs, vo);
}

template <int Bits, int MT>
void RowTile(const Problem& p, int64_t row, int64_t m0) {
  const int64_t nb = p.k / kBlock;
  const int64_t qstride = Bits == 8 ? p.k : p.k / 2;
  const uint8_t* qrow = p.q + row * qstride;
  const float* srow = p.scale + row * nb;
  const float* orow = p.offset + row * nb;
  __m512 acc[MT];
  for (int t = 0; t < MT; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    __m512 w0, w1;
    LoadBlock<Bits>(qrow, b, srow[b], orow[b], w0, w1);
    for (int t = 0; t < MT; ++t) {
      const float* xr = p.x + (m0 + t) * p.k + b * kBlock;
      acc[t] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(xr), acc[t]);
      acc[t] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(xr + 16), acc[t]);
    }
  }
  for (int t = 0; t < MT; ++t) p.out[(m0 + t) * p.n + row] = _mm512_reduce_add_ps(acc[t]);
}
#elif defined(LM_Q_AVX2)
// Dequantise block b of a row into four vectors: weights 0-7, 8-15, 16-23, 24-31.
template <int Bits>
inline void LoadBlock(const uint8_t* qrow, int64_t b, __m256 vs, __m256 vo, __m256 (&w)[4]) {
  __m256i i[4];
  if constexpr (Bits == 8) {
    const uint8_t* p = qrow + b * kBlock;
    for (int c = 0; c < 4; ++c) {
      i[c] = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 8 * c)));
    }
  } else {
    // byte j holds weight j (low nibble) and weight j + 16 (high nibble)
    const uint8_t* p = qrow + b * (kBlock / 2);
    const __m256i b0 = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    const __m256i b1 =
        _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 8)));
    const __m256i low = _mm256_set1_epi32(0x0F);
    i[0] = _mm256_and_si256(b0, low);
    i[1] = _mm256_and_si256(b1, low);
    i[2] = _mm256_srli_epi32(b0, 4);
    i[3] = _mm256_srli_epi32(b1, 4);
  }
  for (int c = 0; c < 4; ++c) w[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i[c]), vs, vo);
}

template <int Bits, int MT>
void RowTile(const Problem& p, int64_t row, int64_t m0) {
  // independent accumulators per row of x: 8 chains of FMAs in flight whatever MT is
  constexpr int A = MT >= 4 ? 1 : (MT >= 2 ? 2 : 4);
  const int64_t nb = p.k / kBlock;
  const int64_t qstride = Bits == 8 ? p.k : p.k / 2;
  const uint8_t* qrow = p.q + row * qstride;
  const float* srow = p.scale + row * nb;
  const float* orow = p.offset + row * nb;
  __m256 acc[MT][A];
  for (int t = 0; t < MT; ++t) {
    for (int a = 0; a < A; ++a) acc[t][a] = _mm256_setzero_ps();
  }
  for (int64_t b = 0; b < nb; ++b) {
    __m256 w[4];
    LoadBlock<Bits>(qrow, b, _mm256_set1_ps(srow[b]), _mm256_set1_ps(orow[b]), w);
    for (int t = 0; t < MT; ++t) {
      const float* xr = p.x + (m0 + t) * p.k + b * kBlock;
      for (int c = 0; c < 4; ++c) {
        acc[t][c % A] = _mm256_fmadd_ps(w[c], _mm256_loadu_ps(xr + 8 * c), acc[t][c % A]);
      }
    }
  }
  for (int t = 0; t < MT; ++t) {
    __m256 s = acc[t][0];
    for (int a = 1; a < A; ++a) s = _mm256_add_ps(s, acc[t][a]);
    p.out[(m0 + t) * p.n + row] = jaxlab_lm::HorizontalSum(s);
  }
}
#else
template <int Bits, int MT>
void RowTile(const Problem& p, int64_t row, int64_t m0) {
  const int64_t nb = p.k / kBlock;
  const int64_t qstride = Bits == 8 ? p.k : p.k / 2;
  const uint8_t* qrow = p.q + row * qstride;
  float acc[MT][kBlock] = {};
  for (int64_t b = 0; b < nb; ++b) {
    float w[kBlock];
    const float s = p.scale[row * nb + b], o = p.offset[row * nb + b];
    for (int j = 0; j < kBlock; ++j) {
      int v;
      if constexpr (Bits == 8) {
        v = reinterpret_cast<const int8_t*>(qrow)[b * kBlock + j];
      } else {
        const uint8_t byte = qrow[b * (kBlock / 2) + (j & 15)];
        v = j < 16 ? (byte & 0x0F) : (byte >> 4);
      }
      w[j] = static_cast<float>(v) * s + o;
    }
    for (int t = 0; t < MT; ++t) {
      const float* xr = p.x + (m0 + t) * p.k + b * kBlock;
      for (int j = 0; j < kBlock; ++j) acc[t][j] += w[j] * xr[j];
    }
  }
  for (int t = 0; t < MT; ++t) {
    float s = 0;
    for (int j = 0; j < kBlock; ++j) s += acc[t][j];
    p.out[(m0 + t) * p.n + row] = s;
  }
}
#endif

ffi::Error QMatmulImpl(ffi::ThreadPool pool, ffi::Buffer<ffi::F32> x, ffi::AnyBuffer q,
                       ffi::Buffer<ffi::F32> scale, ffi::Buffer<ffi::F32> offset,
                       ffi::Buffer<ffi::S32> layer, ffi::ResultBuffer<ffi::F32> out,
                       int32_t bits) {
  jaxlab_lm::Dims d{};
  bool done = false;
  if (auto e = jaxlab_lm::CheckArgs("lm_qmatmul", x, q, scale, offset, layer, out, bits, d,
                                    done);
      e.failure() || done) {
    return e;
  }
  const Problem p{x.typed_data(), d.q, d.scale, d.offset, out->typed_data(),
                  d.m, d.n, d.k, bits};
  jaxlab_lm::WithBits(bits, [&](auto b) {
    jaxlab_lm::ForEachTile(pool, d.m, d.n, d.k, [p](auto mt, int64_t row, int64_t m0) {
      RowTile<decltype(b)::value, decltype(mt)::value>(p, row, m0);
    });
  });
  return ffi::Error::Success();
}

}  // namespace

extern "C" const char* LmQMatmulIsa() { return kIsa; }

JAXLAB_LM_MATMUL_HANDLER(LmQMatmulF32, QMatmulImpl);
