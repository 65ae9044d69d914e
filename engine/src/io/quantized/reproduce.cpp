// Re-quantizing a stored weight's dequantized values to its stored datatype (io.hpp,
// reproduce_stored): how much of a published file CastScope's round-to-nearest reproduces.
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
  const CastResult c = cast(x, DataType::parse(r.datatype), cast_options_for(o, *t));
  const uint32_t* a = static_cast<const uint32_t*>(x.data());
  const uint32_t* b = static_cast<const uint32_t*>(c.values.data());
  r.values = x.numel();
  for (int64_t i = 0; i < r.values; ++i) r.identical += a[i] == b[i];
  return r;
}

}  // namespace castscope::io
