// GPTQ (AutoGPTQ / GPTQModel, quant_method "gptq") and AutoAWQ GEMM (quant_method "awq"): int
// codes packed into I32 along the input axis (GPTQ: `qweight` [in*b/32, out]) or the output axis
// (AWQ: `qweight` [in, out*b/32], nibbles in the order [0, 4, 1, 5, 2, 6, 3, 7]), `qzeros` packed
// along the outputs, `scales` F16 [groups, out], GPTQ's optional `g_idx` [in]. The logical weight
// is nn.Linear's [out, in].
//
// Values: (code - zero) * scale in float16, one rounding of the exact product: AutoAWQ as
// compressed-tensors' AutoAWQConverter and its pack-quantized decompression compute it; GPTQ v1
// as auto-gptq's torch dequantization does, with the zero stored as zero - 1 (checkpoint_format
// gptq_v2 stores the zero itself).
#include "io/quantized/quantized.hpp"

namespace castscope::io::detail::quantized {

namespace {

int get_int(const Source& src, const char* key, int def) {
  if (!src.q.contains(key) || src.q[key].is_null()) return def;
  if (!src.q[key].is_number_integer())
    throw Error("'" + src.file + "': quantization_config." + key + " is not an integer");
  return src.q[key].get<int>();
}

// Field `k` of a packed I32 word stream: `per` fields of `bits` per word.
inline int field(uint32_t word, int k, int bits) {
  return static_cast<int>((word >> (k * bits)) & ((1u << bits) - 1));
}

constexpr int kAwqOrder[8] = {0, 4, 1, 5, 2, 6, 3, 7};

}  // namespace

void fold_gptq_awq(const Source& src, Parts& parts) {
  const bool awq = src.method == "awq";
  const int bits = get_int(src, "bits", get_int(src, "w_bit", 4));
  int gsize = get_int(src, "group_size", get_int(src, "q_group_size", 128));
  const std::string ver = src.q.value("version", std::string("gemm"));
  const std::string cf = src.q.value("checkpoint_format", std::string("gptq"));
  const bool zero_minus_one = !awq && cf != "gptq_v2";
  const bool awq_zero = !awq || src.q.value("zero_point", true);
  if (bits != 2 && bits != 4 && bits != 8)
    throw Error("'" + src.file + "': " + src.method + " with " + std::to_string(bits) +
                "-bit codes is not read (2, 4 and 8 are)");
  if (awq && (bits != 4 || (ver != "gemm" && ver != "GEMM")))
    throw Error("'" + src.file + "': AutoAWQ version '" + ver + "' with " + std::to_string(bits) +
                "-bit codes is not read (4-bit GEMM is)");
  const int per = 32 / bits;
  for (size_t i = 0; i < parts.size(); ++i) {
    const Entry& qw = parts.at(i);
    if (!ends_with(qw.info.name, ".qweight")) continue;
    const std::string p = qw.info.name.substr(0, qw.info.name.size() - 8), wn = p + ".weight";
    const Entry& sc = parts.need(p + ".scales", wn, src);
    expect_dtype(qw, {"I32"}, "qweight");
    expect_dtype(sc, {"F16", "BF16"}, "scales");
    if (qw.info.shape.size() != 2 || sc.info.shape.size() != 2)
      throw Error(where_entry(qw) + "qweight and scales must be matrices");
    const int64_t in = awq ? qw.info.shape[0] : qw.info.shape[0] * per;
    const int64_t out = awq ? qw.info.shape[1] * per : qw.info.shape[1];
    const int64_t g = gsize <= 0 ? in : gsize;
    const int64_t ng = (in + g - 1) / g;
    const Entry* gidx = awq ? nullptr : parts.find(p + ".g_idx");
    if (sc.info.shape[1] != out || (!gidx && sc.info.shape[0] != ng))
      throw Error(where_entry(sc) + "scales shape " + shape_str(sc.info.shape) +
                  " does not tile the [" + std::to_string(out) + ", " + std::to_string(in) +
                  "] weight in groups of " + std::to_string(g) + " inputs (expected [" +
                  std::to_string(ng) + ", " + std::to_string(out) + "])");
    const int64_t groups = sc.info.shape[0];
    std::vector<const Entry*> used = {&qw, &sc};
    const Entry* qz = awq_zero ? &parts.need(p + ".qzeros", wn, src) : nullptr;
    if (qz) {
      expect_dtype(*qz, {"I32"}, "qzeros");
      expect_shape(*qz, {groups, out / per}, "qzeros");
      used.push_back(qz);
    }
    if (gidx) {
      expect_dtype(*gidx, {"I32", "I64"}, "g_idx");
      expect_shape(*gidx, {in}, "g_idx");
      used.push_back(gidx);
    }
    const Entry qwe = qw, sce = sc, qze = qz ? *qz : Entry{}, ge = gidx ? *gidx : Entry{};
    const bool has_z = qz != nullptr, has_g = gidx != nullptr;
    const std::string sd = sc.info.dtype;
    auto load = [qwe, sce, qze, ge, has_z, has_g, awq, bits, per, in, out, g, groups,
                 zero_minus_one, sd] {
      const Tensor w = raw(qwe), s = raw(sce), z = has_z ? raw(qze) : Tensor();
      std::vector<int64_t> grp(in);
      for (int64_t k = 0; k < in; ++k) grp[k] = k / g;
      if (has_g) {
        const Tensor gi = raw(ge).to_f32();
        for (int64_t k = 0; k < in; ++k) {
          const float v = gi.ptr<float>()[k];
          if (!(v >= 0 && v < static_cast<float>(groups)))
            throw Error(where_entry(ge) + "g_idx[" + std::to_string(k) +
                        "] = " + std::to_string(static_cast<int64_t>(v)) + " is outside the " +
                        std::to_string(groups) + " groups");
          grp[k] = static_cast<int64_t>(v);
        }
      }
      const uint32_t* wp = static_cast<const uint32_t*>(w.data());
      const uint32_t* zp = has_z ? static_cast<const uint32_t*>(z.data()) : nullptr;
      const int64_t zw = out / per;
      Tensor o = Tensor::uninitialized(DType::F32, {out, in});
      float* op = o.mutable_ptr<float>();
      for (int64_t r = 0; r < out; ++r)
        for (int64_t k = 0; k < in; ++k) {
          const int64_t gr = grp[k];
          int q, zero;
          if (awq) {
            q = field(wp[k * zw + r / per], kAwqOrder[r % per], bits);
            zero = has_z ? field(zp[gr * zw + r / per], kAwqOrder[r % per], bits) : 1 << (bits - 1);
          } else {
            q = field(wp[(k / per) * out + r], static_cast<int>(k % per), bits);
            zero = field(zp[gr * zw + r / per], static_cast<int>(r % per), bits) +
                   (zero_minus_one ? 1 : 0);
          }
          op[r * in + k] = round_to(static_cast<float>(q - zero) * scale_at(s, gr * out + r), sd);
        }
      return o;
    };
    const std::string b = std::to_string(bits);
    const std::string spec =
        "uint" + b + "_" + scale_spec(sd) + "_uint" + b + "_t" + std::to_string(g);
    const std::string conv = awq ? "autoawq gemm" : (zero_minus_one ? "gptq v1" : "gptq v2");
    const std::string fmt = "uint" + b + " with a " + scale_spec(sd) +
                            " scale and zero point per " + std::to_string(g) + " inputs" +
                            (has_g ? ", inputs grouped by g_idx (activation order)" : "") +
                            (zero_minus_one ? ", zero stored as zero - 1" : "");
    parts.fold(i,
               logical_weight(wn, {out, in}, sd, used, conv, datatype_if_known(spec), fmt, load));
  }
}

}  // namespace castscope::io::detail::quantized
