// Fused LAPLEX operator passes for jaxlab.laplex, as XLA FFI custom calls (CPU).
//
// One head h applies K[i, j] = exp(-lam |t[i] - s[j]|) to x (N, K) with the sort
// plan (perm_s sorts s, perm_t sorts t, rank_t[i] = #{s <= t[i]}) in two
// streaming merge walks over the sorted anchors, with no intermediate arrays:
//
//   left walk (ascending):   F_j = alpha_j F_{j-1} + x_j,  alpha_j = exp(-lam (s_j - s_{j-1}))
//                            L(t) = exp(-lam (t - s_{r-1})) F_{r-1}
//   right walk (descending): B_j = alpha_{j+1} B_{j+1} + x_j
//                            R(t) = exp(-lam (s_r - t)) B_r
//
// The walks gather x and the anchors through the permutations themselves
// (pre-sorted anchors read memory sequentially). Optional extras for the
// backward pass: the Jordan-block sums of |t - s| exp(-lam |t - s|) x
//   G_j = alpha_j (G_{j-1} + d_j F_{j-1}),   J_L(t) = e_l (G_{r-1} + d_l F_{r-1})
// and the sum T of sources tied with t (s == t).
//
// Everything runs in double precision whatever the storage type: gaps are
// formed in double from the stored anchors (exact for float32), the factors
// exp(-lam d) are computed in double, and the recurrences accumulate in double;
// only the outputs are rounded to the storage type. The one exception is the
// symmetric real one-column pass on AVX-512 CPUs (SymSortedReal below): with
// float32 storage it runs float32 recurrences on chunks whose anchors decay fast
// enough (kWin criterion; error ~1e-6 normwise), double elsewhere.
// |alpha| <= 1 so nothing overflows. Complex values are stored interleaved (re, im).
//
// Targets:
//   laplex_fused_apply_*: y (M, K) = sum_h c_h (L_h + R_h)
//   laplex_fused_sym_*:   y (N, K) = sum_h c_h K_h x for targets = sources (one sort;
//                         `presorted[h]` != 0 promises perm_h is the identity)
//   laplex_fused_parts_*: three outputs (H, M, K): L + R,
//                         L - R - 2 T (T only with `tie`, else L - R),
//                         J_L + J_R (only with `jordan`; without it the third is empty).
//   laplex_fused_symgrad_*: the cotangents of w . y for the symmetric real one-column
//                         operator in one pass (v, the anchors through both roles, the
//                         decays, the weights; see SymGradImpl).
// Each takes a bool `check` attribute: when set, the plan fields the pass reads (apply,
// parts: perm_s, rank_t, perm_t; sym: perm) are checked first (laplex_check.h) and a
// malformed one returns an InvalidArgument error with jaxlab's plan message, naming
// the plan's field (parts with `transposed`: the call's perm_src, rank_tgt, perm_tgt
// are the plan's perm_t, rank_s, perm_s) and the head.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "laplex_check.h"
#include "laplex_mem.h"
#include "laplex_par.h"
#include "laplex_sort.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;
using laplex_mem::AdviseHuge;
using laplex_mem::Scratch;

