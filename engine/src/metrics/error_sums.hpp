// The error statistics of a cast as sums that the CPU (per chunk) and the CUDA kernel (per thread,
// then per block) fold with the same operations, and the one place that turns them into Stats.
// Only the order in which partial sums are merged differs between the backends.
#pragma once

#include <cstdint>
#include <limits>

#include "castscope/metrics.hpp"
#include "castscope/scalar.hpp"

namespace castscope::detail {

// An aggregate without member initializers, so that CUDA may hold it in shared memory: create it
// with `ErrorSums s{}`.
struct ErrorSums {
  long long count, nonfinite_in, nonfinite_out, zeros_out;
  double sx2, se2, se, maxe;

  // One original value x and its cast q. NaN / Inf on either side is counted, not summed.
  CS_HD void add(double x, double q) {
    if (!(x - x == 0)) {
      ++nonfinite_in;
      return;
    }
    if (!(q - q == 0)) {
      ++nonfinite_out;
      return;
    }
    ++count;
    const double d = q - x;
    sx2 = scalar::add_rn(sx2, scalar::mul_rn(x, x));
    se2 = scalar::add_rn(se2, scalar::mul_rn(d, d));
    se += d;
    const double ad = d < 0 ? -d : d;
    maxe = ad > maxe ? ad : maxe;
    zeros_out += (q == 0 && x != 0) ? 1 : 0;
  }
  CS_HD void merge(const ErrorSums& o) {
    count += o.count;
    nonfinite_in += o.nonfinite_in;
    nonfinite_out += o.nonfinite_out;
    zeros_out += o.zeros_out;
    sx2 += o.sx2;
    se2 += o.se2;
    se += o.se;
    maxe = o.maxe > maxe ? o.maxe : maxe;
  }
};

// SNR is +inf exactly when the cast is exact (no error energy).
Stats finish_stats(const ErrorSums& t, int64_t clipped);

}  // namespace castscope::detail
