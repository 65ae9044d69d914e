// Reproduces the quality table of tcfp.md (Gaussian N(0,1), 4096x4096 float32): MSE, SNR and max
// error per format, with the shared-microexponent formats beside MXINT8 / MXFP6 / MXFP4.
// Run: ./build/bench/tcfp_quality [rows cols seed]
#include <cstdio>
#include <cstdlib>
#include <random>

#include "castscope/cast.hpp"
#include "castscope/metrics.hpp"

using namespace castscope;

int main(int argc, char** argv) {
  const int64_t rows = argc > 1 ? std::atoll(argv[1]) : 4096;
  const int64_t cols = argc > 2 ? std::atoll(argv[2]) : 4096;
  const uint64_t seed = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 0;
  Tensor x = Tensor::empty(DType::F32, {rows, cols});
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd(0.0, 1.0);
  for (int64_t i = 0; i < x.numel(); ++i) x.mutable_ptr<float>()[i] = static_cast<float>(nd(rng));
  struct Row {
    const char* label;
    const char* dtype;
    bool tcfp_nf;
  };
  const Row table[] = {
      {"BF16", "bfloat16", true},
      {"Naive FP8 (e4m3fn, unscaled)", "e4m3fn", true},
      {"FP8 e4m3fn, fp32 tensor scale", "fp8e4_tensor", true},
      {"TCFP-8 (3-sigma block scale)", "tcfp8", true},
      {"TCFP-8 (absmax block scale)", "tcfp8", false},
      {"TCFP-12", "tcfp12", true},
      {"TCFP-16", "tcfp16", true},
      {"MXINT8", "mxint8", true},
      {"MX9", "mx9", true},
      {"MXFP6 (e3m2)", "mxfp6e3", true},
      {"MXFP6 (e2m3)", "mxfp6e2", true},
      {"MX6", "mx6", true},
      {"MXFP4", "mxfp4e2", true},
      {"MX4", "mx4", true},
      {"NVFP4", "nvfp4", true},
  };
  std::printf("N(0,1) %lld x %lld float32, seed %llu, round even, scale mode floor\n",
              static_cast<long long>(rows), static_cast<long long>(cols),
              static_cast<unsigned long long>(seed));
  std::printf("| %-30s | %6s | %10s | %8s | %10s | %9s |\n", "Format", "Bits", "MSE", "SNR (dB)",
              "Max Error", "Clipped %");
  std::printf("|%s|%s|%s|%s|%s|%s|\n", std::string(32, '-').c_str(), std::string(8, '-').c_str(),
              std::string(12, '-').c_str(), std::string(10, '-').c_str(),
              std::string(12, '-').c_str(), std::string(11, '-').c_str());
  for (const Row& r : table) {
    const DataType d = DataType::parse(r.dtype);
    CastOptions o;
    o.device = Device::CPU;
    o.tcfp_nf_aware = r.tcfp_nf;
    CastResult res = cast(x, d, o);
    const Stats s = compute_stats(x, res.values, res.counts.clipped);
    std::printf("| %-30s | %6.3g | %10.3e | %8.2f | %10.3e | %9.4f |\n", r.label,
                d.bits_per_value(cols), s.mse, s.snr_db, s.max_abs_err, s.clipped_pct());
  }
  return 0;
}
