// First-order linear recurrence scan for jaxlab.laplex, as an XLA FFI custom call (CPU).
//
//   forward:  h[j] = alpha[j] * h[j-1] + x[j],   h[-1] = 0
//   reverse:  h[j] = alpha[j+1] * h[j+1] + x[j], h[N] = 0
//
// alpha has shape (..., N); x and the output have shape (..., N, K). Leading
// dimensions are independent problems (heads, vmap batches). One streaming pass
// per problem: the recurrence is latency bound on one multiply-add chain per
// column, so the pass runs at memory speed for K >= 1. |alpha| <= 1 in LAPLEX,
// so nothing overflows. Complex values are stored interleaved (re, im).
#include <cstdint>
#include <complex>

#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

// With beta_form the first input holds beta = alpha - 1 (accurate when alpha is
// close to 1, i.e. small decays) and the recurrence runs in double precision
// whatever the storage type: h + (beta h + x), rounded once per stored value.
template <typename R>
void ScanRealBeta(const R* be, const R* x, R* out, int64_t batch, int64_t n, int64_t k,
                  bool reverse) {
  for (int64_t b = 0; b < batch; ++b) {
    const R* bb = be + b * n;
    const R* xb = x + b * n * k;
    R* ob = out + b * n * k;
    for (int64_t c = 0; c < k; ++c) {
      double h = 0;
      if (!reverse) {
        for (int64_t j = 0; j < n; ++j) {
          h = h + (static_cast<double>(bb[j]) * h + static_cast<double>(xb[j * k + c]));
          ob[j * k + c] = static_cast<R>(h);
        }
      } else {
        double bn = -1.0;
        for (int64_t j = n - 1; j >= 0; --j) {
          h = h + (bn * h + static_cast<double>(xb[j * k + c]));
          ob[j * k + c] = static_cast<R>(h);
          bn = static_cast<double>(bb[j]);
        }
      }
    }
  }
}

template <typename R>
void ScanComplexBeta(const R* be, const R* x, R* out, int64_t batch, int64_t n, int64_t k,
                     bool reverse) {
  for (int64_t b = 0; b < batch; ++b) {
    const R* bb = be + 2 * b * n;
    const R* xb = x + 2 * b * n * k;
    R* ob = out + 2 * b * n * k;
    for (int64_t c = 0; c < k; ++c) {
      double hr = 0, hi = 0;
      double br = -1.0, bi = 0.0;
      for (int64_t jj = 0; jj < n; ++jj) {
        const int64_t j = reverse ? n - 1 - jj : jj;
        if (!reverse) { br = bb[2 * j]; bi = bb[2 * j + 1]; }
        const double xr = xb[2 * (j * k + c)], xi = xb[2 * (j * k + c) + 1];
        const double nr = hr + (br * hr - bi * hi + xr);
        const double ni = hi + (br * hi + bi * hr + xi);
        hr = nr; hi = ni;
        ob[2 * (j * k + c)] = static_cast<R>(hr);
        ob[2 * (j * k + c) + 1] = static_cast<R>(hi);
        if (reverse) { br = bb[2 * j]; bi = bb[2 * j + 1]; }
      }
    }
  }
}

template <typename R>
void ScanReal(const R* a, const R* x, R* out, int64_t batch, int64_t n, int64_t k,
              bool reverse) {
  for (int64_t b = 0; b < batch; ++b) {
    const R* ab = a + b * n;
    const R* xb = x + b * n * k;
    R* ob = out + b * n * k;
    if (k == 1) {
      R h = 0;
      if (!reverse) {
        for (int64_t j = 0; j < n; ++j) { h = ab[j] * h + xb[j]; ob[j] = h; }
      } else {
        R an = 0;
        for (int64_t j = n - 1; j >= 0; --j) { h = an * h + xb[j]; ob[j] = h; an = ab[j]; }
      }
      continue;
    }
    if (!reverse) {
      for (int64_t c = 0; c < k; ++c) ob[c] = xb[c];
      for (int64_t j = 1; j < n; ++j) {
        const R aj = ab[j];
        const R* prev = ob + (j - 1) * k;
        const R* xj = xb + j * k;
        R* oj = ob + j * k;
        for (int64_t c = 0; c < k; ++c) oj[c] = aj * prev[c] + xj[c];
      }
    } else {
      R* last = ob + (n - 1) * k;
      const R* xl = xb + (n - 1) * k;
      for (int64_t c = 0; c < k; ++c) last[c] = xl[c];
      for (int64_t j = n - 2; j >= 0; --j) {
        const R an = ab[j + 1];
        const R* next = ob + (j + 1) * k;
        const R* xj = xb + j * k;
        R* oj = ob + j * k;
        for (int64_t c = 0; c < k; ++c) oj[c] = an * next[c] + xj[c];
      }
    }
  }
}

