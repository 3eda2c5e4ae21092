// Plan check for the LAPLEX fused passes (laplex_fused.cc): the C++ counterpart of
// jaxlab.laplex._plan.plan_error_if, run by a pass whose FFI call has `check` set on
// the plan fields that pass reads, before it reads them.
//
// A plan (perm_s (H, N), rank_t (H, M), perm_t (H, M), rank_s (H, N), int32) is well
// formed when every perm row is a permutation of 0..len-1 (every entry in range, none
// seen twice: with len entries that is every index exactly once) and every rank lies in
// [0, N] (rank_t) / [0, M] (rank_s). The passes clamp every index they read, so a
// malformed plan never reads or writes outside its buffers; the check is what refuses it.
//
// Cost: O(N + M) per head, split over laplex_par threads. A permutation row is first
// compared with the identity (pre-sorted anchors: one streaming read, early exit at the
// first block that differs); otherwise each thread marks its stretch of the row in its
// own bitmap of len bits (cache resident for len ~ 1e7: 1.25 MB) and the bitmaps are
// then merged word by word, a bit set in two of them being a repeat. Only when a row
// fails is it scanned again, serially, to name the first offending entry.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "laplex_par.h"

namespace laplex_check {

// The text of jaxlab.laplex._plan.PLAN_MALFORMED (plan_error_if's message), followed
// by the field, the head and what was found (tests match the Python constant).
inline const char* const kPlanMalformed =
    "plan: expected perm_s/perm_t rows that are permutations of 0..N-1 / 0..M-1 and "
    "ranks in [0, N] / [0, M] (build plans with make_plan), received a malformed plan";

constexpr int64_t kBlock = 4096;  // identity comparison: early-exit granularity

// whether perm[j] == j for j in [j0, j1), with an early exit per block
inline bool IdentityStretch(const int32_t* perm, int64_t j0, int64_t j1) {
  for (int64_t b0 = j0; b0 < j1; b0 += kBlock) {
    const int64_t b1 = std::min(j1, b0 + kBlock);
    int32_t bad = 0;
    for (int64_t j = b0; j < b1; ++j) bad |= perm[j] ^ static_cast<int32_t>(j);
    if (bad != 0) return false;
  }
  return true;
}

// serial scan for the first entry of a malformed permutation row: its message part
inline std::string DescribePerm(const int32_t* perm, int64_t len) {
  std::vector<uint64_t> seen((len + 63) / 64, 0);
  for (int64_t j = 0; j < len; ++j) {
    const int64_t v = perm[j];
    if (v < 0 || v >= len) {
      return "entry " + std::to_string(v) + " at position " + std::to_string(j) +
             " is outside 0.." + std::to_string(len - 1);
    }
    const uint64_t bit = uint64_t{1} << (v & 63);
    if (seen[v >> 6] & bit) {
      return "the row repeats " + std::to_string(v) + " (again at position " +
             std::to_string(j) + ")";
    }
    seen[v >> 6] |= bit;
  }
  return "no defect found on the second scan";  // unreachable for a failed row
}

// whether perm (len,) is a permutation of 0..len-1
inline bool PermOk(const int32_t* perm, int64_t len) {
  if (len == 0) return true;
  const int nt = laplex_par::Threads(len, len);
  std::atomic<bool> ident{true};
  laplex_par::Run(nt, [&](int t) {
    if (!IdentityStretch(perm, len * t / nt, len * (t + 1) / nt)) ident = false;
  });
  if (ident) return true;
  const int64_t words = (len + 63) / 64;
  std::vector<std::vector<uint64_t>> bits(nt);
  std::atomic<bool> ok{true};
  laplex_par::Run(nt, [&](int t) {
    std::vector<uint64_t>& b = bits[t];
    b.assign(words, 0);
    uint64_t rep = 0;
    uint32_t out = 0;
    for (int64_t j = len * t / nt, j1 = len * (t + 1) / nt; j < j1; ++j) {
      const uint32_t v = static_cast<uint32_t>(perm[j]);  // negatives wrap past len
      out |= static_cast<uint32_t>(v >= static_cast<uint64_t>(len));
      const uint64_t w = std::min<uint64_t>(v >> 6, words - 1);
      const uint64_t bit = uint64_t{1} << (v & 63);
      rep |= b[w] & bit;
      b[w] |= bit;
    }
    if (rep != 0 || out != 0) ok = false;
  });
  if (!ok) return false;
  if (nt == 1) return true;
  // in range and no repeat inside a stretch; a repeat across stretches is a bit set
  // in two bitmaps (len entries, none repeated: every index exactly once)
  laplex_par::Run(nt, [&](int t) {
    uint64_t rep = 0;
    for (int64_t w = words * t / nt, w1 = words * (t + 1) / nt; w < w1; ++w) {
      uint64_t acc = 0;
      for (int u = 0; u < nt; ++u) {
        rep |= acc & bits[u][w];
        acc |= bits[u][w];
      }
    }
    if (rep != 0) ok = false;
  });
  return ok;
}

// whether every rank (len,) lies in [0, hi]
inline bool RankOk(const int32_t* rank, int64_t len, int64_t hi) {
  const int nt = laplex_par::Threads(len, len);
  std::atomic<bool> ok{true};
  laplex_par::Run(nt, [&](int t) {
    uint32_t bad = 0;
    for (int64_t j = len * t / nt, j1 = len * (t + 1) / nt; j < j1; ++j) {
      bad |= static_cast<uint32_t>(static_cast<uint32_t>(rank[j]) > static_cast<uint64_t>(hi));
    }
    if (bad != 0) ok = false;
  });
  return ok;
}

inline std::string DescribeRank(const int32_t* rank, int64_t len, int64_t hi) {
  for (int64_t j = 0; j < len; ++j) {
    if (rank[j] < 0 || rank[j] > hi) {
      return "entry " + std::to_string(rank[j]) + " at position " + std::to_string(j) +
             " is outside [0, " + std::to_string(hi) + "]";
    }
  }
  return "no defect found on the second scan";
}

// One plan field (H rows of `len`): a permutation of 0..len-1 per row when `hi` < 0,
// else ranks in [0, hi].
struct Field {
  const char* name;
  const int32_t* data;
  int64_t len;
  int64_t hi;
};

// empty when every field is well formed, else the error text for the first defect
// (fields in order, heads ascending). A field whose buffer is one already checked
// with the same shape (a symmetric plan: perm_t is perm_s) is not read again.
inline std::string CheckPlan(const std::vector<Field>& fields, int64_t heads) {
  for (size_t f = 0; f < fields.size(); ++f) {
    const Field& fd = fields[f];
    bool dup = false;
    for (size_t g = 0; g < f; ++g) {
      dup |= fields[g].data == fd.data && fields[g].len == fd.len && fields[g].hi == fd.hi;
    }
    if (dup) continue;
    for (int64_t h = 0; h < heads; ++h) {
      const int32_t* row = fd.data + h * fd.len;
      const bool perm = fd.hi < 0;
      if (perm ? PermOk(row, fd.len) : RankOk(row, fd.len, fd.hi)) continue;
      return std::string(kPlanMalformed) + " (plan." + fd.name + ", head " +
             std::to_string(h) + ": " +
             (perm ? DescribePerm(row, fd.len) : DescribeRank(row, fd.len, fd.hi)) + ")";
    }
  }
  return std::string();
}

}  // namespace laplex_check
