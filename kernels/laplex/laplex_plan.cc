// LAPLEX sort plan on CPU as an XLA FFI custom call: stable argsorts of both anchor
// sets (LSD radix sort on order-preserving unsigned keys) and merge ranks by one
// linear merge, per head.
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
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;
using laplex_mem::AdviseHuge;
using laplex_mem::Scratch;

namespace {

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

// stable argsort of keys[0..n) into perm via LSD radix sort, 8 bits per pass;
// passes whose digit is constant over all keys are skipped
template <typename T, typename U = decltype(OrderKey(T()))>
Scratch<U> Argsort(const T* x, int64_t n, int32_t* perm) {
  constexpr int kBytes = sizeof(U);
  Scratch<U> key(n), key2(n);
  Scratch<int32_t> idx2(n);
  std::vector<int64_t> hist(kBytes * 256, 0);
  for (int64_t i = 0; i < n; ++i) {
    const U k = OrderKey(x[i]);
    key[i] = k;
    perm[i] = static_cast<int32_t>(i);
    for (int b = 0; b < kBytes; ++b) ++hist[b * 256 + ((k >> (8 * b)) & 0xff)];
  }
  U* ka = key.data();
  U* kb = key2.data();
  int32_t* ia = perm;
  int32_t* ib = idx2.data();
  for (int b = 0; b < kBytes; ++b) {
    int64_t* h = hist.data() + b * 256;
    bool trivial = false;
    for (int d = 0; d < 256; ++d) trivial |= h[d] == n;
    if (trivial) continue;
    int64_t off = 0;
    for (int d = 0; d < 256; ++d) {
      const int64_t c = h[d];
      h[d] = off;
      off += c;
    }
    for (int64_t i = 0; i < n; ++i) {
      const int64_t dst = h[(ka[i] >> (8 * b)) & 0xff]++;
      kb[dst] = ka[i];
      ib[dst] = ia[i];
    }
    std::swap(ka, kb);
    std::swap(ia, ib);
  }
  if (ia != perm) std::memcpy(perm, ia, sizeof(int32_t) * n);
  if (ka != key.data()) key.swap(key2);
  return key;  // the sorted keys
}

// rank[perm_t[q]] = #{src <= tgt} by one merge of the sorted keys (order-preserving)
template <typename U>
void Ranks(const Scratch<U>& tkey, const int32_t* perm_t, int64_t m,
           const Scratch<U>& skey, int64_t n, int32_t* rank) {
  int64_t j = 0;
  for (int64_t q = 0; q < m; ++q) {
    const U v = tkey[q];
    while (j < n && skey[j] <= v) ++j;
    rank[perm_t[q]] = static_cast<int32_t>(j);
  }
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
