// Semi-global matching path aggregation for jaxlab.stereo, as an XLA FFI custom call (CPU).
//
// For a cost volume C (..., H, W, D) (leading dimensions are a batch) and each path
// direction r, L_r(p, d) = C(p, d) + min(L_r(q, d), L_r(q, d +- 1) + P1, m + P2) - m,
// q = p - r its predecessor, m = min_k L_r(q, k); a pixel without a predecessor inside
// the image starts the path, L_r(p) = C(p). The result is sum_r L_r over 8 paths
// (4: vertical and horizontal only).
//
// The arithmetic is that of jaxlab.stereo's JAX path (`_sgm.py`), operation for
// operation in the storage type T: best = min(min(P[d], m + P2), min(P[d+1], P[d-1]) + P1),
// L = (C + best) - m, and the eight paths are summed in the JAX path's order (down with
// dx = 0, 1, -1, left-to-right; up with dx = 0, 1, -1, right-to-left). A pass visits
// rows top to bottom (the four paths whose predecessor lies above or to the left) or
// bottom to top (the other four), keeping the previous row of each vertical/diagonal
// path (W x (D + 2) values, +inf at both ends of each pixel's vector so that the
// d - 1 / d + 1 neighbours need no branches) and the previous pixel of the horizontal
// one. The loop over d is a `#pragma omp simd` loop (min-reduction included), compiled
// with -march=native: 8 float32 lanes with AVX2, 16 with AVX-512.
//
// threads = 1: the downward pass writes the sum of its four paths into the output,
// then the upward pass adds its four: bit-identical to the JAX path for any input.
// threads = 2 (0 = 2 when the volume is large enough and two CPUs are available): the
// two passes run at once on two threads, each first on "its" half of the rows (the
// downward pass on the top half, the upward pass on the bottom half; plain stores),
// then, after one barrier, on the other half (adding to what the other pass stored).
// Every row is touched by one thread at a time. In the bottom half the upward paths
// are then summed before the downward ones, so float sums may differ from the JAX
// path in the last bits; integer-valued costs (census / Hamming) are summed exactly
// either way.
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#if defined(__linux__)
#include <sched.h>
#endif

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

// Path directions of a pass: column offset dx of the predecessor (x - dx) in the
// previous row; the horizontal path comes last.
constexpr int kDx[3] = {0, 1, -1};

// The value beyond both ends of a disparity vector: +inf for floats; for int16 a bound
// above every candidate (costs and penalties are limited so that nothing overflows,
// see kMaxInt16Cost).
template <typename T>
struct Pad {
  static constexpr T kValue = std::numeric_limits<T>::infinity();
};
template <>
struct Pad<int16_t> {
  static constexpr int16_t kValue = 0x3fff;
};
// int16 recursion when every cost is an integer in [0, kMaxInt16Cost] and P1, P2 are
// integers with cmax + P2 <= kMaxInt16Cost: then L lies in [C, C + P2], every candidate
// (at most cmax + P2 + P1 < 0x3fff) stays below the pad, the pad plus P1 fits, and the
// sum of eight paths is at most 8 * 4095 < 2^15. All these values are exact in float
// arithmetic too, so the result is the float recursion's, bit for bit.
constexpr int kMaxInt16Cost = 4095;

