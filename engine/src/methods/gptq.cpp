// GPTQ (Frantar et al., arXiv 2210.17323) as llm-compressor's quantize_weight runs it: Hessian
// H = 2/n X^T X of the calibration inputs, dead columns (zero diagonal) zeroed and given a unit
// diagonal, damping dampening_frac * mean(diag H), the upper Cholesky factor U of H^-1, columns
// in blocks of `block`: each column rounded with its group's scale, its error (w - q) / U_ii
// fed into the rest of the block at once and into later blocks after the block. Act-order
// processes columns by descending diag H and restores the order at the end.
//
// Precision: the Hessian, its factorizations and the working weight are float64 where
// llm-compressor uses float32 throughout; the values handed to the rounding and the scale
// choice are the family's own (float32 inputs, double arithmetic), so codes differ from the
// peer's only where float32 rounding moves a value across a rounding boundary
// (tests/interop/test_gptq_peer.py counts them).
#include <algorithm>
#include <cmath>
#include <numeric>

#include "castscope/error.hpp"
#include "methods/method.hpp"

namespace castscope::methods {
namespace {

// Lower Cholesky factor of the symmetric n x n matrix a (row-major, in place); false when a is
// not positive definite.
bool cholesky_lower(std::vector<double>& a, int64_t n) {
  for (int64_t j = 0; j < n; ++j) {
    double d = a[j * n + j];
    for (int64_t k = 0; k < j; ++k) d -= a[j * n + k] * a[j * n + k];
    if (!(d > 0)) return false;
    d = std::sqrt(d);
    a[j * n + j] = d;
    for (int64_t i = j + 1; i < n; ++i) {
      double s = a[i * n + j];
      const double *ai = &a[i * n], *aj = &a[j * n];
      for (int64_t k = 0; k < j; ++k) s -= ai[k] * aj[k];
      a[i * n + j] = s / d;
    }
    for (int64_t i = 0; i < j; ++i) a[i * n + j] = 0;
  }
  return true;
}

// U upper with U^T U = H^-1, from H's lower factor L (H = L L^T): H^-1 = L^-T L^-1, whose
// reversed-order Cholesky is upper. Computed as the lower factor of P H^-1 P (P the reversal),
// reversed back.
std::vector<double> inverse_upper_factor(const std::vector<double>& L, int64_t n) {
  // Linv: inverse of the lower-triangular L, by forward substitution column by column.
  std::vector<double> li(static_cast<size_t>(n * n), 0.0);
  for (int64_t j = 0; j < n; ++j) {
    li[j * n + j] = 1.0 / L[j * n + j];
    for (int64_t i = j + 1; i < n; ++i) {
      double s = 0;
      for (int64_t k = j; k < i; ++k) s -= L[i * n + k] * li[k * n + j];
      li[i * n + j] = s / L[i * n + i];
    }
  }
  // Hinv = Linv^T Linv.
  std::vector<double> hinv(static_cast<size_t>(n * n), 0.0);
  for (int64_t k = 0; k < n; ++k)
    for (int64_t i = 0; i <= k; ++i) {
      const double a = li[k * n + i];
      if (a == 0) continue;
      for (int64_t j = 0; j <= i; ++j) hinv[i * n + j] += a * li[k * n + j];
    }
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < i; ++j) hinv[j * n + i] = hinv[i * n + j];
  // Upper Cholesky of Hinv: Hinv = U^T U, U[i][j] for j >= i.
  std::vector<double> u(static_cast<size_t>(n * n), 0.0);
  for (int64_t i = 0; i < n; ++i) {
    double d = hinv[i * n + i];
    for (int64_t k = 0; k < i; ++k) d -= u[k * n + i] * u[k * n + i];
    if (!(d > 0)) throw Error("internal: the inverse Hessian is not positive definite");
    d = std::sqrt(d);
    u[i * n + i] = d;
    for (int64_t j = i + 1; j < n; ++j) {
      double s = hinv[i * n + j];
      for (int64_t k = 0; k < i; ++k) s -= u[k * n + i] * u[k * n + j];
      u[i * n + j] = s / d;
    }
  }
  return u;
}

}  // namespace

