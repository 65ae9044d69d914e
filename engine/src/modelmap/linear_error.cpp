// Matmul output error of a linear layer under casts (castscope/linear_error.hpp).
#include "castscope/linear_error.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <random>

#include "castscope/executor.hpp"
#include "castscope/io.hpp"
#include "modelmap/linear_products.hpp"
#include "core/parallel.hpp"

namespace castscope {
namespace {

double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

// y = x w^T in float32. Eight interleaved partial sums give the compiler independent lanes to
// vectorize without reassociating, so the result does not depend on the build's vector width.
Tensor matmul_xwt(const float* x, const float* w, int64_t tokens, int64_t in, int64_t out,
                  int threads, JobControl* job) {
  Tensor y = Tensor::empty(DType::F32, {tokens, out});
  float* py = y.mutable_ptr<float>();
  detail::parallel_for(tokens * out, 64, threads, job, [&](int64_t lo, int64_t hi) {
    for (int64_t e = lo; e < hi; ++e) {
      const float* a = x + (e / out) * in;
      const float* b = w + (e % out) * in;
      float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      int64_t k = 0;
      for (; k + 8 <= in; k += 8)
        for (int j = 0; j < 8; ++j) acc[j] += a[k + j] * b[k + j];
      for (; k < in; ++k) acc[k % 8] += a[k] * b[k];
      py[e] = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    }
  });
  return y;
}

Tensor cast_operand(const Tensor& t, const std::optional<DataType>& d, const CastOptions& base,
                    std::string& backend, double& snr) {
  if (!d) {
    snr = std::numeric_limits<double>::infinity();
    return t;
  }
  CastOptions o = base;
  o.mode = CastMode::Virtual;
  AxisSpec{}.apply(o);  // the reduction axis of x [tokens, in] and W [out, in] alike
  CastResult r = cast(t, *d, o);
  backend = r.backend;
  snr = compute_stats(t, r.values, r.counts.clipped).snr_db;
  return r.values;
}

// The weight as [out, in] along its reduction axis: a view of the trailing reduction, a copy
// transposed from a leading one. Throws Error for an axis in the middle.
Tensor weight_out_in(const Tensor& w, const AxisSpec& axis) {
  CastOptions c;
  axis.apply(c);
  const CastOptions r = resolve_axis(c, w.shape());
  const int rank = static_cast<int>(w.rank());
  const int ax = r.axis < 0 ? r.axis + rank : r.axis;
  const int64_t len = axis_length(r, w.shape());
  const int64_t rows = len ? w.numel() / len : 0;
  const Tensor f = w.to_f32();
  if ((r.flatten && !r.lead) || ax == rank - 1) return f.reshaped({rows, len});
  if (!(r.lead || ax == 0))
    throw Error("linear layer: the weight " + shape_str(w.shape()) + " is reduced over axis " +
                axis.str() + ", which is neither its leading nor its trailing axes");
  return transposed_f32(f.ptr<float>(), rows, len, rows);
}

}  // namespace

LinearReuse::LinearReuse() : s_(std::make_unique<State>()) {}
LinearReuse::~LinearReuse() = default;
uint64_t LinearReuse::uploads() const {
  return s_->uploads;
}

namespace {

// The operands in float32, [tokens, in] and [out, in], from the reuse when it holds them for
// these tensors; what it held for others goes.
void prepare_operands(const Tensor& x_in, const Tensor& w_given, const LinearErrorOptions& o,
                      LinearReuse::State& s) {
  const bool same_w = same_storage(s.w_key, w_given) && s.w_axis.str() == o.weight_axis.str() &&
                      s.w_axis.automatic == o.weight_axis.automatic;
  if (!same_w) {
    s.w_key = Tensor();
    s.w = weight_out_in(w_given, o.weight_axis);  // float32 already
    s.w_key = w_given;
    s.w_axis = o.weight_axis;
    s.dw = {};
    s.dy = {};
    s.y = Tensor();
  }
  const int64_t in = s.w.shape()[1];
  if (x_in.shape().back() != in)
    throw Error("linear layer: activations " + shape_str(x_in.shape()) + " have " +
                std::to_string(x_in.shape().back()) + " features, the weight " +
                shape_str(w_given.shape()) +
                (o.weight_axis.automatic ? "" : " reduced over axis " + o.weight_axis.str()) +
                " expects " + std::to_string(in));
  int64_t tokens = x_in.numel() / std::max<int64_t>(in, 1);
  if (o.max_tokens > 0 && tokens > o.max_tokens) tokens = o.max_tokens;
  const bool same_x = same_storage(s.x_key, x_in) && s.x && s.x.shape()[0] == tokens;
  if (!same_x) {
    s.x_key = Tensor();
    const Tensor xf = x_in.to_f32();
    s.x = Tensor::borrow(DType::F32, {tokens, in},
                         std::shared_ptr<const void>(xf.data(), [xf](const void*) {}), xf.data());
    s.x_key = x_in;
    s.dx = {};
    s.dy = {};
    s.y = Tensor();
  }
}

}  // namespace

LinearError linear_error(const Tensor& x_in, const Tensor& w_given, const LinearErrorOptions& o,
                         JobControl* job, LinearReuse* reuse) {
  if (x_in.rank() < 1 || w_given.rank() < 2)
    throw Error("linear layer: activations " + shape_str(x_in.shape()) + " and weight " +
                shape_str(w_given.shape()) + " must be [..., in] and a matrix");
  LinearReuse own;
  LinearReuse::State& ops = (reuse ? *reuse : own).state();
  prepare_operands(x_in, w_given, o, ops);
  const Tensor& x = ops.x;
  const Tensor& w = ops.w;
  LinearError r;
  r.in = w.shape()[1];
  r.out = w.shape()[0];
  r.tokens = x.shape()[0];
  const int64_t in = r.in;
  if (r.tokens == 0 || r.out == 0 || in == 0)
    throw Error("linear layer: empty activations or weight");

  // The executor places the products: Device::Auto takes the GPU when there is one and falls
  // back to the host if it fails there (e.g. out of GPU memory), the reason in product_note;
  // Device::CUDA reports the failure.
  const exec::OnFailure policy =
      o.cast.device == Device::CUDA ? exec::OnFailure::Throw : exec::OnFailure::FallBack;
  exec::Executor& ex = exec::current();
  const exec::Placement where =
      ex.place(exec::Work::Linear, o.cast.device, x.numel() + w.numel(), nullptr, policy);
  std::string gpu_failure;
  detail::LinearProducts p = ex.run<detail::LinearProducts>(
      where, policy,
      [&] {
        detail::LinearProducts d =
            detail::linear_products_cuda(x, w, o, job, reuse ? &ops : nullptr);
        d.backend = (o.act_dtype || o.weight_dtype) ? "cuda" : "none";
        return d;
      },
      [&] {
        detail::LinearProducts h;
        const auto t0 = std::chrono::steady_clock::now();
        h.backend = "none";
        const Tensor xq = cast_operand(x, o.act_dtype, o.cast, h.backend, h.act_snr_db);
        const Tensor wq = cast_operand(w, o.weight_dtype, o.cast, h.backend, h.weight_snr_db);
        h.cast_ms = ms_since(t0);
        if (job) job->check();
        const auto t1 = std::chrono::steady_clock::now();
        h.y = matmul_xwt(x.ptr<float>(), w.ptr<float>(), r.tokens, in, r.out, o.cast.threads, job);
        const auto t2 = std::chrono::steady_clock::now();
        h.yq =
            matmul_xwt(xq.ptr<float>(), wq.ptr<float>(), r.tokens, in, r.out, o.cast.threads, job);
        h.gemm_ms = ms_since(t2);
        h.matmul_ms = ms_since(t1);
        h.product = "fp32 (CPU)";
        return h;
      },
      &gpu_failure);
  Tensor y = std::move(p.y), yq = std::move(p.yq);
  r.act_snr_db = p.act_snr_db;
  r.weight_snr_db = p.weight_snr_db;
  r.cast_ms = p.cast_ms;
  r.matmul_ms = p.matmul_ms;
  r.gemm_ms = p.gemm_ms;
  r.product = std::move(p.product);
  r.product_note = std::move(p.product_note);
  r.tensor_cores = p.tensor_cores;
  r.backend = std::move(p.backend);
  if (!gpu_failure.empty()) r.product_note = "the GPU product failed: " + gpu_failure;

  const float* py = y.ptr<float>();
  const float* pq = yq.ptr<float>();
  std::vector<double> col_err(static_cast<size_t>(r.out)), col_sig(static_cast<size_t>(r.out));
  double sig = 0, err = 0;
  for (int64_t t = 0; t < r.tokens; ++t)
    for (int64_t c = 0; c < r.out; ++c) {
      const double a = py[t * r.out + c], d = static_cast<double>(pq[t * r.out + c]) - a;
      sig += a * a;
      err += d * d;
      col_sig[static_cast<size_t>(c)] += a * a;
      col_err[static_cast<size_t>(c)] += d * d;
      r.max_abs_err = std::max(r.max_abs_err, std::fabs(d));
    }
  r.snr_db = err == 0 ? std::numeric_limits<double>::infinity() : 10.0 * std::log10(sig / err);
  r.rel_err =
      sig == 0 ? (err == 0 ? 0.0 : std::numeric_limits<double>::infinity()) : std::sqrt(err / sig);
  r.channel_rel_err.resize(static_cast<size_t>(r.out));
  for (size_t c = 0; c < col_err.size(); ++c)
    r.channel_rel_err[c] = static_cast<float>(
        col_sig[c] == 0 ? (col_err[c] == 0 ? 0.0 : std::numeric_limits<double>::infinity())
                        : std::sqrt(col_err[c] / col_sig[c]));
  const double lim = r.max_abs_err > 0 ? r.max_abs_err : 1.0;
  r.error_hist = error_histogram(py, pq, y.numel(), -lim, lim, std::max(o.hist_bins, 1));
  if (o.keep_outputs) {
    r.y = std::move(y);
    r.yq = std::move(yq);
  }
  return r;
}

Tensor synthetic_activations(int64_t tokens, int64_t features, int outliers, double outlier_scale,
                             uint64_t seed) {
  if (tokens <= 0 || features <= 0)
    throw Error("synthetic activations: tokens and features must be positive");
  if (outliers < 0 || outliers > features)
    throw Error("synthetic activations: " + std::to_string(outliers) +
                " outlier channels do not fit " + std::to_string(features) + " features");
  Tensor t = Tensor::empty(DType::F32, {tokens, features});
  float* p = t.mutable_ptr<float>();
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> n01(0.0f, 1.0f);
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = n01(rng);
  // Outlier channels: a fixed set per seed, spread over the features.
  std::vector<int64_t> ch(static_cast<size_t>(features));
  for (int64_t i = 0; i < features; ++i) ch[static_cast<size_t>(i)] = i;
  std::shuffle(ch.begin(), ch.end(), rng);
  for (int k = 0; k < outliers; ++k)
    for (int64_t r = 0; r < tokens; ++r)
      p[r * features + ch[static_cast<size_t>(k)]] *= static_cast<float>(outlier_scale);
  return t;
}

Tensor load_activations(const std::string& path, const std::string& name) {
  auto m = io::open_model(path);
  for (const io::TensorInfo& t : m->tensors()) {
    if (!name.empty() ? t.name == name : io::is_float_storage(t.dtype) && numel(t.shape) > 0)
      return m->load(t.name);
  }
  throw Error(
      "activations '" + path + "': " +
      (name.empty() ? std::string("no floating-point tensor") : "no tensor named '" + name + "'"));
}

}  // namespace castscope