namespace {

constexpr int64_t kChunk = 512;
constexpr int64_t kPf = 32;  // prefetch distance of the random gathers / scatters

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define LAPLEX_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define LAPLEX_CLONES
#endif

// Constants of ExpNonPosT for one floating type: the flush threshold, the shifter
// 1.5 * 2^mantissa_bits (adding it rounds to an integer held in the low mantissa
// bits), ln 2 split for the Cody-Waite reduction, and the exponent field.
template <typename T>
struct ExpTraits;
template <>
struct ExpTraits<double> {
  using U = uint64_t;
  static constexpr double kMin = -708.0, kShift = 6755399441055744.0;
  static constexpr double kLn2Hi = 0.6931471803691238, kLn2Lo = 1.9082149292705877e-10;
  static constexpr U kBias = 1023, kMant = 52;
};
template <>
struct ExpTraits<float> {
  using U = uint32_t;
  static constexpr float kMin = -87.0f, kShift = 12582912.0f;
  static constexpr float kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
  static constexpr U kBias = 127, kMant = 23;
};

// exp(x) for x <= 0 in T, branch free so that loops over it vectorize: Cody-Waite
// reduction x = k ln2 + r, |r| <= ln2 / 2, and the degree-kDeg Taylor polynomial of
// e^r. In double: degree 13 (truncation < 1e-17 relative) or degree 8 (< 3e-10,
// ample for float32 storage: a recurrence only multiplies the few factors < 1 that
// have large |r|, while small |r| carry no truncation error); in float: degree 6
// (~2e-7). Results below e^kMin flush to 0 (far below any LAPLEX output's precision).
template <typename T, int kDeg>
inline T ExpNonPosT(T x) {
  using Tr = ExpTraits<T>;
  // branch free clamp to [kMin, 0] and flush (selects written as arithmetic so that
  // GCC vectorizes the loop without -ffast-math)
  const T keep = static_cast<T>(x >= Tr::kMin);
  const T xc = keep * x - (T(1) - keep) * -Tr::kMin;
  // round x / ln2 to the nearest integer k with the shifter: k sits in the low
  // mantissa bits of `big` (no float -> int conversion, so the loop vectorizes)
  const T big = xc * static_cast<T>(1.4426950408889634) + Tr::kShift;
  const T kf = big - Tr::kShift;
  const T r = (xc - kf * Tr::kLn2Hi) - kf * Tr::kLn2Lo;
  // Horner over the coefficients 1 / i! (factorials exact in double up to 13!)
  double fact = 1.0;
  for (int i = 2; i <= kDeg; ++i) fact *= i;
  T p = static_cast<T>(1.0 / fact);
  for (int i = kDeg; i >= 1; --i) {
    fact /= i;
    p = p * r + static_cast<T>(1.0 / fact);
  }
  // 2^k: (bits(big) + bias) << mantissa keeps exactly the biased exponent of k
  typename Tr::U bits;
  std::memcpy(&bits, &big, sizeof(bits));
  bits = (bits + Tr::kBias) << Tr::kMant;
  T scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return keep * (p * scale);
}

template <bool kShort>
inline double ExpNonPosP(double x) {
  return ExpNonPosT<double, kShort ? 8 : 13>(x);
}

inline double ExpNonPos(double x) { return ExpNonPosP<false>(x); }

// the decay factors of a pass whose outputs are stored as S: float32 needs less
template <typename S>
inline double ExpFactor(double x) {
  return ExpNonPosP<sizeof(S) < sizeof(double)>(x);
}

// er[i] = exp(-a d[i]) for d >= 0 (vectorised; cloned for AVX2/FMA when available)
LAPLEX_CLONES void ExpBlock(const double* d, double a, double* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = ExpNonPos(-a * d[i]);
}

// the factor exp(-lam d) for a block of gaps: real part `re`, imaginary part `im`
template <bool CPX>
void Factors(const double* d, double a, double b, double* re, double* im, int64_t n) {
  ExpBlock(d, a, re, n);
  if constexpr (CPX) {
    for (int64_t i = 0; i < n; ++i) {
      const double mag = re[i];
      const double ph = b * d[i];
      re[i] = mag * std::cos(ph);
      im[i] = -mag * std::sin(ph);
    }
  }
}

struct Plan {
  int64_t n, m, k;
  const int32_t* perm_s;  // (n,)
  const int32_t* rank_t;  // (m,)
  const int32_t* perm_t;  // (m,)
  bool ident = false;     // both permutations are the identity (they are then not read)
};

// whether perm[u] == start + u for u < cnt (a pre-sorted stretch); branch free
inline bool IsIdentity(const int32_t* perm, int64_t start, int64_t cnt) {
  int32_t bad = 0;
  for (int64_t u = 0; u < cnt; ++u) bad |= perm[u] ^ static_cast<int32_t>(start + u);
  return bad == 0;
}

inline int64_t Clamp(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : (v > hi ? hi : v); }

// One head, both walks. S: storage real type; CPX: complex values (interleaved);
// JD: Jordan sums; Q: second output L - R (- 2 T with TIE); c: weight of output 0
// (accumulated into o0 when `acc`, otherwise o0 is overwritten). KS columns
// [c0, c0 + KS) per call, a compile-time count so the states live in registers.
//
// Each walk goes over the sorted sources in chunks: (A) gather the chunk's anchors
// and form its factors (vectorised exp), (B) run the recurrences over the chunk
// into a small buffer, (C) read out every target whose merge rank falls in the
// chunk (its own factor again vectorised). Buffers stay in cache.
template <typename S, bool CPX, bool JD, bool Q, bool TIE, int KS>
LAPLEX_CLONES void HeadCols(const Plan& p, int64_t c0, const S* x, const S* tgt, const S* src,
                            double a, double b, double c_re, double c_im, bool acc, S* o0,
                            S* o1, S* o2, int walks) {
  constexpr int W = CPX ? 2 : 1;  // storage values per element
  constexpr int64_t C = kChunk;
  const int64_t n = p.n, m = p.m, k = p.k;
  // chunk buffers: sorted anchors, gaps, factors, indices; per-chunk states; targets
  std::vector<double> buf(7 * C + 6 * C * KS);
  double* sv = buf.data();
  double* sd = sv + C;
  double* sar = sd + C;
  double* sai = sar + C;
  double* td = sai + C;
  double* ter = td + C;
  double* tei = ter + C;
  double* bhr = tei + C;  // h (re, im), g (re, im), tie (re, im): C * KS each
  double* bhi = bhr + C * KS;
  double* bgr = bhi + C * KS;
  double* bgi = bgr + C * KS;
  double* btr = bgi + C * KS;
  double* bti = btr + C * KS;
  std::vector<int64_t> sidx(C), tit(C), tu(C);
  double hr[KS], hi[KS], gr[KS], gi[KS], tr[KS], ti[KS];
  auto reset = [&]() {
    for (int col = 0; col < KS; ++col) hr[col] = hi[col] = gr[col] = gi[col] = tr[col] = ti[col] = 0;
  };
  auto put = [&](S* o, int64_t i, int col, double vr, double vi, bool add) {
    S* q = o + W * (i * k + c0 + col);
    q[0] = static_cast<S>(add ? static_cast<double>(q[0]) + vr : vr);
    if constexpr (CPX) q[1] = static_cast<S>(add ? static_cast<double>(q[1]) + vi : vi);
  };
  auto tpos = [&](int64_t i) { return p.ident ? i : Clamp(p.perm_t[i], 0, m - 1); };
  auto trank = [&](int64_t it) { return Clamp(p.rank_t[it], 0, n); };
  // (A) sorted anchors, indices and gaps of sources [j0, j0 + cnt); `dir` +1: gaps to
  // the previous source (left walk), -1: gaps to the next one (right walk)
  auto gather = [&](int64_t j0, int64_t cnt) {
    if (p.ident || IsIdentity(p.perm_s + j0, j0, cnt)) {
      for (int64_t u = 0; u < cnt; ++u) {
        sv[u] = static_cast<double>(src[j0 + u]);
        sidx[u] = j0 + u;
      }
    } else {
      for (int64_t u = 0; u < cnt; ++u) {
        const int64_t id = Clamp(p.perm_s[j0 + u], 0, n - 1);
        sv[u] = static_cast<double>(src[id]);
        sidx[u] = id;
      }
    }
  };
  // one recurrence step of every state with factor (ar, ai), gap d and input row xj
  auto step = [&](double ar, double ai, double d, const S* xj, int64_t u) {
    for (int col = 0; col < KS; ++col) {
      const double xr = static_cast<double>(xj[W * col]);
      const double xi = CPX ? static_cast<double>(xj[W * col + (CPX ? 1 : 0)]) : 0.0;
      if constexpr (JD) {
        const double ur = gr[col] + d * hr[col];
        if constexpr (CPX) {
          const double ui = gi[col] + d * hi[col];
          gr[col] = ar * ur - ai * ui;
          gi[col] = ar * ui + ai * ur;
        } else {
          gr[col] = ar * ur;
        }
        bgr[u * KS + col] = gr[col];
        if constexpr (CPX) bgi[u * KS + col] = gi[col];
      }
      if constexpr (CPX) {
        const double nr = ar * hr[col] - ai * hi[col] + xr;
        hi[col] = ar * hi[col] + ai * hr[col] + xi;
        hr[col] = nr;
        bhi[u * KS + col] = hi[col];
      } else {
        hr[col] = ar * hr[col] + xr;
      }
      bhr[u * KS + col] = hr[col];
    }
  };

  // (C) read out q targets collected in tit (index), tu (buffer row), td (distance to
  // that row's source): the state decayed by exp(-lam d). The left walk (`left`)
  // writes o0 (accumulating when acc), o1 = L - 2 T at ties and o2 = J_L; the right
  // walk then adds R, -R and J_R.
  auto readout = [&](int64_t q, bool left) {
    Factors<CPX>(td, a, b, ter, tei, q);
    for (int64_t w = 0; w < q; ++w) {
      const int64_t i = tit[w], u = tu[w];
      const double er = ter[w], ei = CPX ? tei[w] : 0.0, d = td[w];
      for (int col = 0; col < KS; ++col) {
        const double hr_ = bhr[u * KS + col], hi_ = CPX ? bhi[u * KS + col] : 0.0;
        const double vr = CPX ? er * hr_ - ei * hi_ : er * hr_;
        const double vi = CPX ? er * hi_ + ei * hr_ : 0.0;
        put(o0, i, col, c_re * vr - c_im * vi, c_re * vi + c_im * vr, left ? acc : true);
        if constexpr (Q) {
          double qr = left ? vr : -vr, qi = left ? vi : -vi;
          if constexpr (TIE) {
            if (left && d == 0.0) {
              qr -= 2.0 * btr[u * KS + col];
              if constexpr (CPX) qi -= 2.0 * bti[u * KS + col];
            }
          }
          put(o1, i, col, qr, qi, !left);
        }
        if constexpr (JD) {
          const double ur = bgr[u * KS + col] + d * hr_;
          const double ui = CPX ? bgi[u * KS + col] + d * hi_ : 0.0;
          put(o2, i, col, CPX ? er * ur - ei * ui : er * ur, CPX ? er * ui + ei * ur : 0.0,
              !left);
        }
      }
    }
  };

  int64_t it = 0;  // next target in sorted order
  // ---------------- left walk (ascending) ----------------
  if (walks & 1) {
  reset();
  // targets left of every source: L = 0
  while (it < m && trank(tpos(it)) == 0) {
    const int64_t i = tpos(it);
    for (int col = 0; col < KS; ++col) {
      put(o0, i, col, 0.0, 0.0, acc);
      if constexpr (Q) put(o1, i, col, 0.0, 0.0, false);
      if constexpr (JD) put(o2, i, col, 0.0, 0.0, false);
    }
    ++it;
  }
  double prev = 0.0;
  for (int64_t j0 = 0; j0 < n; j0 += C) {
    const int64_t cnt = std::min(C, n - j0);
    gather(j0, cnt);
    sd[0] = j0 > 0 ? sv[0] - prev : 0.0;
    for (int64_t u = 1; u < cnt; ++u) sd[u] = sv[u] - sv[u - 1];
    prev = sv[cnt - 1];
    Factors<CPX>(sd, a, b, sar, sai, cnt);
    // (B) F_j = alpha_j F_{j-1} + x_j; G_j = alpha_j (G_{j-1} + d_j F_{j-1}); tie sums
    for (int64_t u = 0; u < cnt; ++u) {
      const S* xj = x + W * (sidx[u] * k + c0);
      step(sar[u], CPX ? sai[u] : 0.0, sd[u], xj, u);
      if constexpr (TIE) {
        const double keep = sd[u] == 0.0 ? 1.0 : 0.0;
        for (int col = 0; col < KS; ++col) {
          tr[col] = keep * tr[col] + static_cast<double>(xj[W * col]);
          btr[u * KS + col] = tr[col];
          if constexpr (CPX) {
            ti[col] = keep * ti[col] + static_cast<double>(xj[W * col + 1]);
            bti[u * KS + col] = ti[col];
          }
        }
      }
    }
    // (C) targets with rank r in (j0, j0 + cnt]: L = e_l F_{r-1}
    const int64_t j1 = j0 + cnt;
    while (it < m) {
      int64_t q = 0;
      for (; q < C && it + q < m; ++q) {
        const int64_t i = tpos(it + q);
        const int64_t r = trank(i);
        if (r > j1) break;
        const int64_t u = Clamp(r - 1 - j0, 0, cnt - 1);
        tit[q] = i;
        tu[q] = u;
        td[q] = static_cast<double>(tgt[i]) - sv[u];
      }
      if (q == 0) break;
      readout(q, true);
      it += q;
      if (q < C) break;
    }
  }

  }  // left walk

  // ---------------- right walk (descending) ----------------
  if (!(walks & 2)) return;
  reset();
  it = m - 1;
  while (it >= 0 && trank(tpos(it)) >= n) --it;  // right of every source: R = 0
  double next = 0.0;
  for (int64_t j1 = n; j1 > 0; j1 -= C) {
    const int64_t j0 = std::max<int64_t>(0, j1 - C);
    const int64_t cnt = j1 - j0;
    gather(j0, cnt);
    for (int64_t u = 0; u + 1 < cnt; ++u) sd[u] = sv[u + 1] - sv[u];
    sd[cnt - 1] = j1 < n ? next - sv[cnt - 1] : 0.0;
    next = sv[0];
    Factors<CPX>(sd, a, b, sar, sai, cnt);
    // (B) B_j = alpha_{j+1} B_{j+1} + x_j; GB_j = alpha_{j+1} (GB_{j+1} + d_{j+1} B_{j+1})
    for (int64_t u = cnt - 1; u >= 0; --u) {
      step(sar[u], CPX ? sai[u] : 0.0, sd[u], x + W * (sidx[u] * k + c0), u);
    }
    // (C) targets with rank r in [j0, j1): R = e_r B_r
    while (it >= 0) {
      int64_t q = 0;
      for (; q < C && it - q >= 0; ++q) {
        const int64_t i = tpos(it - q);
        const int64_t r = trank(i);
        if (r < j0) break;
        const int64_t u = Clamp(r - j0, 0, cnt - 1);
        tit[q] = i;
        tu[q] = u;
        td[q] = sv[u] - static_cast<double>(tgt[i]);
      }
      if (q == 0) break;
      readout(q, false);
      it -= q;
      if (q < C) break;
    }
  }
}

// Both walks of one head over every column. The left and the right walk are
// independent: on two or more threads (laplex_par::Threads of n + m) the left walk
// writes the outputs while a second thread runs the right walk into zeroed copies,
// which are then added in (split over the threads): the gradient passes
// (laplex_fused_parts) and the general apply on two cores.
template <typename S, bool CPX, bool JD, bool Q, bool TIE>
void HeadSorted(const Plan& p, const S* x, const S* tgt, const S* src, double a, double b,
                double c_re, double c_im, bool acc, S* o0, S* o1, S* o2) {
  auto cols = [&](int walks, bool ac, S* q0, S* q1, S* q2) {
    int64_t c0 = 0;
    for (; c0 + 4 <= p.k; c0 += 4) {
      HeadCols<S, CPX, JD, Q, TIE, 4>(p, c0, x, tgt, src, a, b, c_re, c_im, ac, q0, q1, q2,
                                      walks);
    }
    for (; c0 < p.k; ++c0) {
      HeadCols<S, CPX, JD, Q, TIE, 1>(p, c0, x, tgt, src, a, b, c_re, c_im, ac, q0, q1, q2,
                                      walks);
    }
  };
  const int nt = laplex_par::Threads(p.n + p.m, 2);
  if (nt < 2) {
    cols(3, acc, o0, o1, o2);
    return;
  }
  constexpr int W = CPX ? 2 : 1;
  const int64_t len = W * p.m * p.k;
  Scratch<S> r0(len), r1(Q ? len : 0), r2(JD ? len : 0);
  laplex_par::Run(2, [&](int t) {
    if (t == 0) {
      cols(1, acc, o0, o1, o2);
      return;
    }
    std::fill(r0.data(), r0.data() + len, S(0));
    if constexpr (Q) std::fill(r1.data(), r1.data() + len, S(0));
    if constexpr (JD) std::fill(r2.data(), r2.data() + len, S(0));
    cols(2, true, r0.data(), Q ? r1.data() : nullptr, JD ? r2.data() : nullptr);
  });
  laplex_par::Run(nt, [&](int t) {
    const int64_t e0 = len * t / nt, e1 = len * (t + 1) / nt;
    for (int64_t e = e0; e < e1; ++e) o0[e] = static_cast<S>(o0[e] + r0[e]);
    if constexpr (Q) {
      for (int64_t e = e0; e < e1; ++e) o1[e] = static_cast<S>(o1[e] + r1[e]);
    }
    if constexpr (JD) {
      for (int64_t e = e0; e < e1; ++e) o2[e] = static_cast<S>(o2[e] + r2[e]);
    }
  });
}

// Unsorted anchors: the walks would read x and write the outputs in random order,
// one cache miss per element inside a dependent loop. Instead gather x and the
// anchors into sorted order first (independent, prefetched loads), recompute the
// merge ranks from the sorted copies (sequential), walk the copies with identity
// permutations, and scatter back. Temporaries come from laplex_mem.h's pool.
template <typename S, bool CPX, bool JD, bool Q, bool TIE>
void Head(const Plan& p, const S* x, const S* tgt, const S* src, double a, double b,
          double c_re, double c_im, bool acc, S* o0, S* o1, S* o2) {
  const int64_t n = p.n, m = p.m, k = p.k;
  if (IsIdentity(p.perm_s, 0, n) && IsIdentity(p.perm_t, 0, m)) {
    Plan ps = p;
    ps.ident = true;
    HeadSorted<S, CPX, JD, Q, TIE>(ps, x, tgt, src, a, b, c_re, c_im, acc, o0, o1, o2);
    return;
  }
  constexpr int W = CPX ? 2 : 1;
  const int64_t row = W * k;
  Scratch<int32_t> rank(m);
  Scratch<S> xs(n * row), ss(n), ts(m), ob0(m * row), ob1(Q ? m * row : 0),
      ob2(JD ? m * row : 0);
  // random gathers: software prefetch kPf elements ahead keeps more misses in flight
  for (int64_t j = 0; j < n; ++j) {
    if (j + kPf < n) {
      const int64_t ip = Clamp(p.perm_s[j + kPf], 0, n - 1);
      __builtin_prefetch(src + ip);
      __builtin_prefetch(x + ip * row);
    }
    const int64_t id = Clamp(p.perm_s[j], 0, n - 1);
    ss[j] = src[id];
    for (int64_t e = 0; e < row; ++e) xs[j * row + e] = x[id * row + e];
  }
  for (int64_t q = 0; q < m; ++q) {
    if (q + kPf < m) __builtin_prefetch(tgt + Clamp(p.perm_t[q + kPf], 0, m - 1));
    ts[q] = tgt[Clamp(p.perm_t[q], 0, m - 1)];
  }
  // merge ranks of the sorted copies (sequential; for a valid plan equal to
  // rank_t[perm_t[q]], without a random gather)
  for (int64_t q = 0, j = 0; q < m; ++q) {
    const S tq = ts[q];
    while (j < n && ss[j] <= tq) ++j;
    rank[q] = static_cast<int32_t>(j);
  }
  Plan ps{n, m, k, nullptr, rank.data(), nullptr, true};
  HeadSorted<S, CPX, JD, Q, TIE>(ps, xs.data(), ts.data(), ss.data(), a, b, c_re, c_im, false,
                                 ob0.data(), Q ? ob1.data() : nullptr,
                                 JD ? ob2.data() : nullptr);
  for (int64_t q = 0; q < m; ++q) {
    if (q + kPf < m) {
      const int64_t ip = Clamp(p.perm_t[q + kPf], 0, m - 1);
      __builtin_prefetch(o0 + ip * row, 1);
      if constexpr (Q) __builtin_prefetch(o1 + ip * row, 1);
      if constexpr (JD) __builtin_prefetch(o2 + ip * row, 1);
    }
    const int64_t i = Clamp(p.perm_t[q], 0, m - 1);
    S* d0 = o0 + i * row;
    const S* s0 = &ob0[q * row];
    for (int64_t e = 0; e < row; ++e) d0[e] = acc ? static_cast<S>(d0[e] + s0[e]) : s0[e];
    if constexpr (Q) {
      for (int64_t e = 0; e < row; ++e) o1[i * row + e] = ob1[q * row + e];
    }
    if constexpr (JD) {
      for (int64_t e = 0; e < row; ++e) o2[i * row + e] = ob2[q * row + e];
    }
  }
}

// Symmetric operator (targets are the sources, one sort): with sorted F_j and B_j
// as above, y_j = sum_k exp(-lam |s_j - s_k|) x_k = F_j + B_j - x_j exactly, ties
// included (a tied pair has factor 1 in either sum), and no target factors are
// needed. The forward chain (j = 0, 1, ...) and the backward chain (j = n-1,
// n-2, ...) run interleaved in one loop, so two independent multiply-add chains
// are in flight: a chain leaves its value in `fbuf` (the output itself for the
// first head) until the other chain reaches the same element and combines.
// KS columns [c0, c0 + KS) per call.
template <typename S, bool CPX, int KS>
LAPLEX_CLONES void SymCols(int64_t n, int64_t k, int64_t c0, const int32_t* perm, const S* x, const S* src,
             double a, double b, double c_re, double c_im, bool acc, bool presorted, S* y,
             S* fbuf) {
  constexpr int W = CPX ? 2 : 1;
  std::vector<double> buf(6 * kChunk);
  double* fd = buf.data();
  double* far = fd + kChunk;
  double* fai = far + kChunk;
  double* bd = fai + kChunk;
  double* bar = bd + kChunk;
  double* bai = bar + kChunk;
  std::vector<int64_t> fidx(kChunk), bidx(kChunk);
  double fr[KS], fi[KS], br[KS], bi[KS];
  for (int col = 0; col < KS; ++col) fr[col] = fi[col] = br[col] = bi[col] = 0;
  double fprev = 0.0, bnext = 0.0;
  // combine the chain value (vr, vi) at element id with the stored other chain
  // (the element's own input (xr, xi) is subtracted once)
  auto finish = [&](int64_t id, int col, double vr, double vi, double xr, double xi) {
    const S* oj = fbuf + W * (id * k + c0);
    S* yj = y + W * (id * k + c0);
    double tr = vr + static_cast<double>(oj[W * col]) - xr;
    double ti = 0.0;
    if constexpr (CPX) ti = vi + static_cast<double>(oj[W * col + 1]) - xi;
    const double or_ = c_re * tr - c_im * ti;
    yj[W * col] = static_cast<S>(acc ? static_cast<double>(yj[W * col]) + or_ : or_);
    if constexpr (CPX) {
      const double oi = c_re * ti + c_im * tr;
      yj[W * col + 1] = static_cast<S>(acc ? static_cast<double>(yj[W * col + 1]) + oi : oi);
    }
  };
  for (int64_t i0 = 0; i0 < n; i0 += kChunk) {
    const int64_t cnt = std::min(kChunk, n - i0);
    // forward elements i0 + u (gaps to the previous), backward elements n-1-i0-u (gaps
    // to the next); pre-sorted stretches (identity permutation) take contiguous loads
    const int64_t jb0 = n - i0 - cnt;  // the backward chunk is [jb0, jb0 + cnt)
    if (presorted || IsIdentity(perm + i0, i0, cnt)) {
      const S* sp = src + i0;
      fd[0] = i0 > 0 ? static_cast<double>(sp[0]) - fprev : 0.0;
      for (int64_t u = 1; u < cnt; ++u) {
        fd[u] = static_cast<double>(sp[u]) - static_cast<double>(sp[u - 1]);
      }
      for (int64_t u = 0; u < cnt; ++u) fidx[u] = i0 + u;
      fprev = static_cast<double>(sp[cnt - 1]);
    } else {
      for (int64_t u = 0; u < cnt; ++u) {
        const int64_t id = Clamp(perm[i0 + u], 0, n - 1);
        const double sj = static_cast<double>(src[id]);
        fidx[u] = id;
        fd[u] = i0 + u > 0 ? sj - fprev : 0.0;
        fprev = sj;
      }
    }
    if (presorted || IsIdentity(perm + jb0, jb0, cnt)) {
      const S* sp = src + jb0;  // element j = jb0 + cnt - 1 - u
      bd[0] = i0 > 0 ? bnext - static_cast<double>(sp[cnt - 1]) : 0.0;
      for (int64_t u = 1; u < cnt; ++u) {
        bd[u] = static_cast<double>(sp[cnt - u]) - static_cast<double>(sp[cnt - 1 - u]);
      }
      for (int64_t u = 0; u < cnt; ++u) bidx[u] = jb0 + cnt - 1 - u;
      bnext = static_cast<double>(sp[0]);
    } else {
      for (int64_t u = 0; u < cnt; ++u) {
        const int64_t j = n - 1 - i0 - u;
        const int64_t id = Clamp(perm[j], 0, n - 1);
        const double sj = static_cast<double>(src[id]);
        bidx[u] = id;
        bd[u] = j < n - 1 ? bnext - sj : 0.0;
        bnext = sj;
      }
    }
    Factors<CPX>(fd, a, b, far, fai, cnt);
    Factors<CPX>(bd, a, b, bar, bai, cnt);
    for (int64_t u = 0; u < cnt; ++u) {
      const int64_t i = i0 + u;        // forward position
      const int64_t jb = n - 1 - i;    // backward position
      const int64_t idf = fidx[u], idb = bidx[u];
      const double afr = far[u], afi = CPX ? fai[u] : 0.0;
      const double abr = bar[u], abi = CPX ? bai[u] : 0.0;
      const S* xf = x + W * (idf * k + c0);
      const S* xb = x + W * (idb * k + c0);
      for (int col = 0; col < KS; ++col) {
        // forward: F_i = alpha_i F_{i-1} + x_i
        const double xfr = static_cast<double>(xf[W * col]);
        const double xfi = CPX ? static_cast<double>(xf[W * col + (CPX ? 1 : 0)]) : 0.0;
        double nfr = afr * fr[col] + xfr, nfi = 0.0;
        if constexpr (CPX) {
          nfr -= afi * fi[col];
          nfi = afr * fi[col] + afi * fr[col] + xfi;
        }
        // backward: B_j = alpha_{j+1} B_{j+1} + x_j
        const double xbr = static_cast<double>(xb[W * col]);
        const double xbi = CPX ? static_cast<double>(xb[W * col + (CPX ? 1 : 0)]) : 0.0;
        double nbr = abr * br[col] + xbr, nbi = 0.0;
        if constexpr (CPX) {
          nbr -= abi * bi[col];
          nbi = abr * bi[col] + abi * br[col] + xbi;
        }
        fr[col] = nfr;
        fi[col] = nfi;
        br[col] = nbr;
        bi[col] = nbi;
        if (i < jb) {  // first half: park both chain values
          S* of = fbuf + W * (idf * k + c0);
          S* ob = fbuf + W * (idb * k + c0);
          of[W * col] = static_cast<S>(nfr);
          ob[W * col] = static_cast<S>(nbr);
          if constexpr (CPX) {
            of[W * col + 1] = static_cast<S>(nfi);
            ob[W * col + 1] = static_cast<S>(nbi);
          }
        } else if (i == jb) {  // the middle element: both chains are here
          const double tr = nfr + nbr - xfr, ti = CPX ? nfi + nbi - xfi : 0.0;
          S* yj = y + W * (idf * k + c0);
          const double or_ = c_re * tr - c_im * ti;
          yj[W * col] = static_cast<S>(acc ? static_cast<double>(yj[W * col]) + or_ : or_);
          if constexpr (CPX) {
            const double oi = c_re * ti + c_im * tr;
            yj[W * col + 1] =
                static_cast<S>(acc ? static_cast<double>(yj[W * col + 1]) + oi : oi);
          }
        } else {  // second half: the other chain's value is parked
          finish(idf, col, nfr, nfi, xfr, xfi);
          finish(idb, col, nbr, nbi, xbr, xbi);
        }
      }
    }
  }
}

template <ffi::DataType D>
struct Types {
  using S = ffi::NativeType<D>;
  static constexpr bool kCpx = false;
};
template <>
struct Types<ffi::C64> {
  using S = float;
  static constexpr bool kCpx = true;
};
template <>
struct Types<ffi::C128> {
  using S = double;
  static constexpr bool kCpx = true;
};

// shapes: x (N, K), tgt (H, M), src (H, N), lam (H,), perms/ranks (H, N) / (H, M)
ffi::Error CheckShapes(ffi::AnyBuffer::Dimensions xd, ffi::AnyBuffer::Dimensions td,
                       ffi::AnyBuffer::Dimensions sd, ffi::AnyBuffer::Dimensions ld,
                       ffi::AnyBuffer::Dimensions ps, ffi::AnyBuffer::Dimensions rt,
                       ffi::AnyBuffer::Dimensions pt) {
  if (xd.size() != 2 || td.size() != 2 || sd.size() != 2 || ld.size() != 1 ||
      ps.size() != 2 || rt.size() != 2 || pt.size() != 2) {
    return ffi::Error::InvalidArgument("laplex_fused: unexpected ranks");
  }
  const int64_t h = td[0], m = td[1], n = sd[1];
  if (sd[0] != h || ld[0] != h || xd[0] != n || ps[0] != h || ps[1] != n || rt[0] != h ||
      rt[1] != m || pt[0] != h || pt[1] != m) {
    return ffi::Error::InvalidArgument("laplex_fused: inconsistent shapes");
  }
  return ffi::Error::Success();
}

template <typename S, bool CPX>
void LamAt(const S* lam, int64_t h, double* a, double* b) {
  if constexpr (CPX) {
    *a = static_cast<double>(lam[2 * h]);
    *b = static_cast<double>(lam[2 * h + 1]);
  } else {
    *a = static_cast<double>(lam[h]);
    *b = 0.0;
  }
}

// `check`: the plan fields a pass reads (shapes checked by the caller) are checked
// before it reads them; a malformed one gives InvalidArgument with the plan message
ffi::Error CheckPlanFields(const std::vector<laplex_check::Field>& fields, int64_t heads) {
  std::string bad = laplex_check::CheckPlan(fields, heads);
  if (!bad.empty()) return ffi::Error::InvalidArgument(bad);
  return ffi::Error::Success();
}

// the (perm_src, rank_tgt, perm_tgt) of apply / parts under their plan names
std::vector<laplex_check::Field> WalkFields(const int32_t* perm_src, const int32_t* rank_tgt,
                                            const int32_t* perm_tgt, int64_t m, int64_t n,
                                            bool transposed) {
  if (transposed) {
    return {{"perm_t", perm_src, n, -1}, {"rank_s", rank_tgt, m, n}, {"perm_s", perm_tgt, m, -1}};
  }
  return {{"perm_s", perm_src, n, -1}, {"rank_t", rank_tgt, m, n}, {"perm_t", perm_tgt, m, -1}};
}

template <ffi::DataType D, ffi::DataType R>
ffi::Error ApplyImpl(ffi::Buffer<D> x, ffi::Buffer<R> tgt, ffi::Buffer<R> src,
                     ffi::Buffer<D> lam, ffi::Buffer<D> c, ffi::Buffer<ffi::S32> perm_s,
                     ffi::Buffer<ffi::S32> rank_t, ffi::Buffer<ffi::S32> perm_t,
                     ffi::ResultBuffer<D> y, bool check) {
  using S = typename Types<D>::S;
  constexpr bool CPX = Types<D>::kCpx;
  auto err = CheckShapes(x.dimensions(), tgt.dimensions(), src.dimensions(), lam.dimensions(),
                         perm_s.dimensions(), rank_t.dimensions(), perm_t.dimensions());
  if (err.failure()) return err;
  const int64_t h_n = tgt.dimensions()[0], m = tgt.dimensions()[1];
  const int64_t n = src.dimensions()[1], k = x.dimensions()[1];
  if (c.dimensions().size() != 1 || c.dimensions()[0] != h_n) {
    return ffi::Error::InvalidArgument("laplex_fused: c must have shape (H,)");
  }
  if (check) {
    err = CheckPlanFields(WalkFields(perm_s.typed_data(), rank_t.typed_data(),
                                     perm_t.typed_data(), m, n, false),
                          h_n);
    if (err.failure()) return err;
  }
  S* yo = reinterpret_cast<S*>(y->untyped_data());
  constexpr int W = CPX ? 2 : 1;
  if (m == 0 || k == 0) return ffi::Error::Success();
  AdviseHuge(yo, sizeof(S) * W * m * k);
  if (n == 0 || h_n == 0) {
    std::fill(yo, yo + W * m * k, S(0));
    return ffi::Error::Success();
  }
  const S* xs = reinterpret_cast<const S*>(x.untyped_data());
  const S* ls = reinterpret_cast<const S*>(lam.untyped_data());
  const S* cs = reinterpret_cast<const S*>(c.untyped_data());
  for (int64_t h = 0; h < h_n; ++h) {
    Plan p{n, m, k, perm_s.typed_data() + h * n, rank_t.typed_data() + h * m,
           perm_t.typed_data() + h * m};
    double a, b, cr, ci;
    LamAt<S, CPX>(ls, h, &a, &b);
    LamAt<S, CPX>(cs, h, &cr, &ci);
    Head<S, CPX, false, false, false>(p, xs, tgt.typed_data() + h * m, src.typed_data() + h * n,
                                      a, b, cr, ci, h > 0, yo, nullptr, nullptr);
  }
  return ffi::Error::Success();
}

template <ffi::DataType D, ffi::DataType R>
ffi::Error PartsImpl(ffi::Buffer<D> x, ffi::Buffer<R> tgt, ffi::Buffer<R> src,
                     ffi::Buffer<D> lam, ffi::Buffer<ffi::S32> perm_s,
                     ffi::Buffer<ffi::S32> rank_t, ffi::Buffer<ffi::S32> perm_t,
                     ffi::ResultBuffer<D> out0, ffi::ResultBuffer<D> out1,
                     ffi::ResultBuffer<D> out2, int32_t jordan, int32_t tie, bool check,
                     bool transposed) {
  using S = typename Types<D>::S;
  constexpr bool CPX = Types<D>::kCpx;
  auto err = CheckShapes(x.dimensions(), tgt.dimensions(), src.dimensions(), lam.dimensions(),
                         perm_s.dimensions(), rank_t.dimensions(), perm_t.dimensions());
  if (err.failure()) return err;
  const int64_t h_n = tgt.dimensions()[0], m = tgt.dimensions()[1];
  const int64_t n = src.dimensions()[1], k = x.dimensions()[1];
  // one output per part, each (H, M, K); without `jordan` the third is empty
  auto part_ok = [&](ffi::AnyBuffer::Dimensions od) {
    return od.size() == 3 && od[0] == h_n && od[1] == m && od[2] == k;
  };
  if (!part_ok(out0->dimensions()) || !part_ok(out1->dimensions()) ||
      (jordan ? !part_ok(out2->dimensions()) : out2->element_count() != 0)) {
    return ffi::Error::InvalidArgument(
        "laplex_fused: parts must have shape (H, M, K) (the third empty without jordan)");
  }
  if (check) {
    err = CheckPlanFields(WalkFields(perm_s.typed_data(), rank_t.typed_data(),
                                     perm_t.typed_data(), m, n, transposed),
                          h_n);
    if (err.failure()) return err;
  }
  constexpr int W = CPX ? 2 : 1;
  const int np = jordan ? 3 : 2;
  S* o[3] = {reinterpret_cast<S*>(out0->untyped_data()),
             reinterpret_cast<S*>(out1->untyped_data()),
             reinterpret_cast<S*>(out2->untyped_data())};
  if (h_n == 0 || m == 0 || k == 0) return ffi::Error::Success();
  const int64_t blk = W * m * k;
  for (int q = 0; q < np; ++q) AdviseHuge(o[q], sizeof(S) * h_n * blk);
  if (n == 0) {
    for (int q = 0; q < np; ++q) std::fill(o[q], o[q] + h_n * blk, S(0));
    return ffi::Error::Success();
  }
  const S* xs = reinterpret_cast<const S*>(x.untyped_data());
  const S* ls = reinterpret_cast<const S*>(lam.untyped_data());
  for (int64_t h = 0; h < h_n; ++h) {
    Plan p{n, m, k, perm_s.typed_data() + h * n, rank_t.typed_data() + h * m,
           perm_t.typed_data() + h * m};
    double a, b;
    LamAt<S, CPX>(ls, h, &a, &b);
    S* o0 = o[0] + h * blk;
    S* o1 = o[1] + h * blk;
    S* o2 = jordan ? o[2] + h * blk : nullptr;
    const S* th = tgt.typed_data() + h * m;
    const S* sh = src.typed_data() + h * n;
    if (jordan && tie) {
      Head<S, CPX, true, true, true>(p, xs, th, sh, a, b, 1.0, 0.0, false, o0, o1, o2);
    } else if (jordan) {
      Head<S, CPX, true, true, false>(p, xs, th, sh, a, b, 1.0, 0.0, false, o0, o1, o2);
    } else if (tie) {
      Head<S, CPX, false, true, true>(p, xs, th, sh, a, b, 1.0, 0.0, false, o0, o1, o2);
    } else {
      Head<S, CPX, false, true, false>(p, xs, th, sh, a, b, 1.0, 0.0, false, o0, o1, o2);
    }
  }
  return ffi::Error::Success();
}

// Symmetric operator, real kernel, pre-sorted anchors, one column (the hot case):
// y = F + B - x with one exp per element and the recurrences scanned eight
// elements at a time in registers, split over threads.
//
// Pass 1 walks kSymChunk-element chunks forward. Per chunk it forms the factors
// al[u] = exp(-a (s_u - s_{u-1})) once into a cache-resident buffer. Forward: each
// vector of 8 elements is prefix-scanned in three shuffle steps under the
// composition (p1, f1) then (p2, f2) = (p1 p2, p2 f1 + f2), giving the local sums f
// and the decays p from the vector's predecessor, and F = f + p F_prev (one
// multiply-add per 8 elements on the serial path). Backward, inside the chunk,
// with the same factors shifted by one: local sums b and decays r to the element
// after the vector, B = b + r B_next (chunk-local B: zero past the chunk) and the
// decay Q = r Q_next from each element to the first element of the next chunk.
// Pass 1 writes c (F + B - x) and Q. Pass 2 walks the chunks backward and adds
// c Q G (G the global backward sum at the next chunk's first element), skipping
// the leading elements whose stored Q underflowed to 0 (adding 0 is exact).
//
// Threads: the chunks are split into contiguous groups, one per thread. Pass 1
// runs per group with F starting at 0 and also returns the group's last F and the
// product P of all its factors; the carries entering each group (forward:
// F_in(g + 1) = F_end(g) + P(g) F_in(g); backward: the chain of chunk sums) are a
// few scalar steps; then pass 2 runs per group and, forward, adds c F_in times the
// decay exp(-a (s_j - s_e)) from the element e before the group to each leading
// element j until that term underflows in the storage type. Only factors <= 1 are
// multiplied (decays of non-negative gaps; products may underflow to 0 harmlessly)
// and ties (gap 0, factor 1) stay exact. Recurrences accumulate in double (8 lanes
// per vector), except float32-stored chunks that pass the kWin criterion, which run
// in float32 (16 lanes; JAXLAB_LAPLEX_F32_SCAN=0 turns that off); the carries
// between chunks and threads are kept in double; outputs are rounded to the storage
// type after each pass.
// GCC only (__builtin_shuffle) and only on CPUs with AVX-512 (64-byte vectors);
// otherwise the SymCols path runs.
#if defined(__GNUC__) && !defined(__clang__)
#define LAPLEX_SYM_SIMD 1
constexpr int64_t kSymChunk = 2048;

// per-chunk results of pass 1 that pass 2 and the carry chain need
struct SymChunk {
  double bstart;  // chunk-local B at the chunk's first element
  double qstart;  // decay from the chunk's first element to the next chunk's first
  int64_t qlo;    // stored Q is zero before this offset (decays only shrink)
};

// lane geometry of a 64-byte vector of T, and the scan masks: `up` d moves lane i - d
// to lane i (lanes i < d take the second operand's identity value), `dn` d moves
// lane i + d to lane i (lanes past the end take the identity)
template <typename T>
struct Lanes;
template <>
struct Lanes<double> {
  static constexpr int W = 8;
  typedef double V __attribute__((vector_size(64)));
  typedef int64_t I __attribute__((vector_size(64)));
};
template <>
struct Lanes<float> {
  static constexpr int W = 16;
  typedef float V __attribute__((vector_size(64)));
  typedef int32_t I __attribute__((vector_size(64)));
};

template <typename T>
struct ScanMasks {
  static constexpr int W = Lanes<T>::W;
  typename Lanes<T>::I up[4], dn[4];
  ScanMasks() {
    for (int l = 0; (1 << l) < W; ++l) {
      const int d = 1 << l;
      for (int i = 0; i < W; ++i) {
        up[l][i] = i >= d ? i - d : W + i;
        dn[l][i] = i + d < W ? i + d : W + i;
      }
    }
  }
};

// exp(x) for x <= 0 in float (~2e-7 relative; below e^-87 flushes to 0)
inline float ExpNonPosF(float x) { return ExpNonPosT<float, 6>(x); }

// float32 recurrences are used for float32 storage on chunks where every window of
// kWin consecutive gaps decays by at least e^-kWinDecay: then a rounding error is
// forgotten within ~kWin steps, so the recurrence's error stays within a few times
// kWin float32 ulps of the largest partial sum (the normwise error of the output
// stays ~1e-6). Other chunks (ties, clusters, small decays) run in double.
constexpr int64_t kWin = 32;
constexpr double kWinDecay = 4.0;

// pass 1 for chunk [j0, j0 + cnt), recurrences in T. fc: F at the element before the
// chunk (updated), pc: product of the group's factors (updated). Returns false, having
// written nothing, when T is float and the chunk fails the window criterion.
template <typename S, typename T>
__attribute__((always_inline)) inline bool SymChunkWalk(
    int64_t n, int64_t j0, int64_t cnt, const S* x, const S* src, double a, double cw, bool acc,
    S* y, S* qbuf, SymChunk* st_ch, double* fc_io, double* pc_io, T* al, T* fb,
    const ScanMasks<T>& mk) {
  typedef typename Lanes<T>::V V;
  constexpr int W = Lanes<T>::W;
  const V zero = V{} * T(0);
  const V one = zero + T(1);
  const int steps = W == 8 ? 3 : 4;
  // scan the pairs (p, f) of a vector: lane i combines with lane i - d (`up`, prefix) or
  // i + d (`dn`, suffix); out-of-range lanes are (1, 0)
  auto scan = [&](V& p, V& f, const typename Lanes<T>::I* m) {
    for (int l = 0; l < steps; ++l) {
      f = f + p * __builtin_shuffle(f, zero, m[l]);
      p = p * __builtin_shuffle(p, one, m[l]);
    }
  };
  auto factor = [&](int64_t j) -> T {  // exp(-a (s_j - s_{j-1})) for j > 0
    if constexpr (sizeof(T) == sizeof(float)) {
      return ExpNonPosF(static_cast<float>(-a) * (static_cast<float>(src[j]) -
                                                  static_cast<float>(src[j - 1])));
    } else {
      return ExpFactor<S>(-a * (static_cast<double>(src[j]) - static_cast<double>(src[j - 1])));
    }
  };
  const S* xp = x + j0;
  const int64_t nv = cnt / W, body = W * nv;
  const bool more = j0 + cnt < n;
  if constexpr (sizeof(T) == sizeof(float)) {
    const float lim = static_cast<float>(kWinDecay / a);
    int bad = 0;
    for (int64_t u = std::max<int64_t>(0, kWin - j0); u < cnt; ++u) {
      bad |= static_cast<int>(static_cast<float>(src[j0 + u]) -
                              static_cast<float>(src[j0 + u - kWin]) < lim);
    }
    if (bad) return false;
  }
  al[0] = j0 > 0 ? factor(j0) : T(0);
  if constexpr (sizeof(T) == sizeof(float)) {
    const float na = static_cast<float>(-a);
    const S* sp = src + j0;
    for (int64_t u = 1; u < cnt; ++u) {
      al[u] = ExpNonPosF(na * (static_cast<float>(sp[u]) - static_cast<float>(sp[u - 1])));
    }
  } else {
    for (int64_t u = 1; u < cnt; ++u) al[u] = factor(j0 + u);
  }
  al[cnt] = more ? factor(j0 + cnt) : T(0);
  T fc = static_cast<T>(*fc_io);
  double pc = *pc_io;
  // forward
  for (int64_t v = 0; v < nv; ++v) {
    V p, f;
    std::memcpy(&p, al + W * v, sizeof(V));
    for (int e = 0; e < W; ++e) f[e] = static_cast<T>(xp[W * v + e]);
    scan(p, f, mk.up);
    const T fl = f[W - 1] + p[W - 1] * fc;  // the serial path: one scalar multiply-add
    f = f + p * fc;
    fc = fl;
    pc *= static_cast<double>(p[W - 1]);
    std::memcpy(fb + W * v, &f, sizeof(V));
  }
  for (int64_t u = body; u < cnt; ++u) {
    fc = al[u] * fc + static_cast<T>(xp[u]);
    pc *= static_cast<double>(al[u]);
    fb[u] = fc;
  }
  // prefetch the next chunk's anchors and values while this one is walked backward
  // (one 64-byte line of each per vector)
  const S* sn = src + j0 + cnt;
  const S* xn = xp + cnt;
  const int64_t pf_end = more ? std::min(kSymChunk, n - j0 - cnt) : 0;
  // backward inside the chunk (the tail first)
  T bc = 0, qc = 1;  // chunk-local B and its decay Q at element u + 1
  int64_t lo = 0;
  for (int64_t u = cnt - 1; u >= body; --u) {
    const T xu = static_cast<T>(xp[u]);
    bc = al[u + 1] * bc + xu;
    qc = al[u + 1] * qc;
    const T o = static_cast<T>(cw) * (fb[u] + bc - xu);
    y[j0 + u] = static_cast<S>(acc ? static_cast<T>(y[j0 + u]) + o : o);
    qbuf[j0 + u] = static_cast<S>(qc);
  }
  const V cwv = zero + static_cast<T>(cw);
  for (int64_t v = nv - 1; v >= 0; --v) {
    V r, b, xv, fv;
    const int64_t pf = (nv - 1 - v) * (64 / static_cast<int64_t>(sizeof(S)));
    if (pf < pf_end) {
      __builtin_prefetch(sn + pf);
      __builtin_prefetch(xn + pf);
    }
    std::memcpy(&r, al + W * v + 1, sizeof(V));
    std::memcpy(&fv, fb + W * v, sizeof(V));
    for (int e = 0; e < W; ++e) xv[e] = static_cast<T>(xp[W * v + e]);
    b = xv;
    scan(r, b, mk.dn);
    const T bl = b[0] + r[0] * bc, ql = r[0] * qc;
    b = b + r * bc;
    r = r * qc;
    bc = bl;
    qc = ql;
    V o = cwv * (fv + b - xv);
    S* yj = y + j0 + W * v;
    S* qj = qbuf + j0 + W * v;
    if (acc) {
      for (int e = 0; e < W; ++e) o[e] += static_cast<T>(yj[e]);
    }
    for (int e = 0; e < W; ++e) yj[e] = static_cast<S>(o[e]);
    if (lo == 0) {
      for (int e = 0; e < W; ++e) qj[e] = static_cast<S>(r[e]);
      // r grows along the vector: all stored values are 0 once the last one is, and
      // so are those of every earlier element (pass 2 skips them: adding 0 is exact)
      if (static_cast<S>(r[W - 1]) == S(0)) lo = W * (v + 1);
    }
  }
  *st_ch = SymChunk{static_cast<double>(bc), static_cast<double>(qc), lo};
  *fc_io = static_cast<double>(fc);
  *pc_io = pc;
  return true;
}

// pass 1 over chunks [ch0, ch1) with F entering at 0; returns the group's last F in
// *fend and the product of its factors (from the element before the group) in *ptot.
// `f32`: try float32 recurrences chunk by chunk (float32 storage only)
template <typename S>
LAPLEX_CLONES void SymPass1(int64_t n, int64_t ch0, int64_t ch1, const S* x, const S* src,
                            double a, double cw, bool acc, S* y, S* qbuf, SymChunk* st,
                            double* fend, double* ptot, bool f32) {
  constexpr int64_t C = kSymChunk;
  std::vector<double> dbuf(2 * C + 16);
  std::vector<float> fbuf(f32 ? 2 * C + 32 : 0);
  const ScanMasks<double> md;
  const ScanMasks<float> mf;
  double fc = 0.0;  // F at the element before the chunk (group-local)
  double pc = 1.0;  // product of the group's factors so far
  for (int64_t ch = ch0; ch < ch1; ++ch) {
    const int64_t j0 = ch * C;
    const int64_t cnt = std::min(C, n - j0);
    if (f32 && SymChunkWalk<S, float>(n, j0, cnt, x, src, a, cw, acc, y, qbuf, st + ch, &fc,
                                      &pc, fbuf.data(), fbuf.data() + C + 32, mf)) {
      continue;
    }
    SymChunkWalk<S, double>(n, j0, cnt, x, src, a, cw, acc, y, qbuf, st + ch, &fc, &pc,
                            dbuf.data(), dbuf.data() + C + 16, md);
  }
  *fend = fc;
  *ptot = pc;
}

// pass 2 over chunks [ch0, ch1): the forward carry `fin` entering the group (decayed
// element by element until it underflows) and the backward carry `g` entering from
// the next group (through each chunk's stored Q)
template <typename S>
LAPLEX_CLONES void SymPass2(int64_t n, int64_t ch0, int64_t ch1, double fin, double g,
                            const S* src, double a, double cw, S* y, const S* qbuf,
                            const SymChunk* st) {
  constexpr int64_t C = kSymChunk;
  const int64_t begin = ch0 * C, end = std::min(ch1 * C, n);
  if (fin != 0.0 && begin > 0) {
    // the decay from the element before the group to s_j is exp(-a (s_j - s_e)) (sorted
    // anchors), so the blocks vectorise; stop after a block whose last contribution
    // underflows in the storage type (later ones are smaller still)
    const double se = static_cast<double>(src[begin - 1]);
    constexpr int64_t kBlock = 256;
    for (int64_t j0 = begin; j0 < end; j0 += kBlock) {
      const int64_t j1 = std::min(end, j0 + kBlock);
      for (int64_t j = j0; j < j1; ++j) {
        const double w = fin * ExpFactor<S>(-a * (static_cast<double>(src[j]) - se));
        y[j] = static_cast<S>(static_cast<double>(y[j]) + cw * w);
      }
      if (static_cast<S>(fin * ExpFactor<S>(-a * (static_cast<double>(src[j1 - 1]) - se))) == S(0)) {
        break;
      }
    }
  }
  for (int64_t ch = ch1 - 1; ch >= ch0; --ch) {
    const int64_t j0 = ch * C;
    const int64_t cnt = std::min(C, n - j0);
    if (g != 0.0) {
      const double w = cw * g;
      for (int64_t u = st[ch].qlo; u < cnt; ++u) {
        y[j0 + u] = static_cast<S>(static_cast<double>(y[j0 + u]) +
                                   w * static_cast<double>(qbuf[j0 + u]));
      }
    }
    g = st[ch].bstart + st[ch].qstart * g;
  }
}

template <typename S>
void SymSortedReal(int64_t n, const S* x, const S* src, double a, double cw, bool acc, S* y,
                   S* qbuf) {
  const int64_t nch = (n + kSymChunk - 1) / kSymChunk;
  const int nt = laplex_par::Threads(n, nch);
  // float32 recurrences on the chunks that allow them (kWin criterion), unless
  // JAXLAB_LAPLEX_F32_SCAN=0 asks for double everywhere (read on every call)
  const char* env = std::getenv("JAXLAB_LAPLEX_F32_SCAN");
  const bool f32 = sizeof(S) == sizeof(float) && !(env != nullptr && env[0] == '0');
  std::vector<SymChunk> st(nch);
  std::vector<int64_t> gb(nt + 1);
  for (int t = 0; t <= nt; ++t) gb[t] = nch * t / nt;
  std::vector<double> fend(nt), ptot(nt), fin(nt, 0.0), gin(nt, 0.0);
  laplex_par::Run(nt, [&](int t) {
    SymPass1<S>(n, gb[t], gb[t + 1], x, src, a, cw, acc, y, qbuf, st.data(), &fend[t], &ptot[t],
                f32);
  });
  for (int t = 1; t < nt; ++t) fin[t] = fend[t - 1] + ptot[t - 1] * fin[t - 1];
  for (int t = nt - 1; t > 0; --t) {
    double g = gin[t];
    for (int64_t ch = gb[t + 1] - 1; ch >= gb[t]; --ch) g = st[ch].bstart + st[ch].qstart * g;
    gin[t - 1] = g;
  }
  laplex_par::Run(nt, [&](int t) {
    SymPass2<S>(n, gb[t], gb[t + 1], fin[t], gin[t], src, a, cw, y, qbuf, st.data());
  });
}
#endif  // LAPLEX_SYM_SIMD

template <ffi::DataType D, ffi::DataType R>
ffi::Error SymImpl(ffi::Buffer<D> x, ffi::Buffer<R> src, ffi::Buffer<D> lam, ffi::Buffer<D> c,
                   ffi::Buffer<ffi::S32> perm, ffi::Buffer<ffi::S32> presorted,
                   ffi::ResultBuffer<D> y, bool check) {
  using S = typename Types<D>::S;
  constexpr bool CPX = Types<D>::kCpx;
  constexpr int W = CPX ? 2 : 1;
  auto xd = x.dimensions();
  auto sd = src.dimensions();
  if (xd.size() != 2 || sd.size() != 2 || lam.dimensions().size() != 1 ||
      c.dimensions().size() != 1 || perm.dimensions().size() != 2) {
    return ffi::Error::InvalidArgument("laplex_fused_sym: unexpected ranks");
  }
  const int64_t h_n = sd[0], n = sd[1], k = xd[1];
  if (xd[0] != n || lam.dimensions()[0] != h_n || c.dimensions()[0] != h_n ||
      perm.dimensions()[0] != h_n || perm.dimensions()[1] != n ||
      presorted.dimensions().size() != 1 || presorted.dimensions()[0] != h_n) {
    return ffi::Error::InvalidArgument("laplex_fused_sym: inconsistent shapes");
  }
  if (check) {
    auto err = CheckPlanFields({{"perm_s", perm.typed_data(), n, -1}}, h_n);
    if (err.failure()) return err;
  }
  S* yo = reinterpret_cast<S*>(y->untyped_data());
  if (n == 0 || k == 0) return ffi::Error::Success();
  AdviseHuge(yo, sizeof(S) * W * n * k);
  if (h_n == 0) {
    std::fill(yo, yo + W * n * k, S(0));
    return ffi::Error::Success();
  }
  const S* xs = reinterpret_cast<const S*>(x.untyped_data());
  const S* ls = reinterpret_cast<const S*>(lam.untyped_data());
  const S* cs = reinterpret_cast<const S*>(c.untyped_data());
  Scratch<S> scratch(h_n > 1 ? W * n * k : 0);
  for (int64_t h = 0; h < h_n; ++h) {
    double a, b, cr, ci;
    LamAt<S, CPX>(ls, h, &a, &b);
    LamAt<S, CPX>(cs, h, &cr, &ci);
    const int32_t* ph = perm.typed_data() + h * n;
    const S* sh = src.typed_data() + h * n;
    S* fb = h == 0 ? yo : scratch.data();
    // presorted: the caller vouches that perm is the identity (it is then not read)
    const bool ps = presorted.typed_data()[h] != 0 || IsIdentity(ph, 0, n);
    // walk sorted anchors `sv` with values `xv` into `out` (+= when acc): the register
    // scan for one real column on AVX-512 CPUs (the hot case: one exp per element,
    // threads; emulated on narrower units it is slower), else SymCols
    auto walk = [&](const S* xv, const S* sv, bool acc, S* out, S* fbuf) {
#ifdef LAPLEX_SYM_SIMD
      if constexpr (!CPX) {
        static const bool wide = __builtin_cpu_supports("avx512f");
        if (k == 1 && wide) {
          Scratch<S> qb(n);
          SymSortedReal<S>(n, xv, sv, a, cr, acc, out, qb.data());
          return;
        }
      }
#endif
      int64_t c0 = 0;
      for (; c0 + 4 <= k; c0 += 4) {
        SymCols<S, CPX, 4>(n, k, c0, ph, xv, sv, a, b, cr, ci, acc, true, out, fbuf);
      }
      for (; c0 < k; ++c0) {
        SymCols<S, CPX, 1>(n, k, c0, ph, xv, sv, a, b, cr, ci, acc, true, out, fbuf);
      }
    };
    if (ps) {
      walk(xs, sh, h > 0, yo, fb);
      continue;
    }
    // unsorted: gather sorted copies (independent loads), walk them, scatter back; the
    // gather and the scatter (perm is a permutation: distinct rows) split over threads
    const int64_t row = W * k;
    Scratch<S> xsrt(n * row), ssrt(n), ysrt(n * row);
    const int nt = laplex_par::Threads(n, n);
    laplex_par::Run(nt, [&](int t) {
      for (int64_t j = n * t / nt, j1 = n * (t + 1) / nt; j < j1; ++j) {
        const int64_t id = Clamp(ph[j], 0, n - 1);
        ssrt[j] = sh[id];
        for (int64_t e = 0; e < row; ++e) xsrt[j * row + e] = xs[id * row + e];
      }
    });
    walk(xsrt.data(), ssrt.data(), false, ysrt.data(), ysrt.data());
    laplex_par::Run(nt, [&](int t) {
      for (int64_t j = n * t / nt, j1 = n * (t + 1) / nt; j < j1; ++j) {
        const int64_t id = Clamp(ph[j], 0, n - 1);
        S* d = yo + id * row;
        const S* sv = &ysrt[j * row];
        for (int64_t e = 0; e < row; ++e) d[e] = h > 0 ? static_cast<S>(d[e] + sv[e]) : sv[e];
      }
    });
  }
  return ffi::Error::Success();
}

// walk sorted real anchors `sv` with one column of values `xv` into `out` (+= with acc),
// the symmetric operator's pass: SymSortedReal on AVX-512 CPUs, else SymCols
template <typename S>
void SymWalkReal(int64_t n, const S* xv, const S* sv, double a, double cw, bool acc, S* out) {
#ifdef LAPLEX_SYM_SIMD
  static const bool wide = __builtin_cpu_supports("avx512f");
  if (wide) {
    Scratch<S> qb(n);
    SymSortedReal<S>(n, xv, sv, a, cw, acc, out, qb.data());
    return;
  }
#endif
  Scratch<S> fb(acc ? n : 0);
  SymCols<S, false, 1>(n, 1, 0, nullptr, xv, sv, a, 0.0, cw, 0.0, acc, true, out,
                       acc ? fb.data() : out);
}

// Symmetric operator from unsorted anchors, real kernel, one column, sorting inside:
// per head, SortCarry (laplex_sort.h) sorts the anchors with the values carried
// through the radix passes (no random gather), the sorted copies are walked, and
// PutBack writes the result in the original order by undoing the sort's two stages
// (no random scatter). Anchors that come nondecreasing are walked in place.
template <ffi::DataType D>
ffi::Error SymFreshImpl(ffi::Buffer<D> x, ffi::Buffer<D> src, ffi::Buffer<D> lam,
                        ffi::Buffer<D> c, ffi::ResultBuffer<D> y) {
  using S = ffi::NativeType<D>;
  auto xd = x.dimensions();
  auto sd = src.dimensions();
  if (xd.size() != 2 || sd.size() != 2 || lam.dimensions().size() != 1 ||
      c.dimensions().size() != 1) {
    return ffi::Error::InvalidArgument("laplex_fused_symfresh: unexpected ranks");
  }
  const int64_t h_n = sd[0], n = sd[1];
  if (xd[0] != n || xd[1] != 1 || lam.dimensions()[0] != h_n || c.dimensions()[0] != h_n) {
    return ffi::Error::InvalidArgument("laplex_fused_symfresh: inconsistent shapes");
  }
  if (n >= (int64_t{1} << 31)) {
    return ffi::Error::InvalidArgument("laplex_fused_symfresh: more than 2^31 - 1 anchors");
  }
  S* yo = y->typed_data();
  if (n == 0) return ffi::Error::Success();
  AdviseHuge(yo, sizeof(S) * n);
  if (h_n == 0) {
    std::fill(yo, yo + n, S(0));
    return ffi::Error::Success();
  }
  const S* xs = x.typed_data();
  for (int64_t h = 0; h < h_n; ++h) {
    const double a = static_cast<double>(lam.typed_data()[h]);
    const double cw = static_cast<double>(c.typed_data()[h]);
    const S* sh = src.typed_data() + h * n;
    auto srt = laplex_sort::SortCarry<S>(sh, xs, n);
    if (srt.sorted) {
      SymWalkReal<S>(n, xs, sh, a, cw, h > 0, yo);
      continue;
    }
    Scratch<S> ys(n);
    SymWalkReal<S>(n, srt.x.data(), srt.s.data(), a, cw, false, ys.data());
    laplex_sort::PutBack<S>(srt, sh, ys.data(), n, h > 0, yo);
  }
  return ffi::Error::Success();
}

// ---------------------------------------------------------------------------------
// Gradient of the symmetric operator, real kernel, one column (t is s: the Gram and
// training case). Per head, over the sorted anchors s_j with gaps d_j = s_j - s_{j-1},
// factors al_j = exp(-a d_j), the one-sided sums of SymCols (both include j)
//   F_j = al_j F_{j-1} + x_j,   B_j = al_{j+1} B_{j+1} + x_j    (F^w, B^w: the same of w)
// and the left Jordan sums G_j = al_j G_{j-1} + al_j d_j F_{j-1}
// (= sum_{k<j} (s_j - s_k) exp(-a (s_j - s_k)) x_k), the cotangents of L = w . (c K x) are
//   v_bar_j  (+)= c (F^w_j + B^w_j - w_j)               (c K w, accumulated over heads)
//   c_bar      = sum_j w_j (F_j + B_j - x_j)              (w . K x)
//   a_bar      = -c sum_j (w_j G_j + x_j G^w_j)           (the pairs k < j and k > j)
//   ts_bar_j   = -a c (w_j T_j + x_j S_j)                 (the t- and s-roles together)
//   T_j = F_j - B_j + x_j + 2 R_j,   S_j = F^w_j - B^w_j - w_j - 2 L_j
// with R_j (L_j) the sum of x (w) over the elements after (before) j in sorted order
// tied with it: the t-role counts tied sources as left of a target and the s-role tied
// targets as right of a source, the one-sided derivative of |t - s| that the general
// passes (and autodiff of the dense matrix) take; without ties R = L = 0.
//
// Pass 0 (threads over chunks of kGradChunk): per chunk the chunk-local B^x, B^w at its
// first element (a vectorised sum of exp(-a (s_j - s_first)) x_j, stopped once the
// factor underflows, or for float32 storage once it is below 2^-80) and the tied runs at its ends; a few scalar steps per chunk then
// give the true B at every chunk start and the tie sums entering every chunk. Pass 1
// (threads over groups of chunks): each group starts from F^x, F^w, G^x, G^w at the
// element before it (vectorised sums over earlier elements, stopped at underflow) and
// walks its chunks: factors once per chunk (vectorised exp), the six recurrences in one
// loop (forward chains at u, backward chains at cnt - 1 - u, all independent), then the
// outputs and the two sums in a vectorisable loop. Everything in double; outputs are
// rounded to the storage type once.
constexpr int64_t kGradChunk = 1024;
typedef double V8 __attribute__((vector_size(64)));

// One head's rows of a symmetric plan (perm_s, rank_t, perm_t, rank_s, each n long) for
// the check fused into the pass over pre-sorted anchors: Bad(j0, j1) is nonzero unless
// both perms are the identity and both ranks lie in [0, n] on [j0, j1). A plan that
// passes everywhere is well formed (laplex_check.h); one that does not is checked
// again in full after the pass, which finds the defect and names it.
struct PlanRows {
  const int32_t *perm_s, *rank_t, *perm_t, *rank_s;
  int64_t n;
  uint32_t Bad(int64_t j0, int64_t j1) const {
    uint32_t bad = 0;
    const uint32_t hi = static_cast<uint32_t>(n);
    for (int64_t j = j0; j < j1; ++j) {
      const int32_t jj = static_cast<int32_t>(j);
      bad |= static_cast<uint32_t>(perm_s[j] ^ jj) | static_cast<uint32_t>(perm_t[j] ^ jj) |
             static_cast<uint32_t>(static_cast<uint32_t>(rank_t[j]) > hi) |
             static_cast<uint32_t>(static_cast<uint32_t>(rank_s[j]) > hi);
    }
    return bad;
  }
};

struct GradChunk {
  double bx, bw;    // B^x, B^w at the chunk's first element (chunk-local, then true)
  double lead_x;    // sum of x over the leading run of anchors equal to the first
  double trail_w;   // sum of w over the trailing run of anchors equal to the last
  bool same;        // all anchors of the chunk equal
};

// out[u] = exp(-a e[u]) for e >= 0 (the precision of S's factors)
template <typename S>
LAPLEX_CLONES void GradExp(const double* e, double a, double* out, int64_t n) {
  for (int64_t u = 0; u < n; ++u) out[u] = ExpFactor<S>(-a * e[u]);
}

// pass 0 for chunks [ch0, ch1)
template <typename S>
void SymGradPass0(int64_t n, int64_t ch0, int64_t ch1, const S* x, const S* w, const S* src,
                  double a, GradChunk* info) {
  constexpr int64_t C = kGradChunk, kBlk = 128;
  // where the sum stops: at double underflow (0) for float64 storage; for float32
  // storage once a factor is below 2^-80 (~8e-25): each term left out is below 2^-80
  // times its |x|, far under the 3e-10 relative error that float32 storage's factors
  // (ExpFactor<float>) already carry on every term kept
  const double kStop = sizeof(S) < sizeof(double) ? 0x1p-80 : 0.0;
  double e[kBlk], f[kBlk], xv[kBlk], wv[kBlk];
  for (int64_t ch = ch0; ch < ch1; ++ch) {
    const int64_t j0 = ch * C, cnt = std::min(C, n - j0);
    const S* sp = src + j0;
    const S* xp = x + j0;
    const S* wp = w + j0;
    const double s0 = static_cast<double>(sp[0]);
    double bx = 0.0, bw = 0.0;
    for (int64_t u0 = 0; u0 < cnt; u0 += kBlk) {
      const int64_t m = std::min(kBlk, cnt - u0);
      for (int64_t u = 0; u < m; ++u) e[u] = static_cast<double>(sp[u0 + u]) - s0;
      GradExp<S>(e, a, f, m);
      // eight lanes at a time (kBlk is a multiple of 8; a short last block is padded)
      for (int64_t u = m; u < ((m + 7) & ~int64_t{7}); ++u) f[u] = xv[u] = wv[u] = 0.0;
      for (int64_t u = 0; u < m; ++u) {
        xv[u] = static_cast<double>(xp[u0 + u]);
        wv[u] = static_cast<double>(wp[u0 + u]);
      }
      V8 px = V8{} * 0.0, pw = px;
      for (int64_t u = 0; u < m; u += 8) {
        V8 fv, xq, wq;
        std::memcpy(&fv, f + u, sizeof(V8));
        std::memcpy(&xq, xv + u, sizeof(V8));
        std::memcpy(&wq, wv + u, sizeof(V8));
        px += fv * xq;
        pw += fv * wq;
      }
      for (int e = 0; e < 8; ++e) {
        bx += px[e];
        bw += pw[e];
      }
      if (f[m - 1] <= kStop) break;  // later anchors decay further
    }
    GradChunk& g = info[ch];
    g.bx = bx;
    g.bw = bw;
    int64_t u = 0;
    g.lead_x = 0.0;
    while (u < cnt && sp[u] == sp[0]) g.lead_x += static_cast<double>(xp[u++]);
    g.same = u == cnt;
    g.trail_w = 0.0;
    for (u = cnt - 1; u >= 0 && sp[u] == sp[cnt - 1]; --u) g.trail_w += static_cast<double>(wp[u]);
  }
}

// F^x, F^w, G^x, G^w at element e (sums over j <= e, stopped once the factor underflows)
template <typename S>
void SymGradCarry(int64_t e, const S* x, const S* w, const S* src, double a, double out[4]) {
  constexpr int64_t kBlk = 128;
  double d[kBlk], f[kBlk];
  const double se = static_cast<double>(src[e]);
  for (int q = 0; q < 4; ++q) out[q] = 0.0;
  for (int64_t j1 = e + 1; j1 > 0; j1 -= kBlk) {
    const int64_t jlo = std::max<int64_t>(0, j1 - kBlk), m = j1 - jlo;
    for (int64_t u = 0; u < m; ++u) d[u] = se - static_cast<double>(src[jlo + u]);
    GradExp<S>(d, a, f, m);
    for (int64_t u = 0; u < m; ++u) {
      const double fx = f[u] * static_cast<double>(x[jlo + u]);
      const double fw = f[u] * static_cast<double>(w[jlo + u]);
      out[0] += fx;
      out[1] += fw;
      out[2] += d[u] * fx;
      out[3] += d[u] * fw;
    }
    if (f[0] == 0.0) break;  // earlier anchors decay further
  }
}

// pass 1 over chunks [ch0, ch1): cf = (F^x, F^w, G^x, G^w) before the group, bnext[ch]
// (x, w) the true B at chunk ch's end, lin/rin the tie sums entering each chunk.
// Writes vb (accumulating when acc) and gb; returns the group's sums of c_bar and a_bar.
// The tie sums run as two more chains, L_u = k_u (L_{u-1} + w_{u-1}) and
// R_u = k_{u+1} (R_{u+1} + x_{u+1}) with k_u = [d_u == 0], branch free (ties are common
// with float32 anchors). a_bar's two sums accumulate in the chain loop (the Jordan
// chains are not stored); the outputs and c_bar's sum run in vectorisable loops.
template <typename S>
LAPLEX_CLONES void SymGradPass1(int64_t n, int64_t ch0, int64_t ch1, const S* x, const S* w,
                                const S* src, double a, double cw, bool acc,
                                const double* cf, const double* bnext, const double* lin,
                                const double* rin, S* vb, S* gb, double* csum, double* asum,
                                const PlanRows* chk, bool* chk_ok) {
  constexpr int64_t C = kGradChunk;
  constexpr int64_t L = C + 16;
  uint32_t chk_bad = 0;  // buffer stride (the factors have cnt + 1 entries)
  std::vector<double> buf(12 * L);
  double* d = buf.data();
  double* al = d + L;
  double* kp = al + L;  // k_u, with k_0 = k_cnt = 1 (the entering sums lin / rin)
  double* xd = kp + L + 8;  // the chunk's x, w in double; xd[cnt] = 0, wd[-1] = 0
  double* wd = xd + L;
  double* fxb = wd + L;
  double* fwb = fxb + L;
  double* bxb = fwb + L;
  double* bwb = bxb + L;
  double* ltb = bwb + L;
  double* rtb = ltb + L;
  double fx = cf[0], fw = cf[1], gx = cf[2], gw = cf[3];
  const double k1 = -a * cw;
  V8 cs = V8{} * 0.0;
  double as_w = 0.0, as_x = 0.0;  // sum w G^x, sum x G^w (accumulated in the chain loop)
  for (int64_t ch = ch0; ch < ch1; ++ch) {
    const int64_t j0 = ch * C, cnt = std::min(C, n - j0), j1 = j0 + cnt;
    const S* sp = src + j0;
    const S* xp = x + j0;
    const S* wp = w + j0;
    d[0] = j0 > 0 ? static_cast<double>(sp[0]) - static_cast<double>(src[j0 - 1]) : 0.0;
    for (int64_t u = 1; u < cnt; ++u) {
      d[u] = static_cast<double>(sp[u]) - static_cast<double>(sp[u - 1]);
    }
    d[cnt] = j1 < n ? static_cast<double>(src[j1]) - static_cast<double>(sp[cnt - 1]) : 0.0;
    GradExp<S>(d, a, al, cnt + 1);
    if (j0 == 0) al[0] = 0.0;    // nothing before the first anchor
    if (j1 == n) al[cnt] = 0.0;  // nothing after the last
    for (int64_t u = 0; u < cnt; ++u) {
      xd[u] = static_cast<double>(xp[u]);
      wd[u] = static_cast<double>(wp[u]);
      kp[u] = d[u] == 0.0 ? 1.0 : 0.0;
    }
    kp[0] = kp[cnt] = 1.0;
    xd[cnt] = wd[-1] = 0.0;  // k_0 w_{-1} = k_cnt x_cnt = 0
    // the eight recurrences; forward at u, backward at v = cnt - 1 - u. The tie chains
    // L_u = k_u L_{u-1} + k_u w_{u-1}, R_v = k_{v+1} R_{v+1} + k_{v+1} x_{v+1}; the Jordan
    // chains take al_u d_u F_{u-1}, and their two sums over the chunk (a_bar's) are
    // accumulated here rather than stored
    double bx = bnext[2 * ch], bw = bnext[2 * ch + 1], lt = lin[ch], rt = rin[ch];
    // prefetch the next chunk's anchors and values (one 64-byte line of each every
    // kLine steps) while the chains run
    constexpr int64_t kLine = 64 / static_cast<int64_t>(sizeof(S));
    const int64_t pf_end = std::min(C, n - j1);
    for (int64_t u = 0; u < cnt; ++u) {
      const int64_t v = cnt - 1 - u;
      if (u % kLine == 0 && u < pf_end) {
        __builtin_prefetch(src + j1 + u);
        __builtin_prefetch(x + j1 + u);
        __builtin_prefetch(w + j1 + u);
      }
      const double ad = al[u] * d[u];
      gx = al[u] * gx + ad * fx;
      gw = al[u] * gw + ad * fw;
      fx = al[u] * fx + xd[u];
      fw = al[u] * fw + wd[u];
      lt = kp[u] * lt + kp[u] * wd[u - 1];
      rt = kp[v + 1] * rt + kp[v + 1] * xd[v + 1];
      bx = al[v + 1] * bx + xd[v];
      bw = al[v + 1] * bw + wd[v];
      as_w += wd[u] * gx;
      as_x += xd[u] * gw;
      fxb[u] = fx;
      fwb[u] = fw;
      ltb[u] = lt;
      rtb[v] = rt;
      bxb[v] = bx;
      bwb[v] = bw;
    }
    // outputs and c_bar's sum in one vectorised loop (the accumulating form for later
    // heads); the buffers are padded with zeros to whole vectors
    for (int64_t u = cnt; u < ((cnt + 7) & ~int64_t{7}); ++u) {
      xd[u] = wd[u] = fxb[u] = bxb[u] = 0.0;
    }
    S* vo = vb + j0;
    S* go = gb + j0;
    for (int64_t u = 0; u < cnt; ++u) {
      const double tt = fxb[u] - bxb[u] + xd[u] + 2.0 * rtb[u];
      const double st = fwb[u] - bwb[u] - wd[u] - 2.0 * ltb[u];
      go[u] = static_cast<S>(k1 * (wd[u] * tt + xd[u] * st));
      const double vv = cw * (fwb[u] + bwb[u] - wd[u]);
      vo[u] = static_cast<S>(acc ? static_cast<double>(vo[u]) + vv : vv);
    }
    if (chk != nullptr) chk_bad |= chk->Bad(j0, j1);
    for (int64_t u = 0; u < cnt; u += 8) {
      V8 xv, wv, f, b;
      std::memcpy(&xv, xd + u, sizeof(V8));
      std::memcpy(&wv, wd + u, sizeof(V8));
      std::memcpy(&f, fxb + u, sizeof(V8));
      std::memcpy(&b, bxb + u, sizeof(V8));
      cs += wv * (f + b - xv);
    }
  }
  double c_tot = 0.0;
  for (int e = 0; e < 8; ++e) c_tot += cs[e];
  const double a_tot = as_w + as_x;
  if (chk != nullptr) *chk_ok = chk_bad == 0;
  *csum = c_tot;
  *asum = a_tot;
}

// one head on sorted copies: vb (+)= c K w, gb = the anchor cotangent; returns c_bar
// and a_bar of the head
template <typename S>
void SymGradSorted(int64_t n, const S* x, const S* w, const S* src, double a, double cw,
                   bool acc, S* vb, S* gb, double* c_bar, double* a_bar,
                   const PlanRows* chk = nullptr, bool* chk_ok = nullptr) {
  constexpr int64_t C = kGradChunk;
  const int64_t nch = (n + C - 1) / C;
  const int nt = laplex_par::Threads(n, nch);
  std::vector<int64_t> gbd(nt + 1);
  for (int t = 0; t <= nt; ++t) gbd[t] = nch * t / nt;
  std::vector<GradChunk> info(nch);
  laplex_par::Run(nt, [&](int t) { SymGradPass0<S>(n, gbd[t], gbd[t + 1], x, w, src, a, info.data()); });
  // true B at each chunk's end (x, w), tie sums entering each chunk (serial, per chunk)
  std::vector<double> bnext(2 * nch, 0.0), lin(nch, 0.0), rin(nch, 0.0);
  double bx = 0.0, bw = 0.0;  // true B at the next chunk's first element
  for (int64_t ch = nch - 1; ch >= 0; --ch) {
    bnext[2 * ch] = bx;
    bnext[2 * ch + 1] = bw;
    const int64_t j0 = ch * C;
    const double e = ch + 1 < nch ? ExpFactor<S>(-a * (static_cast<double>(src[j0 + C]) -
                                                       static_cast<double>(src[j0])))
                                  : 0.0;
    bx = info[ch].bx + e * bx;
    bw = info[ch].bw + e * bw;
  }
  for (int64_t ch = 1; ch < nch; ++ch) {
    const int64_t j0 = ch * C;
    if (src[j0 - 1] == src[j0]) lin[ch] = info[ch - 1].trail_w + (info[ch - 1].same ? lin[ch - 1] : 0.0);
  }
  for (int64_t ch = nch - 2; ch >= 0; --ch) {
    const int64_t j1 = (ch + 1) * C;
    if (src[j1] == src[j1 - 1]) rin[ch] = info[ch + 1].lead_x + (info[ch + 1].same ? rin[ch + 1] : 0.0);
  }
  std::vector<double> cs(nt), as(nt);
  std::vector<char> ok(nt, 1);
  laplex_par::Run(nt, [&](int t) {
    double cf[4] = {0.0, 0.0, 0.0, 0.0};
    if (gbd[t] > 0) SymGradCarry<S>(gbd[t] * C - 1, x, w, src, a, cf);
    bool good = true;
    SymGradPass1<S>(n, gbd[t], gbd[t + 1], x, w, src, a, cw, acc, cf, bnext.data(), lin.data(),
                    rin.data(), vb, gb, &cs[t], &as[t], chk, &good);
    ok[t] = good;
  });
  if (chk_ok != nullptr) {
    *chk_ok = true;
    for (int t = 0; t < nt; ++t) *chk_ok = *chk_ok && ok[t] != 0;
  }
  double c_tot = 0.0, a_tot = 0.0;
  for (int t = 0; t < nt; ++t) {
    c_tot += cs[t];
    a_tot += as[t];
  }
  *c_bar = c_tot;
  *a_bar = -cw * a_tot;
}

// The cotangents of w . y for y = sum_h c_h K_h x, K_h = exp(-a_h |s_h[i] - s_h[j]|), one
// real column (laplex_fused_symgrad): v_bar (N, 1) = sum_h c_h K_h w, ts_bar (H, N) the
// anchors' cotangent through both roles, a_bar, c_bar (H,). Unsorted anchors walk sorted
// copies (gathered, and the results scattered back, on all threads). With `check`, all
// four plan fields are checked (the general gradient passes read them all, so a
// malformed plan is refused alike): first, or, when every head is flagged pre-sorted,
// inside the pass (PlanRows) with the full check only where that fast test fails; the
// error text is the same either way.
template <ffi::DataType D>
ffi::Error SymGradImpl(ffi::Buffer<D> x, ffi::Buffer<D> w, ffi::Buffer<D> src, ffi::Buffer<D> lam,
                       ffi::Buffer<D> c, ffi::Buffer<ffi::S32> perm_s, ffi::Buffer<ffi::S32> rank_t,
                       ffi::Buffer<ffi::S32> perm_t, ffi::Buffer<ffi::S32> rank_s,
                       ffi::Buffer<ffi::S32> presorted, ffi::ResultBuffer<D> v_bar,
                       ffi::ResultBuffer<D> ts_bar, ffi::ResultBuffer<D> a_bar,
                       ffi::ResultBuffer<D> c_bar, bool check) {
  using S = ffi::NativeType<D>;
  auto xd = x.dimensions();
  auto sd = src.dimensions();
  if (xd.size() != 2 || w.dimensions().size() != 2 || sd.size() != 2 ||
      lam.dimensions().size() != 1 || c.dimensions().size() != 1) {
    return ffi::Error::InvalidArgument("laplex_fused_symgrad: unexpected ranks");
  }
  const int64_t h_n = sd[0], n = sd[1];
  auto plan_ok = [&](ffi::AnyBuffer::Dimensions pd) {
    return pd.size() == 2 && pd[0] == h_n && pd[1] == n;
  };
  if (xd[0] != n || xd[1] != 1 || w.dimensions()[0] != n || w.dimensions()[1] != 1 ||
      lam.dimensions()[0] != h_n || c.dimensions()[0] != h_n || !plan_ok(perm_s.dimensions()) ||
      !plan_ok(rank_t.dimensions()) || !plan_ok(perm_t.dimensions()) ||
      !plan_ok(rank_s.dimensions()) || presorted.dimensions().size() != 1 ||
      presorted.dimensions()[0] != h_n) {
    return ffi::Error::InvalidArgument("laplex_fused_symgrad: inconsistent shapes");
  }
  auto fields = WalkFields(perm_s.typed_data(), rank_t.typed_data(), perm_t.typed_data(), n, n,
                           false);
  fields.push_back({"rank_s", rank_s.typed_data(), n, n});
  // `check`: when every head is flagged pre-sorted (and there is work), the check runs
  // fused into the pass (PlanRows: identity perms, ranks in range, read alongside the
  // compute-bound chains) and, only where that fast test fails, in full afterwards;
  // otherwise in full first. Either way a malformed plan gets the same error.
  bool fused_check = check && n > 0 && h_n > 0;
  for (int64_t h = 0; fused_check && h < h_n; ++h) fused_check = presorted.typed_data()[h] != 0;
  if (check && !fused_check) {
    auto err = CheckPlanFields(fields, h_n);
    if (err.failure()) return err;
  }
  bool plan_fast_ok = true;
  S* vo = v_bar->typed_data();
  S* go = ts_bar->typed_data();
  S* ao = a_bar->typed_data();
  S* co = c_bar->typed_data();
  std::fill(ao, ao + h_n, S(0));
  std::fill(co, co + h_n, S(0));
  if (n == 0) return ffi::Error::Success();
  AdviseHuge(vo, sizeof(S) * n);
  AdviseHuge(go, sizeof(S) * h_n * n);
  if (h_n == 0) {
    std::fill(vo, vo + n, S(0));
    return ffi::Error::Success();
  }
  const S* xs = x.typed_data();
  const S* ws = w.typed_data();
  for (int64_t h = 0; h < h_n; ++h) {
    const double a = static_cast<double>(lam.typed_data()[h]);
    const double cw = static_cast<double>(c.typed_data()[h]);
    const int32_t* ph = perm_s.typed_data() + h * n;
    const S* sh = src.typed_data() + h * n;
    S* gh = go + h * n;
    double cb, ab;
    if (fused_check) {
      const PlanRows rows{ph, rank_t.typed_data() + h * n, perm_t.typed_data() + h * n,
                          rank_s.typed_data() + h * n, n};
      bool ok = true;
      SymGradSorted<S>(n, xs, ws, sh, a, cw, h > 0, vo, gh, &cb, &ab, &rows, &ok);
      plan_fast_ok = plan_fast_ok && ok;
    } else if (presorted.typed_data()[h] != 0 || IsIdentity(ph, 0, n)) {
      SymGradSorted<S>(n, xs, ws, sh, a, cw, h > 0, vo, gh, &cb, &ab);
    } else {
      Scratch<S> xsrt(n), wsrt(n), ssrt(n), vsrt(n), gsrt(n);
      const int nt = laplex_par::Threads(n, n);
      laplex_par::Run(nt, [&](int t) {
        for (int64_t j = n * t / nt, j1 = n * (t + 1) / nt; j < j1; ++j) {
          if (j + kPf < j1) {
            const int64_t ip = Clamp(ph[j + kPf], 0, n - 1);
            __builtin_prefetch(sh + ip);
            __builtin_prefetch(xs + ip);
            __builtin_prefetch(ws + ip);
          }
          const int64_t id = Clamp(ph[j], 0, n - 1);
          ssrt[j] = sh[id];
          xsrt[j] = xs[id];
          wsrt[j] = ws[id];
        }
      });
      SymGradSorted<S>(n, xsrt.data(), wsrt.data(), ssrt.data(), a, cw, false, vsrt.data(),
                       gsrt.data(), &cb, &ab);
      laplex_par::Run(nt, [&](int t) {
        for (int64_t j = n * t / nt, j1 = n * (t + 1) / nt; j < j1; ++j) {
          if (j + kPf < j1) {
            const int64_t ip = Clamp(ph[j + kPf], 0, n - 1);
            __builtin_prefetch(vo + ip, 1);
            __builtin_prefetch(gh + ip, 1);
          }
          const int64_t id = Clamp(ph[j], 0, n - 1);
          vo[id] = h > 0 ? static_cast<S>(vo[id] + vsrt[j]) : vsrt[j];
          gh[id] = gsrt[j];
        }
      });
    }
    ao[h] = static_cast<S>(ab);
    co[h] = static_cast<S>(cb);
  }
  if (fused_check && !plan_fast_ok) return CheckPlanFields(fields, h_n);
  return ffi::Error::Success();
}

}  // namespace

