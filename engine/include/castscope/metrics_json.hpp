// How metrics are written and read back: the one representation for the CLI, the app's state,
// the views' exports and the plan and evaluation files.
//
// JSON has no infinity. A number that is not finite is written as null; an SNR field also gets a
// boolean beside it that says whether the cast was exact (infinite SNR): "snr_db": null,
// "exact": true. The flag's key is exact_key(field): "snr_db" -> "exact", "out_snr_db" ->
// "out_exact", any other field -> field + "_exact". An array of SNRs gets a parallel array of
// flags under exact_key(array). CSV and text write the C library's "inf", "-inf" and "nan";
// Python sees float('inf').
//
// Earlier versions wrote an exact SNR as the string "inf" or as 1e308 (the app's state), and
// other non-finite numbers as "inf", "-inf" or "nan": snr_from() and number_from() read all of
// them. Header-only and templated on the JSON type so that the engine's public headers need no
// JSON library; callers pass nlohmann::json or nlohmann::ordered_json.
#pragma once

#include <cmath>
#include <limits>
#include <string>

#include "castscope/metrics.hpp"

namespace castscope::metrics_json {

// At or above this, a number read back is an exact SNR written as a stand-in (1e308).
inline constexpr double kOldExactSnr = 1e300;

inline std::string exact_key(const std::string& field) {
  static const std::string suffix = "snr_db";
  if (field == suffix) return "exact";
  if (field.size() > suffix.size() + 1 &&
      field.compare(field.size() - suffix.size() - 1, std::string::npos, "_" + suffix) == 0)
    return field.substr(0, field.size() - suffix.size()) + "exact";
  return field + "_exact";
}

// A number, or null when it is not finite.
template <class J>
J number(double v) {
  return std::isfinite(v) ? J(v) : J();
}

template <class J>
void put_number(J& obj, const std::string& key, double v) {
  obj[key] = number<J>(v);
}

// An SNR in dB and its exact flag.
template <class J>
void put_snr(J& obj, const std::string& key, double snr_db) {
  obj[key] = number<J>(snr_db);
  obj[exact_key(key)] = std::isinf(snr_db) && snr_db > 0;
}

// A cast's error statistics under their usual keys ("bias" is Stats::mean_err).
template <class J>
void put_stats(J& obj, const Stats& s) {
  put_number(obj, "mse", s.mse);
  put_snr(obj, "snr_db", s.snr_db);
  put_number(obj, "max_abs_err", s.max_abs_err);
  obj["clipped"] = s.clipped;
  put_number(obj, "clipped_pct", s.clipped_pct());
  obj["nonfinite_in"] = s.nonfinite_in;
  obj["nonfinite_out"] = s.nonfinite_out;
  obj["zeros_out"] = s.zeros_out;
  put_number(obj, "bias", s.mean_err);
  obj["count"] = s.count;
}

// A number in any form a CastScope file has held: a number, "inf" / "-inf" / "nan", or null
// (NaN). `fallback` when the value is of another kind.
template <class J>
double number_from(const J& v, double fallback = std::numeric_limits<double>::quiet_NaN()) {
  if (v.is_number()) return v.template get<double>();
  if (v.is_null()) return std::numeric_limits<double>::quiet_NaN();
  if (v.is_string()) {
    const auto s = v.template get<std::string>();
    if (s == "inf" || s == "+inf" || s == "Infinity")
      return std::numeric_limits<double>::infinity();
    if (s == "-inf" || s == "-Infinity") return -std::numeric_limits<double>::infinity();
    if (s == "nan" || s == "NaN") return std::numeric_limits<double>::quiet_NaN();
  }
  return fallback;
}

// The SNR stored under obj[key] in any form written so far (see the top of the file). NaN when
// the key is absent.
template <class J>
double snr_from(const J& obj, const std::string& key) {
  if (!obj.is_object() || !obj.contains(key)) return std::numeric_limits<double>::quiet_NaN();
  const J& v = obj[key];
  if (v.is_null()) {
    const std::string flag = exact_key(key);
    const bool exact =
        obj.contains(flag) && obj[flag].is_boolean() && obj[flag].template get<bool>();
    return exact ? std::numeric_limits<double>::infinity()
                 : std::numeric_limits<double>::quiet_NaN();
  }
  const double d = number_from(v);
  return d >= kOldExactSnr ? std::numeric_limits<double>::infinity() : d;
}

}  // namespace castscope::metrics_json
