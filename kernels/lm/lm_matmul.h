// The frame the jaxlab.lm matmul kernels share (lm_qmatmul.cc, lm_q8matmul.cc): argument
// checks, the FFI binding, and the loop over output rows and tiles of rows of x.
//
// Both compute out (M, N) float32 from x (M, K) float32 and quantised weights q (N, K)
// int8 (bits = 8) or (N, K/2) uint8 (bits = 4, two levels per byte) with scale and offset
// (N, K/32) float32. The weights may also be a layer stack, q (L, N, K') with scale and
// offset (L, N, K/32), of which the scalar int32 operand `layer` (a device buffer: the
// scan counter of the model's layer loop) picks one by offsetting the pointers, so the
// caller never slices the stack (under lax.scan XLA copies a slice of a stacked operand
// before a custom call: ~130 MB of copies per SmolLM2-135M int8 decode step). A layer
// outside [0, L) is an InvalidArgument error, never a read outside the stack; with a
// 2-D q the layer operand must be 0. q is bound as an untyped buffer of int8 or uint8
// bytes, read as bytes (CheckArgs): a caller-side bitcast_convert of int8 levels to uint8
// is a full copy of the weights in XLA (~80 ms per call for a 151936 x 896 output head).
// Each kernel supplies RowTile<Bits, MT>(row, m0): output row `row` of
// W for the MT rows m0 .. m0 + MT - 1 of x, so a weight row is read from memory once and
// reused from cache for every tile (tiles of kTile rows, then one remainder tile).
//
// Rows [0, N) are split into chunks that the calling thread and tasks on XLA's own
// intra-op pool claim from an atomic counter (no threads are started here). A chunk is
// claimed before it is worked on, so the caller never waits for a task that has not
// started: if the pool is busy the caller does every chunk itself. The thread count is
// min(pool size, $JAXLAB_LM_THREADS, N * K * min(M, kTile) / 2^15), with a few chunks
// per thread so a late-starting task still finds work.
#ifndef JAXLAB_KERNELS_LM_LM_MATMUL_H_
#define JAXLAB_KERNELS_LM_LM_MATMUL_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>

#include "xla/ffi/api/ffi.h"

#if defined(__AVX2__) && !defined(JAXLAB_LM_PORTABLE)
#include <immintrin.h>
#endif

namespace jaxlab_lm {

namespace ffi = xla::ffi;

constexpr int64_t kBlock = 32;
constexpr int kTile = 8;  // rows of x per pass over a weight row

inline int64_t ThreadCap() {
  const char* env = std::getenv("JAXLAB_LM_THREADS");
  return (env != nullptr && *env != '\0') ? std::max<int64_t>(1, std::atoll(env)) : 64;
}

template <class RowsFn>
struct RowChunks {
  RowsFn rows;  // rows(r0, r1): compute output rows [r0, r1)
  int64_t n, chunk_rows = 1, n_chunks = 0;
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> done{0};

  RowChunks(RowsFn f, int64_t n_) : rows(std::move(f)), n(n_) {}

