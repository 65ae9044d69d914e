// The one written form of metrics (metrics_json.hpp): an exact cast is null plus its flag, and
// every form earlier versions wrote ("inf", 1e308, null + exact) reads back as the same value.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>

#include "castscope/cast.hpp"
#include "castscope/metrics.hpp"
#include "castscope/metrics_json.hpp"
#include "test_seed.hpp"

namespace {

using namespace castscope;
namespace mj = castscope::metrics_json;
constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(MetricsJson, ExactFlagKeys) {
  EXPECT_EQ(mj::exact_key("snr_db"), "exact");
  EXPECT_EQ(mj::exact_key("out_snr_db"), "out_exact");
  EXPECT_EQ(mj::exact_key("weight_snr_db"), "weight_exact");
  EXPECT_EQ(mj::exact_key("value"), "value_exact");
  EXPECT_EQ(mj::exact_key("values"), "values_exact");
}

// Every SNR value survives a write, a dump to text, a parse and a read, in both JSON types.
template <class J>
void round_trip(double snr) {
  J obj;
  mj::put_snr(obj, "out_snr_db", snr);
  const J back = J::parse(obj.dump());
  EXPECT_EQ(back["out_exact"].template get<bool>(), snr == kInf);
  const double got = mj::snr_from(back, "out_snr_db");
  if (std::isnan(snr) || snr == -kInf)  // not an exact cast: null without the flag
    EXPECT_TRUE(std::isnan(got)) << got;
  else
    EXPECT_EQ(got, snr);
  if (std::isfinite(snr))
    EXPECT_TRUE(back["out_snr_db"].is_number());
  else
    EXPECT_TRUE(back["out_snr_db"].is_null()) << "non-finite numbers are null in JSON";
}

TEST(MetricsJson, SnrRoundTrips) {
  const uint64_t seed = test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-40, 200);
  for (double v : {kInf, -kInf, std::numeric_limits<double>::quiet_NaN(), 0.0, u(rng), u(rng)}) {
    round_trip<nlohmann::json>(v);
    round_trip<nlohmann::ordered_json>(v);
  }
}

TEST(MetricsJson, ReadsEveryEarlierForm) {
  // The CLI's "inf" strings, the app state's 1e308 stand-in, the views' null + exact.
  const auto j = nlohmann::json::parse(R"({"a": "inf", "b": 1e308, "snr_db": null, "exact": true,
      "c": "-inf", "d": "nan", "e": null, "f": 12.5, "g": "bogus"})");
  EXPECT_EQ(mj::snr_from(j, "a"), kInf);
  EXPECT_EQ(mj::snr_from(j, "b"), kInf);
  EXPECT_EQ(mj::snr_from(j, "snr_db"), kInf);
  EXPECT_EQ(mj::snr_from(j, "c"), -kInf);
  EXPECT_TRUE(std::isnan(mj::snr_from(j, "d")));
  EXPECT_TRUE(std::isnan(mj::snr_from(j, "e"))) << "null without its flag is not exact";
  EXPECT_EQ(mj::snr_from(j, "f"), 12.5);
  EXPECT_TRUE(std::isnan(mj::snr_from(j, "g")));
  EXPECT_TRUE(std::isnan(mj::snr_from(j, "missing")));
  EXPECT_EQ(mj::number_from(j["a"]), kInf);
  EXPECT_EQ(mj::number_from(j["b"]), 1e308) << "only SNR fields read 1e308 as exact";
}

// Real casts: float32 is exact, nvfp4 is not; put_stats writes both the one way.
TEST(MetricsJson, StatsOfRealCasts) {
  const uint64_t seed = test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.f, 3.f);
  Tensor x = Tensor::empty(DType::F32, {64, 96});
  for (int64_t i = 0; i < x.numel(); ++i) x.mutable_ptr<float>()[i] = nd(rng);
  for (const char* spec : {"float32", "nvfp4"}) {
    SCOPED_TRACE(spec);
    const CastResult r = cast(x, DataType::parse(spec));
    const Stats s = compute_stats(x, r.values, r.counts.clipped);
    nlohmann::ordered_json j;
    mj::put_stats(j, s);
    const auto back = nlohmann::ordered_json::parse(j.dump());
    const bool exact = std::string(spec) == "float32";
    EXPECT_EQ(std::isinf(s.snr_db), exact);
    EXPECT_EQ(back["exact"].get<bool>(), exact);
    EXPECT_EQ(back["snr_db"].is_null(), exact);
    EXPECT_EQ(mj::snr_from(back, "snr_db"), s.snr_db);
    EXPECT_EQ(back["count"].get<int64_t>(), x.numel());
    EXPECT_EQ(back["mse"].get<double>(), s.mse);
  }
}

}  // namespace
