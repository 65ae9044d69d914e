// Re-quantizing a stored weight's dequantized values to its stored datatype (io.hpp,
// reproduce_stored): how much of a published file CastScope's round-to-nearest reproduces, in
// values and, where the convention gives them, in the file's own codes and scales.
#include <cstring>

#include "castscope/io.hpp"

namespace castscope::io {

Reproduction reproduce_stored(const Model& model, const std::string& name) {
  const TensorInfo* t = model.find(name);
  if (!t) throw Error("'" + model.path() + "' has no tensor '" + name + "'");
  if (t->stored.empty())
    throw Error("tensor '" + name + "' of '" + model.path() + "' is not stored quantized");
  if (t->stored.datatype.empty())
    throw Error("tensor '" + name + "' is stored as " + t->stored.format +
                ", which has no CastScope datatype to re-quantize to");
  Reproduction r;
  r.datatype = t->stored.datatype;
  const Tensor x = model.load(name);
  CastOptions o;
  o.round = Round::Even;
  const DataType dt = DataType::parse(r.datatype);
  const CastOptions co = cast_options_for(o, *t);
  const CastResult c = cast(x, dt, co);
  const uint32_t* a = static_cast<const uint32_t*>(x.data());
  const uint32_t* b = static_cast<const uint32_t*>(c.values.data());
  r.values = x.numel();
  for (int64_t i = 0; i < r.values; ++i) r.identical += a[i] == b[i];

  StoredQParams q;
  try {
    q = model.load_stored_qparams(name);
  } catch (const Error&) {
    return r;  // a convention whose codes are not read: values only
  }
  CastOptions ao = co;
  ao.mode = CastMode::Actual;
  const CastResult ac = cast(x, dt, ao);
  if (ac.codes.numel() != q.codes.numel() || ac.scale.numel() != q.scales.numel())
    throw Error("tensor '" + name + "': CastScope's " + r.datatype + " cast has " +
                std::to_string(ac.codes.numel()) + " codes and " +
                std::to_string(ac.scale.numel()) + " scales, the file " +
                std::to_string(q.codes.numel()) + " and " + std::to_string(q.scales.numel()));
  // One-byte element codes (E2M1 nibbles as U8, E4M3 bytes) compare as bytes; a cast whose codes
  // are wider is not compared rather than counted as all different.
  if (dtype_size(ac.codes.dtype()) != 1) return r;
  r.has_codes = true;
  r.codes = q.codes.numel();
  const uint8_t* m = static_cast<const uint8_t*>(ac.codes.data());
  const uint8_t* f = q.codes.ptr<uint8_t>();
  for (int64_t i = 0; i < r.codes; ++i) r.identical_codes += m[i] == f[i];
  r.scales = q.scales.numel();
  if (q.scales.dtype() == DType::U8) {
    // Scale codes (E8M0 exponent bytes) compare as bytes.
    if (ac.scale.dtype() == DType::U8)
      for (int64_t i = 0; i < r.scales; ++i)
        r.identical_scales += ac.scale.ptr<uint8_t>()[i] == q.scales.ptr<uint8_t>()[i];
  } else {
    const Tensor ms = ac.scale.to_f32();
    const uint32_t* sm = static_cast<const uint32_t*>(ms.data());
    const uint32_t* sf = static_cast<const uint32_t*>(q.scales.data());
    for (int64_t i = 0; i < r.scales; ++i) r.identical_scales += sm[i] == sf[i];
  }
  return r;
}

}  // namespace castscope::io
