// LAPLEX sort plan on CPU as an XLA FFI custom call: stable argsorts of both anchor
// sets (laplex_sort.h's radix sort on order-preserving unsigned keys, the one the fused
// pass uses: data-sized buckets, one bucket scatter, then an in-cache LSD sort per
// bucket, on all cores, see Argsort) and merge ranks by a linear merge (split over the
// cores), per head.
//
//   perm_s (H, N): s[h, perm_s[h]] nondecreasing (stable)
//   rank_t (H, M): #{s[h] <= t[h, i]};  perm_t, rank_s likewise with roles swapped
//   presorted (H,): 1 where perm_s[h] is the identity
//
// With `same` (t and s are one array) the second sort is skipped. Inputs are
// finite (checked by the caller); -0.0 is ordered as +0.0.
#include <algorithm>
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
using laplex_sort::OrderKey;

namespace {

// Stable argsort of x[0..n) into perm, returning the sorted keys: laplex_sort.h's
// SortRecords (data-sized buckets, the fused pass's sort) with each key carrying its
// index; already nondecreasing keys give the identity.
template <typename T, typename U = decltype(OrderKey(T()))>
Scratch<U> Argsort(const T* x, int64_t n, int32_t* perm) {
  Scratch<U> key(n);
  laplex_sort::Walk<U> walk;  // unused: no put-back here
  const bool moved = laplex_sort::SortRecords<U, int32_t>(
      n, [x](int64_t i) { return OrderKey(x[i]); },
      [](int64_t i) { return static_cast<int32_t>(i); }, walk,
      []() -> int32_t* { return nullptr; },
      [&key, perm](int64_t b0, const laplex_sort::KeyVal<U, int32_t>* kb, int64_t m) {
        U* ko = key.data() + b0;
        int32_t* po = perm + b0;
        for (int64_t i = 0; i < m; ++i) {
          ko[i] = kb[i].k;
          po[i] = kb[i].x;
        }
      });
  if (!moved) {
    const int nt = laplex_par::Threads(n, n);
    laplex_par::Run(nt, [&](int t) {
      for (int64_t i = n * t / nt, i1 = n * (t + 1) / nt; i < i1; ++i) {
        key[i] = OrderKey(x[i]);
        perm[i] = static_cast<int32_t>(i);
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