// One pixel of NV vertical/diagonal paths and the horizontal one: prev[k] is path k's
// predecessor vector (padded: prev[k][0] = prev[k][n + 1] = +inf, values at 1..n) with
// minimum m[k]; a path without a predecessor reads a zero vector with m = 0, for which
// the step gives min(min(0, p2), min(0, inf) + p1) = 0 and L = (C + 0) - 0 = C exactly.
// Writes L into out[k] (padded the same way) and its minimum into mins[k]. The first
// visit of a pixel (kSecond false) stores the sum of its NV + 1 paths into part; the
// second writes part + that sum into dst (part and dst may be the same array).
template <typename T, int NV, bool kSecond>
inline void Pixel(const T* const* __restrict prev, const T* __restrict m,
                  const T* __restrict c, T* const* __restrict out, T* __restrict mins, T* part,
                  T* dst, int64_t n, T p1, T p2) {
  constexpr int K = NV + 1;
  T mp2[K], mk[K];
  const T* pv[K];
  T* ov[K];
  for (int k = 0; k < K; ++k) {
    mk[k] = m[k];
    mp2[k] = m[k] + p2;
    pv[k] = prev[k];
    ov[k] = out[k];
  }
  const T inf = Pad<T>::kValue;
  T mn0 = inf, mn1 = inf, mn2 = inf, mn3 = inf;
#pragma omp simd reduction(min : mn0, mn1, mn2, mn3)
  for (int64_t d = 0; d < n; ++d) {
    const T cd = c[d];
    T v[K];
    for (int k = 0; k < K; ++k) {
      const T* q = pv[k];
      const T nb = std::min(q[d + 2], q[d]) + p1;
      const T best = std::min(std::min(q[d + 1], mp2[k]), nb);
      v[k] = (cd + best) - mk[k];
      ov[k][d + 1] = v[k];
    }
    mn0 = std::min(mn0, v[0]);
    mn1 = std::min(mn1, v[1]);
    if constexpr (K == 4) {
      mn2 = std::min(mn2, v[2]);
      mn3 = std::min(mn3, v[3]);
      if constexpr (kSecond) {
        dst[d] = (((part[d] + v[0]) + v[1]) + v[2]) + v[3];
      } else {
        part[d] = ((v[0] + v[1]) + v[2]) + v[3];
      }
    } else {
      if constexpr (kSecond) {
        dst[d] = (part[d] + v[0]) + v[1];
      } else {
        part[d] = v[0] + v[1];
      }
    }
  }
  mins[0] = mn0;
  mins[1] = mn1;
  if constexpr (K == 4) {
    mins[2] = mn2;
    mins[3] = mn3;
  }
}

#if defined(__AVX2__)

// Pixel for int16 costs (AVX2, 16 lanes): the same recursion in exact integer arithmetic.
// First visit: the int16 sum of the paths into part; second: part + sum, widened to
// float32 (exact), into dst, or back into part when dst is null (disparity modes).
template <int NV, bool kSecond>
inline void PixelInt(const int16_t* const* __restrict prev, const int16_t* __restrict m,
                     const int16_t* __restrict c, int16_t* const* __restrict out,
                     int16_t* __restrict mins, int16_t* __restrict part, float* __restrict dst,
                     int64_t n, int16_t p1, int16_t p2) {
  constexpr int K = NV + 1;
  __m256i mk[K], mp2[K], mn[K];
  const __m256i p1v = _mm256_set1_epi16(p1);
  for (int k = 0; k < K; ++k) {
    mk[k] = _mm256_set1_epi16(m[k]);
    mp2[k] = _mm256_set1_epi16(static_cast<int16_t>(m[k] + p2));
    mn[k] = _mm256_set1_epi16(Pad<int16_t>::kValue);
  }
  int64_t d = 0;
  for (; d + 16 <= n; d += 16) {
    const __m256i cd = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c + d));
    __m256i sum = _mm256_setzero_si256();
    for (int k = 0; k < K; ++k) {
      const int16_t* q = prev[k] + d;
      const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 1));
      const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q));
      const __m256i hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 2));
      const __m256i nb = _mm256_add_epi16(_mm256_min_epi16(lo, hi), p1v);
      const __m256i best = _mm256_min_epi16(_mm256_min_epi16(a, mp2[k]), nb);
      const __m256i v = _mm256_sub_epi16(_mm256_add_epi16(cd, best), mk[k]);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[k] + d + 1), v);
      mn[k] = _mm256_min_epi16(mn[k], v);
      sum = _mm256_add_epi16(sum, v);
    }
    if constexpr (kSecond) {
      sum = _mm256_add_epi16(sum, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(part + d)));
      if (dst == nullptr) {  // disparity modes: the int16 totals into part
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(part + d), sum);
        continue;
      }
      const __m128i s0 = _mm256_castsi256_si128(sum), s1 = _mm256_extracti128_si256(sum, 1);
      _mm256_storeu_ps(dst + d, _mm256_cvtepi32_ps(_mm256_cvtepi16_epi32(s0)));
      _mm256_storeu_ps(dst + d + 8, _mm256_cvtepi32_ps(_mm256_cvtepi16_epi32(s1)));
    } else {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(part + d), sum);
    }
  }
  for (int k = 0; k < K; ++k) {  // values are >= 0: the unsigned minpos is the minimum
    const __m128i h = _mm_min_epi16(_mm256_castsi256_si128(mn[k]),
                                    _mm256_extracti128_si256(mn[k], 1));
    mins[k] = static_cast<int16_t>(_mm_cvtsi128_si32(_mm_minpos_epu16(h)) & 0xffff);
  }
  for (; d < n; ++d) {  // the tail (n not a multiple of 16)
    int sum = 0;
    for (int k = 0; k < K; ++k) {
      const int16_t* q = prev[k];
      const int nb = std::min(q[d + 2], q[d]) + p1;
      const int best = std::min(std::min<int>(q[d + 1], m[k] + p2), nb);
      const auto v = static_cast<int16_t>(c[d] + best - m[k]);
      out[k][d + 1] = v;
      mins[k] = std::min(mins[k], v);
      sum += v;
    }
    if constexpr (kSecond) {
      if (dst == nullptr) {
        part[d] = static_cast<int16_t>(sum + part[d]);
      } else {
        dst[d] = static_cast<float>(sum + part[d]);
      }
    } else {
      part[d] = static_cast<int16_t>(sum);
    }
  }
}
#endif

