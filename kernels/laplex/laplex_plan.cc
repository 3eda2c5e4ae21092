// LAPLEX sort plan on CPU as an XLA FFI custom call: stable argsorts of both anchor
// sets (radix sort on order-preserving unsigned keys: one bucket scatter, then an
// in-cache LSD sort per bucket, on all cores, see Argsort) and merge ranks by a
// linear merge (split over the cores), per head.
//
//   perm_s (H, N): s[h, perm_s[h]] nondecreasing (stable)
//   rank_t (H, M): #{s[h] <= t[h, i]};  perm_t, rank_s likewise with roles swapped
//   presorted (H,): 1 where perm_s[h] is the identity
//
// With `same` (t and s are one array) the second sort is skipped. Inputs are
// finite (checked by the caller); -0.0 is ordered as +0.0.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <vector>

#include "laplex_mem.h"
#include "laplex_par.h"
#include "laplex_sort.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;
using laplex_mem::AdviseHuge;
using laplex_mem::Scratch;
using laplex_sort::BitLength;
using laplex_sort::OrderKey;

namespace {

// Stable argsort of x[0..n) into perm, returning the sorted keys, in two steps over
// the keys' span [kmin, kmax]: (1) one stable scatter into up to 2^kBucketBits buckets
// by the top bits of k - kmin (per-thread histograms over contiguous input chunks, so
// thread t's elements land after those of threads < t in every bucket), (2) each
// bucket, now in cache, sorted by an LSD radix sort (8 bits per pass, constant digits
// skipped) on the remaining low bits, buckets claimed by the threads from a counter.
// Threads: laplex_par::Threads (JAXLAB_LAPLEX_THREADS=k forces k at any size).
constexpr int kBucketBits = 11;

// stable LSD radix sort of (k[i], ix[i]), i < m, by bits [0, bits) of k - base, using
// the buffers tk / ti (m elements each); the result ends in k / ix
template <typename U>
void BucketSort(U* k, int32_t* ix, int64_t m, U base, int bits, U* tk, int32_t* ti) {
  if (m < 2 || bits == 0) return;
  if (m <= 32) {  // insertion sort (stable)
    for (int64_t i = 1; i < m; ++i) {
      const U kv = k[i];
      const int32_t iv = ix[i];
      int64_t j = i;
      for (; j > 0 && k[j - 1] > kv; --j) {
        k[j] = k[j - 1];
        ix[j] = ix[j - 1];
      }
      k[j] = kv;
      ix[j] = iv;
    }
    return;
  }
  int64_t hist[256];
  U* ka = k;
  int32_t* ia = ix;
  U* kb = tk;
  int32_t* ib = ti;
  for (int sh = 0; sh < bits; sh += 8) {
    std::fill(hist, hist + 256, int64_t{0});
    for (int64_t i = 0; i < m; ++i) ++hist[((ka[i] - base) >> sh) & 0xff];
    bool trivial = false;
    for (int d = 0; d < 256; ++d) trivial |= hist[d] == m;
    if (trivial) continue;
    int64_t off = 0;
    for (int d = 0; d < 256; ++d) {
      const int64_t c = hist[d];
      hist[d] = off;
      off += c;
    }
    for (int64_t i = 0; i < m; ++i) {
      const int64_t dst = hist[((ka[i] - base) >> sh) & 0xff]++;
      kb[dst] = ka[i];
      ib[dst] = ia[i];
    }
    std::swap(ka, kb);
    std::swap(ia, ib);
  }
  if (ka != k) {
    std::memcpy(k, ka, sizeof(U) * m);
    std::memcpy(ix, ia, sizeof(int32_t) * m);
  }
}

template <typename T, typename U = decltype(OrderKey(T()))>
Scratch<U> Argsort(const T* x, int64_t n, int32_t* perm) {
  Scratch<U> key(n), raw(n);
  if (n == 0) return key;
  const int nt = laplex_par::Threads(n, n);
  std::vector<int64_t> lo(nt + 1);
  for (int t = 0; t <= nt; ++t) lo[t] = n * t / nt;
  std::vector<U> tmin(nt), tmax(nt);
  laplex_par::Run(nt, [&](int t) {
    U mn = ~U(0), mx = 0;
    for (int64_t i = lo[t]; i < lo[t + 1]; ++i) {
      const U k = OrderKey(x[i]);
      raw[i] = k;
      mn = std::min(mn, k);
      mx = std::max(mx, k);
    }
    tmin[t] = mn;
    tmax[t] = mx;
  });
  const U kmin = *std::min_element(tmin.begin(), tmin.end());
  const U kmax = *std::max_element(tmax.begin(), tmax.end());
  const int bits = BitLength<U>(kmax - kmin);
  const int bb = std::min(bits, kBucketBits);
  const int shift = bits - bb;
  const int64_t nb = int64_t{1} << bb;
  std::vector<int64_t> hist(static_cast<size_t>(nt * nb), 0);
  laplex_par::Run(nt, [&](int t) {
    int64_t* h = hist.data() + t * nb;
    for (int64_t i = lo[t]; i < lo[t + 1]; ++i) ++h[(raw[i] - kmin) >> shift];
  });
  std::vector<int64_t> start;
  const int64_t biggest = laplex_sort::BucketOffsets(hist, nt, nb, start);
  laplex_par::Run(nt, [&](int t) {
    int64_t* h = hist.data() + t * nb;
    for (int64_t i = lo[t]; i < lo[t + 1]; ++i) {
      const U k = raw[i];
      const int64_t dst = h[(k - kmin) >> shift]++;
      key[dst] = k;
      perm[dst] = static_cast<int32_t>(i);
    }
  });
  if (shift > 0) {
    std::atomic<int64_t> next{0};
    laplex_par::Run(nt, [&](int) {
      Scratch<U> tk(static_cast<size_t>(biggest));
      Scratch<int32_t> ti(static_cast<size_t>(biggest));
      for (int64_t b = next.fetch_add(1); b < nb; b = next.fetch_add(1)) {
        const int64_t m = start[b + 1] - start[b];
        BucketSort(key.data() + start[b], perm + start[b], m, kmin, shift, tk.data(), ti.data());
      }
    });
  }
  return key;  // the sorted keys
}

// rank[perm_t[q]] = #{src <= tgt} by one merge of the sorted keys (order-preserving)
template <typename U>
void Ranks(const Scratch<U>& tkey, const int32_t* perm_t, int64_t m,
           const Scratch<U>& skey, int64_t n, int32_t* rank) {
  const int nt = laplex_par::Threads(m, m);
  laplex_par::Run(nt, [&](int t) {
    const int64_t q0 = m * t / nt, q1 = m * (t + 1) / nt;
    if (q0 >= q1) return;
    const U* sk = skey.data();
    int64_t j = std::upper_bound(sk, sk + n, tkey[q0]) - sk;
    for (int64_t q = q0; q < q1; ++q) {
      const U v = tkey[q];
      while (j < n && sk[j] <= v) ++j;
      rank[perm_t[q]] = static_cast<int32_t>(j);
    }
  });
}

template <ffi::DataType R>
ffi::Error PlanImpl(ffi::Buffer<R> t, ffi::Buffer<R> s, ffi::ResultBuffer<ffi::S32> perm_s,
                    ffi::ResultBuffer<ffi::S32> rank_t, ffi::ResultBuffer<ffi::S32> perm_t,
                    ffi::ResultBuffer<ffi::S32> rank_s, ffi::ResultBuffer<ffi::S32> presorted,
                    int32_t same) {
  using T = ffi::NativeType<R>;
  auto td = t.dimensions();
  auto sd = s.dimensions();
  if (td.size() != 2 || sd.size() != 2 || td[0] != sd[0]) {
    return ffi::Error::InvalidArgument("laplex_plan: t (H, M) and s (H, N) expected");
  }
  const int64_t h_n = td[0], m = td[1], n = sd[1];
  if (m >= (int64_t{1} << 31) || n >= (int64_t{1} << 31)) {
    return ffi::Error::InvalidArgument("laplex_plan: more than 2^31 - 1 anchors per head");
  }
  AdviseHuge(perm_s->typed_data(), sizeof(int32_t) * h_n * n);
  AdviseHuge(rank_t->typed_data(), sizeof(int32_t) * h_n * m);
  AdviseHuge(perm_t->typed_data(), sizeof(int32_t) * h_n * m);
  AdviseHuge(rank_s->typed_data(), sizeof(int32_t) * h_n * n);
  for (int64_t h = 0; h < h_n; ++h) {
    const T* th = t.typed_data() + h * m;
    const T* sh = s.typed_data() + h * n;
    int32_t* ps = perm_s->typed_data() + h * n;
    int32_t* pt = perm_t->typed_data() + h * m;
    int32_t* rt = rank_t->typed_data() + h * m;
    int32_t* rs = rank_s->typed_data() + h * n;
    const auto skey = Argsort(sh, n, ps);
    if (same) {
      std::memcpy(pt, ps, sizeof(int32_t) * m);
      Ranks(skey, pt, m, skey, n, rt);
      std::memcpy(rs, rt, sizeof(int32_t) * n);
    } else {
      const auto tkey = Argsort(th, m, pt);
      Ranks(tkey, pt, m, skey, n, rt);
      Ranks(skey, ps, n, tkey, m, rs);
    }
    int32_t bad = 0;
    for (int64_t j = 0; j < n; ++j) bad |= ps[j] ^ static_cast<int32_t>(j);
    presorted->typed_data()[h] = bad == 0 ? 1 : 0;
  }
  return ffi::Error::Success();
}

}  // namespace

#define LAPLEX_PLAN_DEFINE(NAME, R)                              \
  XLA_FFI_DEFINE_HANDLER_SYMBOL(NAME, PlanImpl<R>,               \
                                ffi::Ffi::Bind()                 \
                                    .Arg<ffi::Buffer<R>>()       \
                                    .Arg<ffi::Buffer<R>>()       \
                                    .Ret<ffi::Buffer<ffi::S32>>() \
                                    .Ret<ffi::Buffer<ffi::S32>>() \
                                    .Ret<ffi::Buffer<ffi::S32>>() \
                                    .Ret<ffi::Buffer<ffi::S32>>() \
                                    .Ret<ffi::Buffer<ffi::S32>>() \
                                    .Attr<int32_t>("same"));

LAPLEX_PLAN_DEFINE(LaplexPlanF32, ffi::F32)
LAPLEX_PLAN_DEFINE(LaplexPlanF64, ffi::F64)
