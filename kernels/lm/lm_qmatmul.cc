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
// Rows of W are split into chunks that the calling thread and tasks on XLA's own
// intra-op thread pool claim from an atomic counter (no threads are started here).
// A chunk is claimed before it is worked on, so the caller never waits for a task
// that has not started: if the pool is busy the caller does every chunk itself.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

constexpr int64_t kBlock = 32;
constexpr int kTile = 8;  // rows of x per pass over a weight row

struct Problem {
  const float* x;
  const uint8_t* q;
  const float* scale;
  const float* offset;
  float* out;
  int64_t m, n, k, bits;
};

#if defined(__AVX512F__)
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

template <int Bits>
void Rows(const Problem& p, int64_t r0, int64_t r1) {
  for (int64_t row = r0; row < r1; ++row) {
    int64_t m0 = 0;
    for (; m0 + kTile <= p.m; m0 += kTile) RowTile<Bits, kTile>(p, row, m0);
    switch (p.m - m0) {
      case 7: RowTile<Bits, 7>(p, row, m0); break;
      case 6: RowTile<Bits, 6>(p, row, m0); break;
      case 5: RowTile<Bits, 5>(p, row, m0); break;
      case 4: RowTile<Bits, 4>(p, row, m0); break;
      case 3: RowTile<Bits, 3>(p, row, m0); break;
      case 2: RowTile<Bits, 2>(p, row, m0); break;
      case 1: RowTile<Bits, 1>(p, row, m0); break;
      default: break;
    }
  }
}

struct Shared {
  Problem p;
  int64_t chunk_rows, n_chunks;
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> done{0};
};

void Work(Shared& s) {
  for (;;) {
    const int64_t c = s.next.fetch_add(1, std::memory_order_relaxed);
    if (c >= s.n_chunks) return;
    const int64_t r0 = c * s.chunk_rows;
    const int64_t r1 = std::min(s.p.n, r0 + s.chunk_rows);
    if (s.p.bits == 8) {
      Rows<8>(s.p, r0, r1);
    } else {
      Rows<4>(s.p, r0, r1);
    }
    s.done.fetch_add(1, std::memory_order_release);
  }
}

int64_t ThreadCap() {
  const char* env = std::getenv("JAXLAB_LM_THREADS");
  return (env != nullptr && *env != '\0') ? std::max<int64_t>(1, std::atoll(env)) : 64;
}

ffi::Error QMatmulImpl(ffi::ThreadPool pool, ffi::Buffer<ffi::F32> x,
                       ffi::Buffer<ffi::U8> q, ffi::Buffer<ffi::F32> scale,
                       ffi::Buffer<ffi::F32> offset, ffi::ResultBuffer<ffi::F32> out,
                       int32_t bits) {
  auto xd = x.dimensions(), qd = q.dimensions(), sd = scale.dimensions();
  if (xd.size() != 2 || qd.size() != 2 || sd.size() != 2 || offset.dimensions().size() != 2) {
    return ffi::Error::InvalidArgument("lm_qmatmul: x (M, K), q (N, K'), scale/offset (N, K/32)");
  }
  if (bits != 8 && bits != 4) return ffi::Error::InvalidArgument("lm_qmatmul: bits is 8 or 4");
  const int64_t m = xd[0], k = xd[1], n = qd[0];
  if (k % kBlock != 0 || qd[1] != (bits == 8 ? k : k / 2) || sd[0] != n ||
      sd[1] != k / kBlock || offset.dimensions()[0] != n || offset.dimensions()[1] != k / kBlock) {
    return ffi::Error::InvalidArgument("lm_qmatmul: inconsistent shapes");
  }
  if (m == 0 || n == 0) return ffi::Error::Success();
  if (k == 0) {
    std::memset(out->typed_data(), 0, sizeof(float) * m * n);
    return ffi::Error::Success();
  }
  auto s = std::make_shared<Shared>();
  s->p = Problem{x.typed_data(), q.typed_data(), scale.typed_data(), offset.typed_data(),
                 out->typed_data(), m, n, k, bits};
  const int64_t work = n * k * std::max<int64_t>(1, std::min<int64_t>(m, kTile));
  int64_t nt = std::min<int64_t>({pool.num_threads(), ThreadCap(), work / (1 << 15)});
  nt = std::max<int64_t>(nt, 1);
  // a few chunks per thread: a late-starting task still finds work to share
  const int64_t chunks = nt == 1 ? 1 : std::min<int64_t>(n, 4 * nt);
  s->chunk_rows = (n + chunks - 1) / chunks;
  s->n_chunks = (n + s->chunk_rows - 1) / s->chunk_rows;
  for (int64_t t = 1; t < nt; ++t) pool.Schedule([s] { Work(*s); });
  Work(*s);
  while (s->done.load(std::memory_order_acquire) < s->n_chunks) std::this_thread::yield();
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(LmQMatmulF32, QMatmulImpl,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::ThreadPool>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::U8>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Arg<ffi::Buffer<ffi::F32>>()
                                  .Ret<ffi::Buffer<ffi::F32>>()
                                  .Attr<int32_t>("bits"));