#define LAPLEX_SYMFRESH_DEFINE(SUFFIX, D)                                          \
  XLA_FFI_DEFINE_HANDLER_SYMBOL(LaplexFusedSymFresh##SUFFIX, (SymFreshImpl<D>),    \
                                ffi::Ffi::Bind()                                   \
                                    .Arg<ffi::Buffer<D>>()                         \
                                    .Arg<ffi::Buffer<D>>()                         \
                                    .Arg<ffi::Buffer<D>>()                         \
                                    .Arg<ffi::Buffer<D>>()                         \
                                    .Ret<ffi::Buffer<D>>());

LAPLEX_SYMFRESH_DEFINE(F32, ffi::F32)
LAPLEX_SYMFRESH_DEFINE(F64, ffi::F64)

#define LAPLEX_SYMGRAD_DEFINE(SUFFIX, D)                                           \
  XLA_FFI_DEFINE_HANDLER_SYMBOL(LaplexFusedSymGrad##SUFFIX, (SymGradImpl<D>),      \
                                ffi::Ffi::Bind()                                   \
                                    .Arg<ffi::Buffer<D>>()                         \
                                    .Arg<ffi::Buffer<D>>()                         \
                                    .Arg<ffi::Buffer<D>>()                         \
                                    .Arg<ffi::Buffer<D>>()                         \
                                    .Arg<ffi::Buffer<D>>()                         \
                                    .Arg<ffi::Buffer<ffi::S32>>()                  \
                                    .Arg<ffi::Buffer<ffi::S32>>()                  \
                                    .Arg<ffi::Buffer<ffi::S32>>()                  \
                                    .Arg<ffi::Buffer<ffi::S32>>()                  \
                                    .Arg<ffi::Buffer<ffi::S32>>()                  \
                                    .Ret<ffi::Buffer<D>>()                         \
                                    .Ret<ffi::Buffer<D>>()                         \
                                    .Ret<ffi::Buffer<D>>()                         \
                                    .Ret<ffi::Buffer<D>>()                         \
                                    .Attr<bool>("check"));

