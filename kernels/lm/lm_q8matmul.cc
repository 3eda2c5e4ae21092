// Quantised-activation matmul for jaxlab.lm (ggml's Q8_0 x Q8_0 / Q4_1 x Q8_0 scheme),
// as an XLA FFI custom call (CPU).
//
// The weights are those of lm_qmatmul.cc: W[n, k] = q[n, k] * scale[n, b] + offset[n, b],
// b = k / 32, q int8 (bits = 8) or 4-bit unsigned levels packed two per byte (bits = 4:
// byte j of a block holds weight j in its low nibble, weight j + 16 in its high nibble).
// The activations are quantised here, once per call, per row m and block b of 32:
//
//   d[m, b] = max_j |x[m, 32 b + j]| / 127          (float32)
//   a[m, k] = round(x[m, k] * (1 / d[m, b]))        (int8 in [-127, 127]; 0 where d = 0;
//                                                     round half away from zero, roundf)
//
// and the product is taken with integer dot products per block:
//
//   out[m, n] = sum_b d[m, b] * (scale[n, b] * sum_j a[m, b, j] q[n, b, j]
//                                + offset[n, b] * sum_j a[m, b, j]).
//
// That is x @ W.T up to the activation rounding (|x - d a| <= d / 2 per element). The
// integer dot of a block: AVX2 `vpmaddubsw` (u8 x s8 -> pairs summed to s16) then
// `vpmaddwd` with ones (-> s32); int8 weights use ggml's sign trick (|q| unsigned,
// sign(q) moved onto a), which cannot saturate: 2 * 128 * 127 < 32767; 4-bit levels
// 0..15 are unsigned already. With AVX-512 VNNI (+VL) one `vpdpbusd` replaces the pair.
// Without AVX2 (or with -DJAXLAB_LM_PORTABLE) a portable C++ loop does the same sums.
// Each block's int32 sums are converted to float32 (exact: |sum| < 2^24) and scaled by
// d * scale with one FMA; the offset term is d * sum(a) * offset. Float summation order
// differs from a float64 reference only by float32 rounding.
//
// Up to 8 rows of x share each block of weights as it is read, so the weights stream
// from memory once per call whatever M is; rows of W are split over the calling thread
// and XLA's intra-op pool (lm_matmul.h). Build with -ffp-contract=off: the rounding
// x * (1/d) must not be fused into the subtraction that decides the half-way case.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#if (defined(__AVX2__) || defined(__AVX512VNNI__)) && !defined(JAXLAB_LM_PORTABLE)
#include <immintrin.h>
#endif

#include "lm_matmul.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

using jaxlab_lm::kBlock;

#if defined(JAXLAB_LM_PORTABLE) || !defined(__AVX2__)
#define LM_Q8_PORTABLE 1
constexpr const char* kIsa = "portable";
#elif defined(__AVX512VNNI__) && defined(__AVX512VL__)
constexpr const char* kIsa = "avx512vnni";
#else
constexpr const char* kIsa = "avx2";
#endif

struct Problem {
  const int8_t* a;     // (M, K) quantised activations
  const float* d;      // (M, K/32) their block scales
  const float* dsum;   // (M, K/32) d * sum_j a (the offset term's factor)
  const uint8_t* q;
  const float* scale;
  const float* offset;
  float* out;
  int64_t m, n, k;
};

// Round half away from zero (== std::round) for |v| < 2^23: v - trunc(v) is exact.
inline float RoundAway(float v) {
  const float t = std::trunc(v);
  const float r = v - t;
  return std::fabs(r) >= 0.5f ? t + std::copysign(1.0f, v) : t;
}

void QuantizeRows(const float* x, int64_t m, int64_t k, int8_t* a, float* d, float* dsum) {
  const int64_t nb = k / kBlock;
  for (int64_t i = 0; i < m * nb; ++i) {
    const float* xb = x + i * kBlock;
    float amax = 0.0f;
    for (int j = 0; j < kBlock; ++j) amax = std::max(amax, std::fabs(xb[j]));
    const float di = amax / 127.0f;
    const float id = di != 0.0f ? 1.0f / di : 0.0f;
    int32_t s = 0;
    for (int j = 0; j < kBlock; ++j) {
      const int v = static_cast<int>(RoundAway(xb[j] * id));
      a[i * kBlock + j] = static_cast<int8_t>(v);
      s += v;
    }
    d[i] = di;
    dsum[i] = di * static_cast<float>(s);
  }
}

#if !defined(LM_Q8_PORTABLE)
// 32 weight levels of block b as bytes in weight order (int8, or 4-bit levels 0..15).
template <int Bits>
inline __m256i LoadLevels(const uint8_t* qrow, int64_t b) {
  if constexpr (Bits == 8) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qrow + b * kBlock));
  } else {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qrow + b * kBlock / 2));
    const __m128i lo = _mm_and_si128(v, _mm_set1_epi8(0x0F));
    const __m128i hi = _mm_and_si128(_mm_srli_epi16(v, 4), _mm_set1_epi8(0x0F));
    return _mm256_set_m128i(hi, lo);
  }
}