// Complex version on interleaved (re, im) pairs; written out by hand so that no
// library complex-multiply slow path (inf/nan recovery) sits in the inner loop.
template <typename R>
void ScanComplex(const R* a, const R* x, R* out, int64_t batch, int64_t n, int64_t k,
                 bool reverse) {
  for (int64_t b = 0; b < batch; ++b) {
    const R* ab = a + 2 * b * n;
    const R* xb = x + 2 * b * n * k;
    R* ob = out + 2 * b * n * k;
    for (int64_t c = 0; c < k; ++c) {
      R hr = 0, hi = 0;
      if (!reverse) {
        for (int64_t j = 0; j < n; ++j) {
          const R ar = ab[2 * j], ai = ab[2 * j + 1];
          const R xr = xb[2 * (j * k + c)], xi = xb[2 * (j * k + c) + 1];
          const R nr = ar * hr - ai * hi + xr;
          const R ni = ar * hi + ai * hr + xi;
          hr = nr; hi = ni;
          ob[2 * (j * k + c)] = hr; ob[2 * (j * k + c) + 1] = hi;
        }
      } else {
        R ar = 0, ai = 0;
        for (int64_t j = n - 1; j >= 0; --j) {
          const R xr = xb[2 * (j * k + c)], xi = xb[2 * (j * k + c) + 1];
          const R nr = ar * hr - ai * hi + xr;
          const R ni = ar * hi + ai * hr + xi;
          hr = nr; hi = ni;
          ob[2 * (j * k + c)] = hr; ob[2 * (j * k + c) + 1] = hi;
          ar = ab[2 * j]; ai = ab[2 * j + 1];
        }
      }
    }
  }
}

template <ffi::DataType T>
ffi::Error ScanImpl(ffi::Buffer<T> alpha, ffi::Buffer<T> x, ffi::ResultBuffer<T> out,
                    int32_t reverse, int32_t beta_form) {
  auto adims = alpha.dimensions();
  auto xdims = x.dimensions();
  if (adims.size() < 1 || xdims.size() != adims.size() + 1) {
    return ffi::Error::InvalidArgument("laplex_scan: alpha (..., N) and x (..., N, K) expected");
  }
  int64_t n = adims.back();
  int64_t k = xdims.back();
  int64_t batch = 1;
  for (size_t i = 0; i + 1 < adims.size(); ++i) {
    if (adims[i] != xdims[i]) {
      return ffi::Error::InvalidArgument("laplex_scan: batch dimensions of alpha and x differ");
    }
    batch *= adims[i];
  }
  if (xdims[xdims.size() - 2] != n) {
    return ffi::Error::InvalidArgument("laplex_scan: alpha and x disagree on N");
  }
  if (n == 0 || k == 0 || batch == 0) return ffi::Error::Success();
  using V = ffi::NativeType<T>;
  if constexpr (T == ffi::C64 || T == ffi::C128) {
    using R = typename V::value_type;
    if (beta_form) {
      ScanComplexBeta<R>(reinterpret_cast<const R*>(alpha.typed_data()),
                         reinterpret_cast<const R*>(x.typed_data()),
                         reinterpret_cast<R*>(out->typed_data()), batch, n, k, reverse != 0);
      return ffi::Error::Success();
    }
    ScanComplex<R>(reinterpret_cast<const R*>(alpha.typed_data()),
                   reinterpret_cast<const R*>(x.typed_data()),
                   reinterpret_cast<R*>(out->typed_data()), batch, n, k, reverse != 0);
  } else if (beta_form) {
    ScanRealBeta<V>(alpha.typed_data(), x.typed_data(), out->typed_data(), batch, n, k,
                    reverse != 0);
  } else {
    ScanReal<V>(alpha.typed_data(), x.typed_data(), out->typed_data(), batch, n, k,
                reverse != 0);
  }
  return ffi::Error::Success();
}

}  // namespace

#define LAPLEX_DEFINE(NAME, T)                                   \
  XLA_FFI_DEFINE_HANDLER_SYMBOL(NAME, ScanImpl<T>,               \
                                ffi::Ffi::Bind()                 \
                                    .Arg<ffi::Buffer<T>>()       \
                                    .Arg<ffi::Buffer<T>>()       \
                                    .Ret<ffi::Buffer<T>>()       \
                                    .Attr<int32_t>("reverse")    \
                                    .Attr<int32_t>("beta_form"));

LAPLEX_DEFINE(LaplexScanF32, ffi::F32)
LAPLEX_DEFINE(LaplexScanF64, ffi::F64)
LAPLEX_DEFINE(LaplexScanC64, ffi::C64)
LAPLEX_DEFINE(LaplexScanC128, ffi::C128)