  void Work() {
    for (;;) {
      const int64_t c = next.fetch_add(1, std::memory_order_relaxed);
      if (c >= n_chunks) return;
      const int64_t r0 = c * chunk_rows;
      rows(r0, std::min(n, r0 + chunk_rows));
      done.fetch_add(1, std::memory_order_release);
    }
  }
};

// Runs rows(r0, r1) over [0, n) on the calling thread and the pool; returns when done.
template <class RowsFn>
void ParallelRows(ffi::ThreadPool& pool, int64_t n, int64_t work, RowsFn rows) {
  auto s = std::make_shared<RowChunks<RowsFn>>(std::move(rows), n);
  int64_t nt = std::min<int64_t>({pool.num_threads(), ThreadCap(), work / (1 << 15)});
  nt = std::max<int64_t>(nt, 1);
  const int64_t chunks = nt == 1 ? 1 : std::min<int64_t>(n, 4 * nt);
  s->chunk_rows = (n + chunks - 1) / chunks;
  s->n_chunks = (n + s->chunk_rows - 1) / s->chunk_rows;
  for (int64_t t = 1; t < nt; ++t) pool.Schedule([s] { s->Work(); });
  s->Work();
  while (s->done.load(std::memory_order_acquire) < s->n_chunks) std::this_thread::yield();
}

template <int T, class F>
inline void RemainderTile(int64_t r, const F& tile, int64_t row, int64_t m0) {
  if constexpr (T > 0) {
    if (r == T) {
      tile(std::integral_constant<int, T>{}, row, m0);
    } else {
      RemainderTile<T - 1>(r, tile, row, m0);
    }
  }
}

// tile(std::integral_constant<int, MT>, row, m0) for every output row (chunks over the
// pool) and tile of rows of x.
template <class F>
void ForEachTile(ffi::ThreadPool& pool, int64_t m, int64_t n, int64_t k, F tile) {
  const int64_t work = n * k * std::max<int64_t>(1, std::min<int64_t>(m, kTile));
  ParallelRows(pool, n, work, [tile, m](int64_t r0, int64_t r1) {
    for (int64_t row = r0; row < r1; ++row) {
      int64_t m0 = 0;
      for (; m0 + kTile <= m; m0 += kTile) tile(std::integral_constant<int, kTile>{}, row, m0);
      RemainderTile<kTile - 1>(m - m0, tile, row, m0);
    }
  });
}

struct Dims {
  int64_t m, n, k;
  const uint8_t* q;      // the chosen layer's levels (bytes)
  const float* scale;    // its (N, K/32) scales
  const float* offset;   // its (N, K/32) offsets
};

// Checks the shapes of (x, q, scale, offset, layer) and bits; fills `d` (the pointers at
// layer `layer` of a stacked q). `done` is set when there is nothing left to compute
// (M or N is 0, or K is 0 and `out` was zeroed).
inline ffi::Error CheckArgs(const std::string& name, ffi::Buffer<ffi::F32>& x,
                            ffi::AnyBuffer& q, ffi::Buffer<ffi::F32>& scale,
                            ffi::Buffer<ffi::F32>& offset, ffi::Buffer<ffi::S32>& layer,
                            ffi::ResultBuffer<ffi::F32>& out, int32_t bits, Dims& d,
                            bool& done) {
  auto xd = x.dimensions(), qd = q.dimensions(), sd = scale.dimensions();
  auto od = offset.dimensions();
  const size_t r = qd.size();
  if (xd.size() != 2 || (r != 2 && r != 3) || sd.size() != r || od.size() != r) {
    return ffi::Error::InvalidArgument(
        name + ": x (M, K), q ([L,] N, K'), scale/offset ([L,] N, K/32)");
  }
  if (layer.dimensions().size() != 0) {
    return ffi::Error::InvalidArgument(name + ": layer is a scalar int32");
  }
  if (bits != 8 && bits != 4) return ffi::Error::InvalidArgument(name + ": bits is 8 or 4");
  if (q.element_type() != ffi::DataType::U8 && q.element_type() != ffi::DataType::S8) {
    return ffi::Error::InvalidArgument(name + ": q is int8 or uint8");
  }
  const size_t a = r - 2;  // the (N, K') axes
  const int64_t n_layers = r == 3 ? qd[0] : 1;
  const int64_t n = qd[a], k = xd[1];
  const int64_t nb = k / kBlock;
  const int64_t kq = bits == 8 ? k : k / 2;
  if (k % kBlock != 0 || qd[a + 1] != kq || sd[a] != n || sd[a + 1] != nb || od[a] != n ||
      od[a + 1] != nb || (r == 3 && (sd[0] != n_layers || od[0] != n_layers))) {
    return ffi::Error::InvalidArgument(name + ": inconsistent shapes");
  }
  const int64_t idx = *layer.typed_data();
  if (idx < 0 || idx >= n_layers) {
    return ffi::Error::InvalidArgument(name + ": layer " + std::to_string(idx) +
                                       " outside [0, " + std::to_string(n_layers) + ")");
  }
  const auto* q0 = static_cast<const uint8_t*>(q.untyped_data());
  d = Dims{xd[0], n, k, q0 + idx * n * kq, scale.typed_data() + idx * n * nb,
           offset.typed_data() + idx * n * nb};
  done = d.m == 0 || d.n == 0 || d.k == 0;
  if (d.k == 0) std::memset(out->typed_data(), 0, sizeof(float) * d.m * d.n);
  return ffi::Error::Success();
}

// f(std::integral_constant<int, 8 or 4>) for the runtime `bits`.
template <class F>
inline void WithBits(int32_t bits, F f) {
  if (bits == 8) {
    f(std::integral_constant<int, 8>{});
  } else {
    f(std::integral_constant<int, 4>{});
  }
}

#if defined(__AVX2__) && !defined(JAXLAB_LM_PORTABLE)
// The sum of the eight float lanes of v (both kernels' AVX2 paths end a row with it).
inline float HorizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
#endif

}  // namespace jaxlab_lm

// The FFI handler `symbol` for impl(pool, x, q (int8 or uint8), scale, offset, layer, out,
// bits).
#define JAXLAB_LM_MATMUL_HANDLER(symbol, impl)                            \
  XLA_FFI_DEFINE_HANDLER_SYMBOL(symbol, impl,                             \
                                xla::ffi::Ffi::Bind()                     \
                                    .Ctx<xla::ffi::ThreadPool>()          \
                                    .Arg<xla::ffi::Buffer<xla::ffi::F32>>() \
                                    .Arg<xla::ffi::AnyBuffer>()             \
                                    .Arg<xla::ffi::Buffer<xla::ffi::F32>>() \
                                    .Arg<xla::ffi::Buffer<xla::ffi::F32>>() \
                                    .Arg<xla::ffi::Buffer<xla::ffi::S32>>() \
                                    .Ret<xla::ffi::Buffer<xla::ffi::F32>>() \
                                    .Attr<int32_t>("bits"))

#endif  // JAXLAB_KERNELS_LM_LM_MATMUL_H_