#if defined(__AVX2__)
// Whether every c[i] is an integer in [0, cmax]; if so, icost holds them as int16.
inline bool ToInt16(const float* c, int64_t n, int cmax, int16_t* o) {
  if (cmax < 0) return false;
  const __m256 hi = _mm256_set1_ps(static_cast<float>(cmax));
  const __m256 zero = _mm256_setzero_ps();
  int64_t i = 0;
  constexpr int64_t kBlock = 4096;  // stop early on non-integer costs
  while (i < n) {
    const int64_t stop = std::min(n, i + kBlock);
    __m256 bad = _mm256_setzero_ps();
    for (; i + 16 <= stop; i += 16) {
      const __m256 a = _mm256_loadu_ps(c + i), b = _mm256_loadu_ps(c + i + 8);
      const __m256i ia = _mm256_cvttps_epi32(a), ib = _mm256_cvttps_epi32(b);
      // not an integer (NaN included), or outside [0, cmax]
      bad = _mm256_or_ps(bad, _mm256_cmp_ps(_mm256_cvtepi32_ps(ia), a, _CMP_NEQ_UQ));
      bad = _mm256_or_ps(bad, _mm256_cmp_ps(_mm256_cvtepi32_ps(ib), b, _CMP_NEQ_UQ));
      bad = _mm256_or_ps(bad, _mm256_cmp_ps(a, zero, _CMP_LT_OQ));
      bad = _mm256_or_ps(bad, _mm256_cmp_ps(b, zero, _CMP_LT_OQ));
      bad = _mm256_or_ps(bad, _mm256_cmp_ps(a, hi, _CMP_GT_OQ));
      bad = _mm256_or_ps(bad, _mm256_cmp_ps(b, hi, _CMP_GT_OQ));
      // packs interleaves 128-bit lanes: a0-3 b0-3 a4-7 b4-7 -> reorder the 64-bit quarters
      const __m256i packed = _mm256_permute4x64_epi64(_mm256_packs_epi32(ia, ib), 0xd8);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + i), packed);
    }
    if (_mm256_movemask_ps(bad) != 0) return false;
    for (; i < stop; ++i) {  // the tail
      const float v = c[i];
      if (!(v >= 0.0f && v <= static_cast<float>(cmax)) || v != std::floor(v)) return false;
      o[i] = static_cast<int16_t>(v);
    }
  }
  return true;
}
#endif

// T: the type the recursion runs in (the storage float type, or int16_t for small
// integer costs); S: the output's (float / double).
template <typename T, typename S>
struct Problem {
  const T* cost;  // (h, w, n)
  // int16 recursion: the float32 costs, converted row by row into `cost` at a row's first
  // visit (null: `cost` is the input itself); `failed` is set when a row is not exactly
  // representable (see ToInt16), and the caller then runs the float recursion instead
  const float* fcost;
  int cmax;
  std::atomic<bool>* failed;
  T* part;        // (h, w, n): the first pass's path sums per row (may alias out, mode 0)
  S* out;         // mode 0: the aggregated volume (h, w, n); else the disparities (h, w)
  int64_t h, w, n;
  T p1, p2;
  int nvert;  // 3 (8 paths: dx = 0, 1, -1) or 1 (4 paths: dx = 0)
  int mode;   // 0: aggregated costs; 1: argmin + parabolic sub-pixel; 2: argmin
};

