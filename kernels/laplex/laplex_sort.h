// Radix-sort pieces shared by the LAPLEX CPU kernels: order-preserving unsigned keys
// (laplex_plan.cc's argsort) and, for the fresh symmetric pass (laplex_fused.cc),
// a sort that carries the values with the keys and the way back (PutBack).
//
// SortCarry(s, x, n): the anchors s sorted (stable), the values x and each element's
// slot after (C) carried along, without one random access:
//   (A) keys' span [kmin, kmax] (and whether s is already nondecreasing);
//   (B) per-thread histograms over 2^kFineBits fine bins of (k - kmin), from which
//       consecutive fine bins are grouped into about kCoarse<U> buckets of similar size
//       (so skewed distributions, e.g. floats over many binades, still give small,
//       cache-resident buckets);
//   (C) one stable scatter of (key, value) records into the buckets (sequential reads,
//       one write stream per bucket), per-thread offsets;
//   (D) per bucket, in cache, an LSD radix sort on the bits the bucket actually spans
//       (digits of <= kDigitBits bits, evenly split; constant digits skipped; insertion
//       sort for tiny buckets), the records then split into anchors and values.
// The carried index of an element is its slot after (C) (its bucket's stretch holds
// the bucket's elements in their original order: the scatter is stable), so
// PutBack(c, src, val, acc, out), out[i] (+)= the value of original element i given
// in sorted order, undoes (D) inside each bucket (a scatter within the bucket's
// cache-resident stretch) and then (C) by the same walk over the original order that
// scattered: each element's bucket from its anchor, read from that bucket's next slot
// (sequential reads from the buckets, sequential writes, no random access).
// Threads: laplex_par::Threads (JAXLAB_LAPLEX_THREADS=k forces k at any size).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <vector>

#include "laplex_mem.h"
#include "laplex_par.h"