MethodResult gptq(const WeightView& v, ScaledQuantizer& q, const MethodOptions& m,
                  const std::vector<double>& x, int64_t tokens, const std::string& name) {
  const std::string who = "gptq of '" + name + "'";
  const int64_t R = v.rows, C = v.cols;
  if (m.block < 1)
    throw Error(who + ": --gptq-block must be at least 1 (got " + std::to_string(m.block) + ")");
  if (!(m.damp >= 0) || !std::isfinite(m.damp))
    throw Error(who + ": --damp must be a finite fraction >= 0");
  if (tokens < 1) throw Error(who + ": the calibration inputs hold no token");
  const bool per_column_groups = q.group_cols() < C;
  if (m.act_order && per_column_groups && !m.static_groups)
    throw Error(who +
                ": act-order with scales chosen as each group starts needs a group index "
                "(g_idx) that the datatype's layout does not store; add --static-groups");
  // H = 2/n X^T X (the upper triangle summed, then mirrored).
  std::vector<double> H(static_cast<size_t>(C * C), 0.0);
  for (int64_t t = 0; t < tokens; ++t) {
    const double* xt = x.data() + t * C;
    for (int64_t i = 0; i < C; ++i) {
      if (xt[i] == 0) continue;
      double* hi = &H[i * C];
      for (int64_t j = i; j < C; ++j) hi[j] += xt[i] * xt[j];
    }
  }
  const double f = 2.0 / static_cast<double>(tokens);
  for (int64_t i = 0; i < C; ++i)
    for (int64_t j = i; j < C; ++j) H[j * C + i] = H[i * C + j] = H[i * C + j] * f;

  // Scales chosen once from the original weight (static groups, channels, the tensor).
  std::vector<GroupScale> scales;
  if (m.static_groups || !per_column_groups) scales = choose_scales(q, v.w.data());

  std::vector<int64_t> perm(static_cast<size_t>(C));
  std::iota(perm.begin(), perm.end(), 0);
  if (m.act_order)
    std::stable_sort(perm.begin(), perm.end(),
                     [&](int64_t a, int64_t b) { return H[a * C + a] > H[b * C + b]; });
  // The working weight and Hessian in processing order; dead columns zeroed.
  std::vector<double> W(static_cast<size_t>(R * C)), Hp(static_cast<size_t>(C * C));
  for (int64_t i = 0; i < C; ++i)
    for (int64_t j = 0; j < C; ++j) Hp[i * C + j] = H[perm[i] * C + perm[j]];
  H.clear();
  H.shrink_to_fit();
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < C; ++c) W[r * C + c] = v.w[r * C + perm[c]];
  double mean_diag = 0;
  for (int64_t i = 0; i < C; ++i) {
    if (Hp[i * C + i] == 0) {
      Hp[i * C + i] = 1;
      for (int64_t r = 0; r < R; ++r) W[r * C + i] = 0;
    }
    mean_diag += Hp[i * C + i];
  }
  const double damp = m.damp * mean_diag / static_cast<double>(C);
  for (int64_t i = 0; i < C; ++i) Hp[i * C + i] += damp;
  if (!cholesky_lower(Hp, C))
    throw Error(who + ": the damped Hessian is not positive definite; raise --damp (now " +
                std::to_string(m.damp) + ") or give more calibration tokens");
  const std::vector<double> U = inverse_upper_factor(Hp, C);
  Hp.clear();
  Hp.shrink_to_fit();

  if (scales.empty()) scales.resize(static_cast<size_t>(q.groups()));
  std::vector<float> Q(static_cast<size_t>(R * C)), vals;
  std::vector<uint32_t> codes(static_cast<size_t>(R * C));
  std::vector<double> err;
  for (int64_t i1 = 0; i1 < C; i1 += m.block) {
    const int64_t i2 = std::min(C, i1 + m.block), bw = i2 - i1;
    err.assign(static_cast<size_t>(R * bw), 0.0);
    for (int64_t i = i1; i < i2; ++i) {
      const int64_t col = perm[i];
      if (!m.static_groups && per_column_groups && col % q.group_cols() == 0) {
        // Scales of the groups starting here, from the weight as updated so far (without
        // act-order, processing order is column order and the group lies at [i, i + tc)).
        for (int64_t r = 0; r < R;) {
          const int64_t g = q.group_of(r, col);
          const detail::GroupExtent e = q.extent(g);
          vals.clear();
          for (int64_t rr = e.row0; rr < e.row1; ++rr)
            for (int64_t c = e.col0; c < e.col1; ++c)
              vals.push_back(static_cast<float>(W[rr * C + c]));
          scales[static_cast<size_t>(g)] = q.choose(vals.data(), static_cast<int64_t>(vals.size()));
          r = e.row1;
        }
      }
      const double d = U[i * C + i];
      for (int64_t r = 0; r < R; ++r) {
        double* wr = &W[r * C];
        const int64_t e = r * C + col;
        const float qv = q.round(scales[static_cast<size_t>(q.group_of(r, col))], wr[i],
                                 static_cast<uint64_t>(e), &codes[static_cast<size_t>(e)]);
        Q[static_cast<size_t>(e)] = qv;
        const double er = (wr[i] - qv) / d;
        err[static_cast<size_t>(r * bw + (i - i1))] = er;
        const double* ui = &U[i * C];
        for (int64_t j = i + 1; j < i2; ++j) wr[j] -= er * ui[j];
        wr[i] = qv;
      }
    }
    // The block's errors into every later column.
    for (int64_t r = 0; r < R; ++r) {
      double* wr = &W[r * C];
      for (int64_t k = 0; k < bw; ++k) {
        const double er = err[static_cast<size_t>(r * bw + k)];
        if (er == 0) continue;
        const double* uk = &U[(i1 + k) * C];
        for (int64_t j = i2; j < C; ++j) wr[j] -= er * uk[j];
      }
    }
  }
  MethodResult out;
  out.cast = q.result(v.shape, v.options, codes, scales);
  out.output_error = output_error(x, tokens, v.w.data(), Q.data(), R, C);
  return out;
}

}  // namespace castscope::methods