// The disparity of one pixel from its aggregated costs, as jaxlab.stereo.subpixel_argmin
// computes it in the same type: the first minimum d, and for 0 < d < n - 1 with
// denom = cm - 2 c0 + cp > 0 the offset (cm - cp) / (2 denom).
template <typename S>
inline S Refine(S cm, S c0, S cp, int64_t d) {
  const S denom = (cm - S(2) * c0) + cp;
  if (!(denom > S(0))) return static_cast<S>(d);
  return static_cast<S>(d) + (cm - cp) / (S(2) * denom);
}

template <typename S>
inline S Subpixel(const S* a, int64_t d, int64_t n, int mode) {
  if (mode == 2 || d == 0 || d == n - 1) return static_cast<S>(d);
  return Refine(a[d - 1], a[d], a[d + 1], d);
}

template <typename S>
inline S Disparity(const S* a, int64_t n, int mode) {
  S lo = a[0];
#pragma omp simd reduction(min : lo)
  for (int64_t k = 0; k < n; ++k) lo = std::min(lo, a[k]);
  int64_t d = 0;
  while (a[d] != lo) ++d;  // the first minimum (costs are finite)
  return Subpixel(a, d, n, mode);
}

#if defined(__AVX2__)
// The same from exact non-negative int16 sums (their float32 values are the same integers).
inline float DisparityInt(const int16_t* a, int64_t n, int mode) {
  __m256i vmin = _mm256_set1_epi16(0x7fff);
  int64_t k = 0;
  for (; k + 16 <= n; k += 16) {
    vmin = _mm256_min_epi16(vmin, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + k)));
  }
  const __m128i h = _mm_min_epi16(_mm256_castsi256_si128(vmin), _mm256_extracti128_si256(vmin, 1));
  auto lo = static_cast<int16_t>(_mm_cvtsi128_si32(_mm_minpos_epu16(h)) & 0xffff);
  for (; k < n; ++k) lo = std::min(lo, a[k]);
  int64_t d = 0;
  const __m256i lov = _mm256_set1_epi16(lo);
  for (; d + 16 <= n; d += 16) {
    const __m256i eq =
        _mm256_cmpeq_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + d)), lov);
    const auto mask = static_cast<uint32_t>(_mm256_movemask_epi8(eq));
    if (mask != 0) {
      d += __builtin_ctz(mask) / 2;
      break;
    }
  }
  while (a[d] != lo) ++d;
  if (mode == 2 || d == 0 || d == n - 1) return static_cast<float>(d);
  return Refine(static_cast<float>(a[d - 1]), static_cast<float>(a[d]),
                static_cast<float>(a[d + 1]), d);
}
#endif

// One pass (downward or upward) over a range of rows, with its row buffers.
template <typename T, typename S>
class Pass {
 public:
  Pass(const Problem<T, S>& p, bool down) : p_(p), down_(down), dp_(p.n + 2) {
    const T inf = Pad<T>::kValue;
    for (int k = 0; k < 2 * p.nvert; ++k) {
      rows_[k].assign(static_cast<size_t>(p.w * dp_), inf);
      mins_[k].assign(static_cast<size_t>(p.w), inf);
    }
    for (auto& hb : hbuf_) hb.assign(static_cast<size_t>(dp_), inf);
    zero_.assign(static_cast<size_t>(dp_), T(0));
    zero_[0] = zero_[dp_ - 1] = inf;
    tmp_.assign(static_cast<size_t>(p.n), S(0));
  }

  // Row index i of the pass (0 = its first row: top row downward, bottom row upward);
  // `second`: the other pass has visited this row already.
  void Row(int64_t i, bool second) {
#if defined(__AVX2__)
    if constexpr (std::is_integral_v<T>) {
      if (!second) {
        const int64_t y = down_ ? i : p_.h - 1 - i, row = p_.w * p_.n;
        if (!ToInt16(p_.fcost + y * row, row, p_.cmax, const_cast<T*>(p_.cost) + y * row)) {
          p_.failed->store(true, std::memory_order_relaxed);
        }
      }
    }
#endif
    if (p_.nvert == 3) {
      second ? RowImpl<3, true>(i) : RowImpl<3, false>(i);
    } else {
      second ? RowImpl<1, true>(i) : RowImpl<1, false>(i);
    }
  }

