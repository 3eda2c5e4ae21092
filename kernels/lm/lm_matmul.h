// The frame the jaxlab.lm matmul kernels share (lm_qmatmul.cc, lm_q8matmul.cc): argument
// checks, the FFI binding, and the loop over output rows and tiles of rows of x.
//
// Both compute out (M, N) float32 from x (M, K) float32 and quantised weights q (N, K)
// int8 (bits = 8) or (N, K/2) uint8 (bits = 4, two levels per byte) with scale and offset
// (N, K/32) float32. q is bound as an untyped buffer of int8 or uint8 bytes, read as
// bytes (Levels): a caller-side bitcast_convert of int8 levels to uint8 is a full copy of
// the weights in XLA (~80 ms per call for a 151936 x 896 output head). Each kernel supplies RowTile<Bits, MT>(row, m0): output row `row` of
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
};

// Checks the shapes of (x, q, scale, offset) and bits; fills `d`. `done` is set when there
// is nothing left to compute (M or N is 0, or K is 0 and `out` was zeroed).
inline ffi::Error CheckArgs(const std::string& name, ffi::Buffer<ffi::F32>& x,
                            ffi::AnyBuffer& q, ffi::Buffer<ffi::F32>& scale,
                            ffi::Buffer<ffi::F32>& offset, ffi::ResultBuffer<ffi::F32>& out,
                            int32_t bits, Dims& d, bool& done) {
  auto xd = x.dimensions(), qd = q.dimensions(), sd = scale.dimensions();
  auto od = offset.dimensions();
  if (xd.size() != 2 || qd.size() != 2 || sd.size() != 2 || od.size() != 2) {
    return ffi::Error::InvalidArgument(name + ": x (M, K), q (N, K'), scale/offset (N, K/32)");
  }
  if (bits != 8 && bits != 4) return ffi::Error::InvalidArgument(name + ": bits is 8 or 4");
  if (q.element_type() != ffi::DataType::U8 && q.element_type() != ffi::DataType::S8) {
    return ffi::Error::InvalidArgument(name + ": q is int8 or uint8");
  }
  d = Dims{xd[0], qd[0], xd[1]};
  const int64_t nb = d.k / kBlock;
  if (d.k % kBlock != 0 || qd[1] != (bits == 8 ? d.k : d.k / 2) || sd[0] != d.n ||
      sd[1] != nb || od[0] != d.n || od[1] != nb) {
    return ffi::Error::InvalidArgument(name + ": inconsistent shapes");
  }
  done = d.m == 0 || d.n == 0 || d.k == 0;
  if (d.k == 0) std::memset(out->typed_data(), 0, sizeof(float) * d.m * d.n);
  return ffi::Error::Success();
}

// The bytes of q (int8 levels or packed 4-bit pairs), whichever of int8/uint8 it is bound as.
inline const uint8_t* Levels(const ffi::AnyBuffer& q) {
  return static_cast<const uint8_t*>(q.untyped_data());
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

}  // namespace jaxlab_lm

// The FFI handler `symbol` for impl(pool, x, q (int8 or uint8), scale, offset, out, bits).
#define JAXLAB_LM_MATMUL_HANDLER(symbol, impl)                            \
  XLA_FFI_DEFINE_HANDLER_SYMBOL(symbol, impl,                             \
                                xla::ffi::Ffi::Bind()                     \
                                    .Ctx<xla::ffi::ThreadPool>()          \
                                    .Arg<xla::ffi::Buffer<xla::ffi::F32>>() \
                                    .Arg<xla::ffi::AnyBuffer>()             \
                                    .Arg<xla::ffi::Buffer<xla::ffi::F32>>() \
                                    .Arg<xla::ffi::Buffer<xla::ffi::F32>>() \
                                    .Ret<xla::ffi::Buffer<xla::ffi::F32>>() \
                                    .Attr<int32_t>("bits"))

#endif  // JAXLAB_KERNELS_LM_LM_MATMUL_H_
