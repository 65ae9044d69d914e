// gpt-oss MXFP4 checkpoints as transformers loads them (its GptOss MXFP4 integration):
// NAME_blocks uint8 [..., rows, G, 16] holding 32 E2M1 codes per block, element 2i in the low
// nibble, and NAME_scales uint8 [..., rows, G] holding the E8M0 block exponents (bias 127), with
// the quantization axis moved last. transformers' experts are [E, in, out] (x @ W) and decode to
// the transpose of the stored [E, out, in], so their blocks run along axis -2.
#include "castscope/export.hpp"
#include "core/plan.hpp"

namespace castscope {
namespace exportdetail {
namespace {

bool is_e2m1(const NumberSpec& n) {
  return n.is_float() && n.ebits() == 2 && n.mbits() == 1 && n.bias() == 1;
}

}  // namespace

// e2m1[fnuz] data with one e8m0 scale per 32 values along the last axis.
bool is_mxfp4(const DataType& d) {
  if (!family_traits(d.family()).grammar || !d.scaled() || !is_e2m1(d.number())) return false;
  const ScaleSpec& s = *d.scale();
  return s.scale.is_exponent() && s.scale.bits() == 8 && !s.second && s.tiles.size() == 1 &&
         s.tiles[0].size == 32 && s.tiles[0].sub == 0 && !s.tiles[0].sparse();
}

bool axis_is_last(const CastOptions& o, const Shape& s) {
  const CastOptions c = resolve_axis(o, s);
  const int r = static_cast<int>(s.size());
  return !c.flatten && (c.axis == -1 || c.axis == r - 1);
}

// Unpacked e2m1 codes (one per byte) to two per byte along the last axis, element 2i low.
// e2m1 codes (TensorCast's e2m1fnuz included, spec decision 9) are OCP E2M1 codes with the
// same values; only a true fnuz format would have a NaN at 0x8 that E2M1 cannot hold.
Tensor pack_e2m1(const Tensor& codes, bool fnuz) {
  const Shape& s = codes.shape();
  const int64_t last = s.back();
  if (last % 2)
    throw Error("the last axis (" + std::to_string(last) +
                ") must be even to pack two FP4 codes per byte");
  Shape o = s;
  o.back() = last / 2;
  Tensor out = Tensor::empty(DType::U8, o);
  const uint8_t* in = codes.ptr<uint8_t>();
  uint8_t* dst = out.mutable_ptr<uint8_t>();
  const int64_t n = out.numel();
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t lo = in[2 * i] & 0xF, hi = in[2 * i + 1] & 0xF;
    if (fnuz && (lo == 0x8 || hi == 0x8))
      throw Error("an e2m1fnuz NaN code cannot be stored as OCP E2M1");
    dst[i] = static_cast<uint8_t>(lo | (hi << 4));
  }
  return out;
}

ExportReport export_gpt_oss(const io::Model& model, const std::string& out, const ExportPlan& plan,
                            const ExportOptions& opt, JobControl* job) {
  ExportReport rep;
  OutputFiles w(out, opt);
  std::map<std::string, std::string> meta = opt.metadata;
  meta["format"] = "pt";
  meta["castscope.layout"] = "gpt-oss";
  for_each_routed(
      model, plan, job, w, rep,
      [&](const io::TensorInfo& info, const DataType& d, const Tensor& x, JobControl* sub,
          ExportedTensor& et) {
        if (!is_mxfp4(d))
          throw Error(
              "the gpt-oss layout stores MXFP4 (mxfp4e2, e2m1_e8m0_t32) only; the plan maps it "
              "to " +
              d.str());
        CastOptions co = cast_options(opt, CastMode::Actual, sub, plan, info);
        const int rank = x.rank();
        const int ax = rank ? (co.axis < 0 ? co.axis + rank : co.axis) : 0;
        const bool transposed = rank >= 2 && !co.flatten && ax == rank - 2;
        const int64_t len = rank ? x.shape()[static_cast<size_t>(ax)] : 0;
        if (rank < 1 || co.flatten || (ax != rank - 1 && !transposed) || len % 32 != 0)
          throw Error(
              "gpt-oss MXFP4 needs 32-element blocks along the last axis or, for experts "
              "[E, in, out], along axis -2; shape " +
              shape_str(x.shape()) + " with quantization axis " + describe_axis(co, x.shape()) +
              " does not tile");
        const std::string axis_text = describe_axis(co, x.shape());
        Tensor xs = x;
        if (transposed) {
          // Stored as [..., out, in]: the quantization axis last, as transformers decodes it.
          const Tensor xf = x.dtype() == DType::F32 ? x : x.to_f32();
          std::vector<int> perm(static_cast<size_t>(rank));
          for (int i = 0; i < rank; ++i) perm[static_cast<size_t>(i)] = i;
          std::swap(perm[static_cast<size_t>(rank - 1)], perm[static_cast<size_t>(rank - 2)]);
          Shape ts = xf.shape();
          std::swap(ts[static_cast<size_t>(rank - 1)], ts[static_cast<size_t>(rank - 2)]);
          xs = Tensor::empty(DType::F32, ts);
          detail::permute(xf.data(), xs.mutable_data(), 4, xf.shape(), perm);
          co.axis = -1;
        }
        const CastResult r = method_cast(info, d, xs, co, plan, opt);
        Tensor blocks = pack_e2m1(r.codes, d.number().infnan() == InfNan::FNUZ);
        Shape bs = xs.shape();
        bs.back() /= 32;
        bs.push_back(16);
        blocks = blocks.reshaped(bs);
        w.add(info.name + "_blocks", blocks);
        w.add(info.name + "_scales", r.scale);
        meta["castscope." + info.name + ".dtype"] = d.str();
        et.dtype = d.str();
        et.axis = axis_text;
        et.bytes_out = blocks.nbytes() + r.scale.nbytes();
      });
  w.finish(meta, job, rep);
  return rep;
}

}  // namespace exportdetail
}  // namespace castscope