 private:
  template <int NV, bool kSecond>
  void RowImpl(int64_t i) {
    const Problem<T, S>& p = p_;
    const int64_t y = down_ ? i : p.h - 1 - i;
    const int64_t w = p.w, n = p.n, dp = dp_;
    const T* crow = p.cost + y * w * n;
    T* prow = p.part + y * w * n;
    const int cur = static_cast<int>(i & 1), prv = 1 - cur;
    const T* zero = zero_.data();
    const T* prev[NV + 1];
    T* out[NV + 1];
    T m[NV + 1], mins[NV + 1];
    int hc = 0;
    for (int64_t j = 0; j < w; ++j) {
      // downward: left to right (horizontal predecessor x - 1); upward: right to left
      const int64_t x = down_ ? j : w - 1 - j;
      for (int k = 0; k < NV; ++k) {
        const int64_t px = x - kDx[k];
        const bool start = i == 0 || px < 0 || px >= w;
        prev[k] = start ? zero : rows_[2 * k + prv].data() + px * dp;
        m[k] = start ? T(0) : mins_[2 * k + prv][px];
        out[k] = rows_[2 * k + cur].data() + x * dp;
      }
      prev[NV] = j == 0 ? zero : hbuf_[1 - hc].data();
      m[NV] = j == 0 ? T(0) : hmin_;
      out[NV] = hbuf_[hc].data();
      T* part = prow + x * n;
      if constexpr (std::is_integral_v<T>) {
#if defined(__AVX2__)
        S* dst = p.mode == 0 ? p.out + (y * w + x) * n : nullptr;
        PixelInt<NV, kSecond>(prev, m, crow + x * n, out, mins, part, dst, n, p.p1, p.p2);
        if (kSecond && p.mode != 0) p.out[y * w + x] = DisparityInt(part, n, p.mode);
#endif
      } else {
        S* dst = p.mode == 0 ? p.out + (y * w + x) * n : tmp_.data();
        Pixel<T, NV, kSecond>(prev, m, crow + x * n, out, mins, part, dst, n, p.p1, p.p2);
        if (kSecond && p.mode != 0) p.out[y * w + x] = Disparity(tmp_.data(), n, p.mode);
      }
      for (int k = 0; k < NV; ++k) mins_[2 * k + cur][x] = mins[k];
      hmin_ = mins[NV];
      hc = 1 - hc;
    }
  }

  const Problem<T, S>& p_;
  bool down_;
  int64_t dp_;
  std::vector<T> rows_[6];  // [2k + parity]: path k's row buffer, alternating rows
  std::vector<T> mins_[6];
  std::vector<T> hbuf_[2];
  std::vector<T> zero_;  // the predecessor of a path's first pixel (see Pixel)
  std::vector<S> tmp_;   // one pixel's aggregated costs (modes 1, 2)
  T hmin_ = 0;
};