LAPLEX_SYMGRAD_DEFINE(F32, ffi::F32)
LAPLEX_SYMGRAD_DEFINE(F64, ffi::F64)

#define LAPLEX_FUSED_DEFINE(SUFFIX, D, R)                                          \
  XLA_FFI_DEFINE_HANDLER_SYMBOL(LaplexFusedApply##SUFFIX, (ApplyImpl<D, R>),       \
                                ffi::Ffi::Bind()                                   \
                                    .Arg<ffi::Buffer<D>>()                         \
                                    .Arg<ffi::Buffer<R>>()                         \
                                    .Arg<ffi::Buffer<R>>()                         \
                                    .Arg<ffi::Buffer<D>>()                         \
                                    .Arg<ffi::Buffer<D>>()                         \
                                    .Arg<ffi::Buffer<ffi::S32>>()                  \
                                    .Arg<ffi::Buffer<ffi::S32>>()                  \
                                    .Arg<ffi::Buffer<ffi::S32>>()                  \
                                    .Ret<ffi::Buffer<D>>()                         \
                                    .Attr<bool>("check"));                         \
  XLA_FFI_DEFINE_HANDLER_SYMBOL(LaplexFusedParts##SUFFIX, (PartsImpl<D, R>),       \
                                ffi::Ffi::Bind()                                   \
                                    .Arg<ffi::Buffer<D>>()                         \
                                    .Arg<ffi::Buffer<R>>()                         \
                                    .Arg<ffi::Buffer<R>>()                         \
                                    .Arg<ffi::Buffer<D>>()                         \
                                    .Arg<ffi::Buffer<ffi::S32>>()                  \
                                    .Arg<ffi::Buffer<ffi::S32>>()                  \
                                    .Arg<ffi::Buffer<ffi::S32>>()                  \
                                    .Ret<ffi::Buffer<D>>()                         \
                                    .Ret<ffi::Buffer<D>>()                         \
                                    .Ret<ffi::Buffer<D>>()                         \
                                    .Attr<int32_t>("jordan")                       \
                                    .Attr<int32_t>("tie")                          \
                                    .Attr<bool>("check")                           \
                                    .Attr<bool>("transposed"));                    \
  XLA_FFI_DEFINE_HANDLER_SYMBOL(LaplexFusedSym##SUFFIX, (SymImpl<D, R>),           \
                                ffi::Ffi::Bind()                                   \
                                    .Arg<ffi::Buffer<D>>()                         \
                                    .Arg<ffi::Buffer<R>>()                         \
                                    .Arg<ffi::Buffer<D>>()                         \
                                    .Arg<ffi::Buffer<D>>()                         \
                                    .Arg<ffi::Buffer<ffi::S32>>()                  \
                                    .Arg<ffi::Buffer<ffi::S32>>()                  \
                                    .Ret<ffi::Buffer<D>>()                         \
                                    .Attr<bool>("check"));

LAPLEX_FUSED_DEFINE(F32, ffi::F32, ffi::F32)
LAPLEX_FUSED_DEFINE(F64, ffi::F64, ffi::F64)
LAPLEX_FUSED_DEFINE(C64, ffi::C64, ffi::F32)
LAPLEX_FUSED_DEFINE(C128, ffi::C128, ffi::F64)
