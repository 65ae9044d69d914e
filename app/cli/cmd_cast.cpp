// castscope-cli cast IN.npy OUT.npy|OUT.safetensors --dtype D [...]
#include <chrono>
#include <cstdio>
#include <filesystem>

#include "castscope/cast.hpp"
#include "castscope/imatrix.hpp"
#include "castscope/io.hpp"
#include "castscope/metrics.hpp"
#include "castscope/storage_bits.hpp"
#include "cli/command.hpp"
#include "cli/opt_method.hpp"

namespace castscope::cli {
namespace {

struct CastArgs {
  std::string in, out, dtype, round = "even", scale_mode = "floor", overflow = "saturate",
                              device = "auto", mode = "virtual";
  uint64_t seed = 0;
  std::string rotate = "none";
  std::string axis = "auto";
  bool stats = false;
  bool no_tcfp_nf = false;
  std::string imatrix, imatrix_entry;  // importance weights: a .npy, or an imatrix file's entry
  MethodArgs method;
};

bool ends_with(const std::string& s, const std::string& suf) {
  return s.size() >= suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
}

CastArgs& cast_args() {
  static CastArgs a;
  return a;
}

// The cast itself, or the chosen method's (an actual-mode result, made virtual when asked).
CastResult run_method(const Tensor& x, const DataType& d, const CastOptions& o) {
  MethodOptions m = cast_args().method.opt;
  m.method = cast_args().method.methods.empty() ? Method::RTN
                                                : parse_method(cast_args().method.methods[0]);
  if (m.method == Method::RTN && cast_args().method.calib.empty()) return cast(x, d, o);
  if (!method_needs_calibration(m.method) && !cast_args().method.calib.empty())
    throw Error("--calib is for gptq and awq; method " + std::string(to_string(m.method)) +
                " takes no calibration");
  Calibration c;
  if (!cast_args().method.calib.empty()) c.inputs = io::load_npy(cast_args().method.calib);
  MethodResult r =
      quantize(x, d, o, m, c, std::filesystem::path(cast_args().in).filename().string());
  if (method_needs_calibration(m.method))
    std::printf("%s output error ||XW^T - XQ^T|| %.6g\n", to_string(m.method), r.output_error);
  if (o.mode == CastMode::Virtual) {
    CastResult v = r.cast;
    v.mode = CastMode::Virtual;
    v.options.mode = CastMode::Virtual;
    v.values = method_values(r);  // awq: Q(W s) / s, the weight as the layer applies it
    return v;
  }
  if (r.pre_quant_scale)
    throw Error(
        "awq's codes need their pre-quant scale beside them, which a packed cast file "
        "does not hold; use --mode virtual (values Q(W s) / s)");
  return o.mode == CastMode::Compress ? pack(r.cast) : r.cast;
}

void cast_cmd(CLI::App& app) {
  CastArgs& a = cast_args();
  auto* sub = app.add_subcommand("cast",
                                 "Cast a .npy tensor to a datatype (virtual: .npy out; "
                                 "compress/actual: packed .safetensors out)");
  sub->add_option("input", a.in, "Input .npy (float32, float16 or float64, any shape)")
      ->required()
      ->check(CLI::ExistingFile);
  sub->add_option("output", a.out, "Output .npy (virtual) or .safetensors (actual / compress)")
      ->required();
  sub->add_option("--dtype,-d", a.dtype, "Datatype string or registry name (see `list`)")
      ->required();
  add_rounding_options(sub, a.round, a.scale_mode);
  sub->add_option("--overflow", a.overflow, "saturate | ieee")
      ->check(CLI::IsMember({"saturate", "ieee"}));
  sub->add_option("--seed", a.seed, "Seed of stochastic rounding");
  sub->add_option("--rotate", a.rotate,
                  "Block Hadamard rotation along the axis before casting: N, hN or hNrSEED");
  add_axis_option(sub, a.axis);
  add_device_option(sub, a.device);
  sub->add_option("--mode", a.mode, "virtual | actual | compress")
      ->check(CLI::IsMember({"virtual", "actual", "compress"}));
  sub->add_option("--imatrix", a.imatrix,
                  "Importance weights for ggml's quantizers: a float32 .npy of one per column "
                  "(or [sets, columns]), or llama-imatrix's file with --imatrix-entry")
      ->check(CLI::ExistingFile);
  sub->add_option("--imatrix-entry", a.imatrix_entry,
                  "The entry of the --imatrix file to use (a GGUF tensor name)");
  sub->add_flag("--stats", a.stats, "Print MSE, SNR, max error, clipped and non-finite counts");
  sub->add_flag("--tcfp-absmax", a.no_tcfp_nf,
                "TCFP-8: choose block scales at absmax instead of 3 sigma");
  add_method_options(sub, a.method, false);
  sub->callback([&a] {
    const DataType d = DataType::parse(a.dtype);
    CastOptions o =
        parse_cast_options({a.mode, a.round, a.scale_mode, a.overflow, a.axis, a.rotate, a.device});
    o.seed = a.seed;
    o.tcfp_nf_aware = !a.no_tcfp_nf;
    if (o.mode == CastMode::Virtual && !ends_with(a.out, ".npy"))
      throw Error("virtual cast output must be a .npy file: '" + a.out + "'");
    if (o.mode != CastMode::Virtual && !ends_with(a.out, ".safetensors"))
      throw Error(std::string(to_string(o.mode)) + " cast output must be a .safetensors file: '" +
                  a.out + "'");
    // Work that will run on the GPU starts its context now, while the file loads; small work
    // under Device::Auto stays on the CPU and never waits for CUDA.
    std::error_code ec;
    const auto bytes = std::filesystem::file_size(a.in, ec);
    if (!ec && (o.device == Device::CUDA ||
                (o.device == Device::Auto &&
                 static_cast<int64_t>(bytes / 4) >= auto_gpu_min_elements(d, false))))
      start_gpu_in_background();
    const Tensor x = io::load_npy(a.in);
    if (!dtype_is_float(x.dtype()))
      throw Error("'" + a.in + "' holds " + dtype_name(x.dtype()) +
                  "; cast needs float32, float16 or float64 data");
    if (!a.imatrix.empty()) {
      if (ends_with(a.imatrix, ".npy")) {
        const Tensor w = io::load_npy(a.imatrix).to_f32();
        o.importance =
            std::make_shared<const std::vector<float>>(w.ptr<float>(), w.ptr<float>() + w.numel());
      } else {
        if (a.imatrix_entry.empty())
          throw Error("--imatrix '" + a.imatrix + "' needs --imatrix-entry NAME");
        o.importance = io::read_imatrix(a.imatrix).weights_for(a.imatrix_entry, x.shape());
        if (!o.importance)
          throw Error("imatrix '" + a.imatrix + "' has no entry '" + a.imatrix_entry + "'");
      }
    }
    const auto t0 = std::chrono::steady_clock::now();
    CastResult r = run_method(x, d, o);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    Tensor values;
    if (o.mode == CastMode::Virtual) {
      values = r.values;
      io::save_npy(a.out, values);
    } else {
      io::save_packed(a.out, {{"tensor", r}});
      if (a.stats) values = upcast(r);
    }
    if (a.stats) {
      Stats s = compute_stats(x, values, r.counts.clipped);
      std::printf("dtype %s  backend %s  %.2f ms  bits/value %s  axis %s\n", d.label().c_str(),
                  r.backend.c_str(), ms, bits_label(d, x.shape(), o).c_str(),
                  describe_axis(o, x.shape()).c_str());
      std::printf(
          "mse %.6g\nsnr_db %.4f\nmax_abs_err %.6g\nclipped %lld (%.4f%%)\nnonfinite_in "
          "%lld\nnonfinite_out %lld\n",
          s.mse, s.snr_db, s.max_abs_err, static_cast<long long>(s.clipped), s.clipped_pct(),
          static_cast<long long>(s.nonfinite_in), static_cast<long long>(s.nonfinite_out));
    }
  });
}

Register reg(cast_cmd);

}  // namespace
}  // namespace castscope::cli