class Barrier {
 public:
  void Arrive() {
    std::unique_lock<std::mutex> lock(mu_);
    if (++count_ == 2) {
      cv_.notify_all();
    } else {
      cv_.wait(lock, [this] { return count_ >= 2; });
    }
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int count_ = 0;
};

int AvailableCpus() {
#if defined(__linux__)
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return CPU_COUNT(&set);
#endif
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

template <typename T, typename S>
void Serial(const Problem<T, S>& p) {
  Pass<T, S> down(p, true), up(p, false);
  for (int64_t i = 0; i < p.h; ++i) down.Row(i, false);
  if (p.failed != nullptr && p.failed->load()) return;
  for (int64_t i = 0; i < p.h; ++i) up.Row(i, true);
}

// Returns false (nothing written) when the second thread cannot be started.
template <typename T, typename S>
bool TwoThreads(const Problem<T, S>& p) {
  const int64_t half = p.h / 2;  // downward pass stores rows [0, half), upward [half, h)
  Barrier barrier;
  auto work = [&p, &barrier, half](bool down) {
    Pass<T, S> pass(p, down);
    const int64_t first = down ? half : p.h - half;
    for (int64_t i = 0; i < first; ++i) pass.Row(i, false);
    barrier.Arrive();  // (orders the other thread's stores and `failed` before what follows)
    if (p.failed != nullptr && p.failed->load()) return;
    for (int64_t i = first; i < p.h; ++i) pass.Row(i, true);
  };
  std::thread other;
  try {
    other = std::thread(work, false);
  } catch (const std::system_error&) {
    return false;
  }
  work(true);
  other.join();
  return true;
}


// A scratch buffer kept per calling thread between calls (its pages stay mapped: fresh
// ones would cost a page fault each, several ms for an image's cost volume).
template <typename T>
T* Scratch(int slot, int64_t n) {
  thread_local std::vector<T> buf[2];
  if (static_cast<int64_t>(buf[slot].size()) < n) buf[slot].resize(static_cast<size_t>(n));
  return buf[slot].data();
}

template <ffi::DataType DT>
ffi::Error SgmImpl(ffi::Buffer<DT> cost, ffi::ResultBuffer<DT> out, double p1, double p2,
                   int32_t paths, int32_t threads, int32_t mode) {
  using T = ffi::NativeType<DT>;
  auto dims = cost.dimensions();
  if (dims.size() < 3) return ffi::Error::InvalidArgument("stereo_sgm: cost is (..., H, W, D)");
  if (paths != 4 && paths != 8) return ffi::Error::InvalidArgument("stereo_sgm: paths is 4 or 8");
  if (threads < 0) return ffi::Error::InvalidArgument("stereo_sgm: threads >= 0");
  if (mode < 0 || mode > 2) return ffi::Error::InvalidArgument("stereo_sgm: mode is 0, 1 or 2");
  const int64_t r = dims.size();
  const int64_t h = dims[r - 3], w = dims[r - 2], n = dims[r - 1];
  int64_t batch = 1;
  for (int64_t k = 0; k < r - 3; ++k) batch *= dims[k];
  const int64_t vol = h * w * n, osize = mode == 0 ? vol : h * w;
  if (static_cast<int64_t>(out->element_count()) != batch * osize) {
    return ffi::Error::InvalidArgument("stereo_sgm: output size does not match the mode");
  }
  if (vol == 0 || batch == 0) return ffi::Error::Success();
  int nt = threads;
  if (nt == 0) nt = (h >= 8 && vol >= (int64_t{1} << 16) && AvailableCpus() >= 2) ? 2 : 1;
  nt = std::min<int64_t>(nt, std::min<int64_t>(2, h));
  const int nvert = paths == 8 ? 3 : 1;
  const bool int_pen = p1 == std::floor(p1) && p2 == std::floor(p2) && p2 <= kMaxInt16Cost;
  for (int64_t b = 0; b < batch; ++b) {
    const T* c = cost.typed_data() + b * vol;
    T* o = out->typed_data() + b * osize;
    bool done = false;
#if defined(__AVX2__)
    if constexpr (std::is_same_v<T, float>) {
      if (int_pen) {
        std::atomic<bool> failed{false};
        Problem<int16_t, T> p{Scratch<int16_t>(0, vol),
                              c,
                              static_cast<int>(kMaxInt16Cost - p2),
                              &failed,
                              Scratch<int16_t>(1, vol),
                              o,
                              h,
                              w,
                              n,
                              static_cast<int16_t>(p1),
                              static_cast<int16_t>(p2),
                              nvert,
                              mode};
        if (nt < 2 || !TwoThreads(p)) Serial(p);
        done = !failed.load();
      }
    }
#endif
    if (!done) {
      T* part = mode == 0 ? o : Scratch<T>(0, vol);
      Problem<T, T> p{c,    nullptr, 0, nullptr, part, o, h, w, n, static_cast<T>(p1),
                      static_cast<T>(p2), nvert, mode};
      if (nt < 2 || !TwoThreads(p)) Serial(p);
    }
  }
  return ffi::Error::Success();
}

}  // namespace

#define STEREO_SGM_HANDLER(NAME, DT)                                  \
  XLA_FFI_DEFINE_HANDLER_SYMBOL(NAME, SgmImpl<DT>,                    \
                                ffi::Ffi::Bind()                      \
                                    .Arg<ffi::Buffer<DT>>()           \
                                    .Ret<ffi::Buffer<DT>>()           \
                                    .Attr<double>("p1")               \
                                    .Attr<double>("p2")               \
                                    .Attr<int32_t>("paths")           \
                                    .Attr<int32_t>("threads")         \
                                    .Attr<int32_t>("mode"));

STEREO_SGM_HANDLER(StereoSgmF32, ffi::F32)
STEREO_SGM_HANDLER(StereoSgmF64, ffi::F64)