// Eight int32 partial sums of u[j] * s[j] (u unsigned bytes, s signed bytes).
inline __m256i DotU8S8(__m256i u, __m256i s) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
  return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
#else
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
#endif
}

template <int Bits, int MT>
void RowTile(const Problem& p, int64_t row, int64_t m0) {
  const int64_t nb = p.k / kBlock;
  const uint8_t* qrow = p.q + row * (Bits == 8 ? p.k : p.k / 2);
  const float* srow = p.scale + row * nb;
  const float* orow = p.offset + row * nb;
  __m256 acc[MT];
  float off[MT];
  for (int t = 0; t < MT; ++t) acc[t] = _mm256_setzero_ps(), off[t] = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    const __m256i qv = LoadLevels<Bits>(qrow, b);
    const __m256i uq = Bits == 8 ? _mm256_sign_epi8(qv, qv) : qv;  // |q| (-128 -> 128 as u8)
    const float s = srow[b], o = orow[b];
    for (int t = 0; t < MT; ++t) {
      const int64_t i = (m0 + t) * nb + b;
      __m256i av = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p.a + i * kBlock));
      if constexpr (Bits == 8) av = _mm256_sign_epi8(av, qv);  // a * sign(q)
      const __m256 dot = _mm256_cvtepi32_ps(DotU8S8(uq, av));
      acc[t] = _mm256_fmadd_ps(dot, _mm256_set1_ps(p.d[i] * s), acc[t]);
      off[t] += p.dsum[i] * o;
    }
  }
  for (int t = 0; t < MT; ++t) {
    p.out[(m0 + t) * p.n + row] = jaxlab_lm::HorizontalSum(acc[t]) + off[t];
  }
}
#else
template <int Bits, int MT>
void RowTile(const Problem& p, int64_t row, int64_t m0) {
  const int64_t nb = p.k / kBlock;
  const uint8_t* qrow = p.q + row * (Bits == 8 ? p.k : p.k / 2);
  float acc[MT] = {};
  for (int64_t b = 0; b < nb; ++b) {
    int32_t lv[kBlock];
    for (int j = 0; j < kBlock; ++j) {
      if constexpr (Bits == 8) {
        lv[j] = reinterpret_cast<const int8_t*>(qrow)[b * kBlock + j];
      } else {
        const uint8_t byte = qrow[b * (kBlock / 2) + (j & 15)];
        lv[j] = j < 16 ? (byte & 0x0F) : (byte >> 4);
      }
    }
    const float s = p.scale[row * nb + b], o = p.offset[row * nb + b];
    for (int t = 0; t < MT; ++t) {
      const int64_t i = (m0 + t) * nb + b;
      const int8_t* ab = p.a + i * kBlock;
      int32_t dot = 0;
      for (int j = 0; j < kBlock; ++j) dot += lv[j] * ab[j];
      acc[t] += p.d[i] * s * static_cast<float>(dot) + p.dsum[i] * o;
    }
  }
  for (int t = 0; t < MT; ++t) p.out[(m0 + t) * p.n + row] = acc[t];
}
#endif

ffi::Error Q8MatmulImpl(ffi::ThreadPool pool, ffi::Buffer<ffi::F32> x, ffi::AnyBuffer q,
                        ffi::Buffer<ffi::F32> scale, ffi::Buffer<ffi::F32> offset,
                        ffi::Buffer<ffi::S32> layer, ffi::ResultBuffer<ffi::F32> out,
                        int32_t bits) {
  jaxlab_lm::Dims d{};
  bool done = false;
  if (auto e = jaxlab_lm::CheckArgs("lm_q8matmul", x, q, scale, offset, layer, out, bits, d,
                                    done);
      e.failure() || done) {
    return e;
  }
  const int64_t nb = d.k / kBlock;
  std::vector<int8_t> a(d.m * d.k);
  std::vector<float> dx(d.m * nb), dsum(d.m * nb);
  QuantizeRows(x.typed_data(), d.m, d.k, a.data(), dx.data(), dsum.data());
  const Problem p{a.data(), dx.data(), dsum.data(), d.q, d.scale,
                  d.offset, out->typed_data(), d.m, d.n, d.k};
  jaxlab_lm::WithBits(bits, [&](auto b) {
    jaxlab_lm::ForEachTile(pool, d.m, d.n, d.k, [p](auto mt, int64_t row, int64_t m0) {
      RowTile<decltype(b)::value, decltype(mt)::value>(p, row, m0);
    });
  });
  return ffi::Error::Success();
}

}  // namespace

extern "C" const char* LmQ8MatmulIsa() { return kIsa; }

JAXLAB_LM_MATMUL_HANDLER(LmQ8MatmulF32, Q8MatmulImpl);