namespace laplex_sort {

using laplex_mem::Scratch;

inline uint32_t OrderKey(float x) {
  x = x + 0.0f;  // -0.0 -> +0.0
  uint32_t u;
  std::memcpy(&u, &x, sizeof(u));
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

inline uint64_t OrderKey(double x) {
  x = x + 0.0;
  uint64_t u;
  std::memcpy(&u, &x, sizeof(u));
  return (u & 0x8000000000000000ull) ? ~u : (u | 0x8000000000000000ull);
}

// the inverse of OrderKey (-0.0 comes back as +0.0)
inline float FromKey(uint32_t k) {
  const uint32_t u = (k & 0x80000000u) ? (k & 0x7fffffffu) : ~k;
  float x;
  std::memcpy(&x, &u, sizeof(x));
  return x;
}

inline double FromKey(uint64_t k) {
  const uint64_t u = (k & 0x8000000000000000ull) ? (k & 0x7fffffffffffffffull) : ~k;
  double x;
  std::memcpy(&x, &u, sizeof(x));
  return x;
}

// Per-thread bucket counts `cnt` (nt x nb, row t = thread t) -> in place, each thread's
// first output slot per bucket (buckets in order, threads in order within a bucket, so
// a scatter through them is stable); `start` (nb + 1) gets the bucket starts. Returns the
// largest bucket's size.
inline int64_t BucketOffsets(std::vector<int64_t>& cnt, int nt, int64_t nb,
                             std::vector<int64_t>& start) {
  start.assign(static_cast<size_t>(nb + 1), 0);
  int64_t acc = 0, biggest = 0;
  for (int64_t b = 0; b < nb; ++b) {
    start[b] = acc;
    for (int t = 0; t < nt; ++t) {
      const int64_t c = cnt[t * nb + b];
      cnt[t * nb + b] = acc;
      acc += c;
    }
    biggest = std::max(biggest, acc - start[b]);
  }
  start[nb] = acc;
  return biggest;
}

template <typename U>
inline int BitLength(U v) {
  int b = 0;
  while (v != 0) {
    v >>= 1;
    ++b;
  }
  return b;
}

constexpr int kFineBits = 16;
// 256 buckets: (C) writes and PutBack reads one stream per bucket, and past ~512 streams
// (the 512 lines of a 32 KiB L1) both slow down 2-3x (one thread, N = 1e7 float32, CPU
// time: scatter 62 -> 26 ms, PutBack's walk 56 -> 19 ms going from 2048 to 256 buckets;
// the in-bucket sorts, ~40k records of 8 bytes in L2, cost the same 47-50 ms). A
// write-combining buffer per bucket instead did not help at 2048 (and cost at 512).
// Float64's 16-byte records: 512 buckets (the in-bucket sorts of ~20k records stay in
// L2; one thread, N = 1e7, 256 -> 512 buckets: sorts 93-95 -> 85 ms, scatter the same).
template <typename U>
constexpr int64_t kCoarse = sizeof(U) == 4 ? 256 : 512;
constexpr int kDigitBits = 11;

// an anchor's order key with its value, moved as one (one write stream per bucket in
// the scatter instead of two)
template <typename U, typename S>
struct KeyVal {
  U k;
  S x;
};

// stable LSD radix sort of (kv, ix)[0, m) on bits [0, bits) of kv.k - base, with the
// buffers tkv / ti (m each); the result ends in kv / ix
template <typename U, typename S>
void LsdCarry(KeyVal<U, S>* kv, int32_t* ix, int64_t m, U base, int bits, KeyVal<U, S>* tkv,
              int32_t* ti) {
  if (m < 2 || bits == 0) return;
  if (m <= 32) {  // insertion sort (stable)
    for (int64_t i = 1; i < m; ++i) {
      const KeyVal<U, S> e = kv[i];
      const int32_t iv = ix[i];
      int64_t j = i;
      for (; j > 0 && kv[j - 1].k > e.k; --j) {
        kv[j] = kv[j - 1];
        ix[j] = ix[j - 1];
      }
      kv[j] = e;
      ix[j] = iv;
    }
    return;
  }
  const int dmax = m >= (int64_t{1} << kDigitBits) ? kDigitBits : 8;  // histogram <= m
  const int passes = (bits + dmax - 1) / dmax;
  const int dw = (bits + passes - 1) / passes;
  const U mask = (U(1) << dw) - 1;
  int64_t hist[int64_t{1} << kDigitBits];
  KeyVal<U, S>* ka = kv;
  int32_t* ia = ix;
  KeyVal<U, S>* kb = tkv;
  int32_t* ib = ti;
  for (int sh = 0; sh < bits; sh += dw) {
    std::fill(hist, hist + (int64_t{1} << dw), int64_t{0});
    for (int64_t i = 0; i < m; ++i) ++hist[((ka[i].k - base) >> sh) & mask];
    bool trivial = false;
    for (int64_t d = 0; d <= static_cast<int64_t>(mask); ++d) trivial |= hist[d] == m;
    if (trivial) continue;
    int64_t off = 0;
    for (int64_t d = 0; d <= static_cast<int64_t>(mask); ++d) {
      const int64_t c = hist[d];
      hist[d] = off;
      off += c;
    }
    for (int64_t i = 0; i < m; ++i) {
      const int64_t dst = hist[((ka[i].k - base) >> sh) & mask]++;
      kb[dst] = ka[i];
      ib[dst] = ia[i];
    }
    std::swap(ka, kb);
    std::swap(ia, ib);
  }
  if (ka != kv) {
    std::memcpy(kv, ka, sizeof(KeyVal<U, S>) * m);
    std::memcpy(ix, ia, sizeof(int32_t) * m);
  }
}

// the result of SortCarry: `sorted` (no copies made) when s was already nondecreasing
template <typename S>
struct Carried {
  using U = decltype(OrderKey(S()));
  bool sorted = false;
  Scratch<S> s;          // anchors, nondecreasing
  Scratch<S> x;          // values in the same order
  Scratch<int32_t> idx;  // each element's slot after the bucket scatter (C)
  // what PutBack needs to repeat (C)'s walk: threads, their ranges of the original
  // order and first slots per bucket, the fine-bin -> bucket table and key offset
  int nt = 1;
  std::vector<int64_t> lo, first;
  std::vector<uint16_t> lut;
  U kmin = 0;
  int fshift = 0;
};

template <typename S>
Carried<S> SortCarry(const S* src, const S* x, int64_t n) {
  using U = decltype(OrderKey(S()));
  Carried<S> out;
  if (n == 0) {
    out.sorted = true;
    return out;
  }
  const int nt = laplex_par::Threads(n, n);
  std::vector<int64_t> lo(nt + 1);
  for (int t = 0; t <= nt; ++t) lo[t] = n * t / nt;
  // (A) span and sortedness
  std::vector<U> tmin(nt), tmax(nt);
  std::vector<char> tsorted(nt);
  laplex_par::Run(nt, [&](int t) {
    U mn = ~U(0), mx = 0;
    bool ok = true;
    if constexpr (sizeof(U) == 4) {
      // no value carried from one element to the next (each key compared with its
      // predecessor's, recomputed), so the loop vectorises (float32: 11.9 -> 5.5 ms at
      // N = 1e7 on one thread; float64 keys ran slower this way, 12 -> 15 ms)
      U bad = 0;
      for (int64_t i = std::max<int64_t>(lo[t], 1); i < lo[t + 1]; ++i) {
        const U k = OrderKey(src[i]);
        mn = std::min(mn, k);
        mx = std::max(mx, k);
        bad |= static_cast<U>(k < OrderKey(src[i - 1]));
      }
      if (lo[t] == 0 && lo[t + 1] > 0) {
        const U k = OrderKey(src[0]);
        mn = std::min(mn, k);
        mx = std::max(mx, k);
      }
      ok = bad == 0;
    } else {
      U prev = lo[t] > 0 ? OrderKey(src[lo[t] - 1]) : U(0);
      for (int64_t i = lo[t]; i < lo[t + 1]; ++i) {
        const U k = OrderKey(src[i]);
        mn = std::min(mn, k);
        mx = std::max(mx, k);
        ok &= k >= prev;
        prev = k;
      }
    }
    tmin[t] = mn;
    tmax[t] = mx;
    tsorted[t] = ok;
  });
  if (std::all_of(tsorted.begin(), tsorted.end(), [](char c) { return c != 0; })) {
    out.sorted = true;
    return out;
  }
  const U kmin = *std::min_element(tmin.begin(), tmin.end());
  const U kmax = *std::max_element(tmax.begin(), tmax.end());
  const int bits = BitLength<U>(kmax - kmin);
  const int fb = std::min(bits, kFineBits);
  const int fshift = bits - fb;
  const int64_t nf = int64_t{1} << fb;
  // (B) fine histograms, grouped into coarse buckets
  std::vector<uint32_t> fh(static_cast<size_t>(nt * nf), 0);
  laplex_par::Run(nt, [&](int t) {
    uint32_t* h = fh.data() + t * nf;
    for (int64_t i = lo[t]; i < lo[t + 1]; ++i) ++h[(OrderKey(src[i]) - kmin) >> fshift];
  });
  const int64_t target = std::max<int64_t>(64, n / kCoarse<U>);
  std::vector<uint16_t> lut(static_cast<size_t>(nf));
  std::vector<int64_t> bfirst;  // first fine bin of each bucket
  {
    int64_t cur = 0;
    bfirst.push_back(0);
    for (int64_t f = 0; f < nf; ++f) {
      int64_t c = 0;
      for (int t = 0; t < nt; ++t) c += fh[t * nf + f];
      if (cur > 0 && cur + c > target && bfirst.size() < 65535) {
        bfirst.push_back(f);
        cur = 0;
      }
      cur += c;
      lut[f] = static_cast<uint16_t>(bfirst.size() - 1);
    }
  }
  const int64_t nb = static_cast<int64_t>(bfirst.size());
  std::vector<int64_t> off(static_cast<size_t>(nt * nb), 0);
  for (int t = 0; t < nt; ++t) {
    for (int64_t f = 0; f < nf; ++f) off[t * nb + lut[f]] += fh[t * nf + f];
  }
  std::vector<int64_t> start;
  const int64_t biggest = BucketOffsets(off, nt, nb, start);
  out.first = off;  // (C)'s first slot per thread and bucket, for PutBack
  // (C) stable scatter of (key, value) pairs
  out.s = Scratch<S>(n);
  out.x = Scratch<S>(n);
  out.idx = Scratch<int32_t>(n);
  Scratch<KeyVal<U, S>> kv(n);
  int32_t* ix = out.idx.data();
  laplex_par::Run(nt, [&](int t) {
    int64_t* o = off.data() + t * nb;
    const uint16_t* lt = lut.data();
    KeyVal<U, S>* kp = kv.data();
    for (int64_t i = lo[t]; i < lo[t + 1]; ++i) {
      const U k = OrderKey(src[i]);
      kp[o[lt[(k - kmin) >> fshift]]++] = KeyVal<U, S>{k, x[i]};
    }
  });
  // (D) per bucket: LSD on the bits it spans, then the pairs split into anchors and values
  std::atomic<int64_t> next{0};
  laplex_par::Run(nt, [&](int) {
    Scratch<KeyVal<U, S>> tkv(static_cast<size_t>(biggest));
    Scratch<int32_t> ti(static_cast<size_t>(biggest));
    for (int64_t b = next.fetch_add(1); b < nb; b = next.fetch_add(1)) {
      const int64_t b0 = start[b], m = start[b + 1] - b0;
      if (m == 0) continue;
      KeyVal<U, S>* kb = kv.data() + b0;
      // each element's slot after (C), the carried index (set here, in cache, rather
      // than written as another stream by (C))
      for (int64_t i = 0; i < m; ++i) ix[b0 + i] = static_cast<int32_t>(b0 + i);
      U mn = kb[0].k, mx = kb[0].k;
      for (int64_t i = 1; i < m; ++i) {
        mn = std::min(mn, kb[i].k);
        mx = std::max(mx, kb[i].k);
      }
      LsdCarry<U, S>(kb, ix + b0, m, mn, BitLength<U>(mx - mn), tkv.data(), ti.data());
      S* so = out.s.data() + b0;
      S* xo = out.x.data() + b0;
      for (int64_t i = 0; i < m; ++i) {
        so[i] = FromKey(kb[i].k);
        xo[i] = kb[i].x;
      }
    }
  });
  out.nt = nt;
  out.lo = std::move(lo);
  out.lut = std::move(lut);
  out.kmin = kmin;
  out.fshift = fshift;
  return out;
}

// out[i] = (+= with acc) the value of original element i, for `val` in c's sorted
// order and `src` the anchors c sorted (see the top)
template <typename S>
void PutBack(const Carried<S>& c, const S* src, const S* val, int64_t n, bool acc, S* out) {
  using U = typename Carried<S>::U;
  if (n == 0) return;
  // undo (D): each value to its slot after (C), inside its bucket's stretch
  Scratch<S> slot(n);
  const int32_t* ix = c.idx.data();
  const int nt = c.nt;
  laplex_par::Run(nt, [&](int t) {
    S* sl = slot.data();
    for (int64_t j = n * t / nt, j1 = n * (t + 1) / nt; j < j1; ++j) sl[ix[j]] = val[j];
  });
  // undo (C): the original order walked as (C) walked it, each thread from its slots
  const int64_t nb = static_cast<int64_t>(c.first.size()) / nt;
  laplex_par::Run(nt, [&](int t) {
    std::vector<int64_t> o(c.first.begin() + t * nb, c.first.begin() + (t + 1) * nb);
    const uint16_t* lt = c.lut.data();
    const S* sl = slot.data();
    const U kmin = c.kmin;
    const int fshift = c.fshift;
    if (acc) {
      for (int64_t i = c.lo[t]; i < c.lo[t + 1]; ++i) {
        out[i] = static_cast<S>(out[i] + sl[o[lt[(OrderKey(src[i]) - kmin) >> fshift]]++]);
      }
    } else {
      for (int64_t i = c.lo[t]; i < c.lo[t + 1]; ++i) {
        out[i] = sl[o[lt[(OrderKey(src[i]) - kmin) >> fshift]]++];
      }
    }
  });
}

}  // namespace laplex_sort
