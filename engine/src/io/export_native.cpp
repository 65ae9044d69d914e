// CastScope packed safetensors, streamed: the same keys and __metadata__ as io::save_packed
// (docs/export-formats.md), written one tensor at a time.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

#include "castscope/export.hpp"
#include "core/dtype_format.hpp"

namespace castscope {
namespace exportdetail {
namespace {

void add_packed(OutputFiles& w, std::map<std::string, std::string>& meta, int& version,
                const std::string& name, const CastResult& r, ExportedTensor& rep) {
  for (const auto& [k, v] : io::packed_tensor_metadata(name, r)) meta[k] = v;
  for (const auto& [key, t] : io::packed_file_tensors(name, r, version)) {
    w.add(key, t);
    rep.bytes_out += t.nbytes();
  }
}

}  // namespace

ExportReport export_native(const io::Model& model, const std::string& out, const ExportPlan& plan,
                           const ExportOptions& opt, JobControl* job) {
  ExportReport rep;
  OutputFiles w(out, opt);
  std::map<std::string, std::string> meta = opt.metadata;
  meta["format"] = "castscope-packed";
  int version = 1;
  for_each_routed(
      model, plan, job, w, rep,
      [&](const io::TensorInfo& info, const DataType& d, const Tensor& x, JobControl* sub,
          ExportedTensor& et) {
        et.dtype = d.str();
        CastOptions o = cast_options(opt, CastMode::Compress, sub, plan, info);
        o.rotate = plan.rotation_for(info);
        et.axis = describe_axis(o, x.shape());
        add_packed(w, meta, version, info.name, method_cast(info, d, x, o, plan, opt), et);
      },
      [&](const io::TensorInfo& info, const Tensor& x, JobControl* sub, ExportedTensor& et) {
        const DType sd = stored_dtype(info);
        // Kept float tensors are stored as an unscaled cast to their own type, so that
        // load_packed and upcast give them back like every other tensor.
        if (const char* spec = dtype_format(sd); spec && x.numel() > 0) {
          et.dtype = std::string("keep:") + dtype_name(sd);
          CastOptions o = cast_options(opt, CastMode::Compress, sub);
          o.overflow = Overflow::IEEE;  // a value of the type itself never overflows; Inf stays Inf
          o.round = Round::Even;
          if (x.dtype() == sd) {
            // Already the stored bits: an unscaled compress-mode cast to its own type is the
            // bits themselves.
            CastResult r;
            r.dtype = DataType::parse(spec);
            r.options = o;
            r.shape = x.shape();
            r.mode = CastMode::Compress;
            r.codes = x;
            add_packed(w, meta, version, info.name, r, et);
          } else {
            add_packed(w, meta, version, info.name, cast(x, DataType::parse(spec), o), et);
          }
        } else {
          keep_tensor(w, info, x, et);
        }
      });
  meta["castscope.version"] = std::to_string(version);
  w.finish(meta, job, rep);
  return rep;
}

}  // namespace exportdetail

void export_packed(const std::string& path, const std::vector<io::PackedTensor>& tensors,
                   const std::vector<std::pair<std::string, std::string>>& extra_metadata) {
  const std::string staged =
      path + ".check-" + std::to_string(reinterpret_cast<uintptr_t>(&tensors));
  io::save_packed(staged, tensors, extra_metadata, path);
  auto same = [](const Tensor& a, const Tensor& b) {
    if (!a || !b) return !a && !b;
    return a.dtype() == b.dtype() && a.shape() == b.shape() &&
           std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
  };
  try {
    const std::vector<io::PackedTensor> back = io::load_packed(staged);
    std::map<std::string, const CastResult*> by_name;
    for (const io::PackedTensor& b : back) by_name[b.name] = &b.result;
    for (const io::PackedTensor& t : tensors) {
      auto it = by_name.find(t.name);
      if (it == by_name.end())
        throw Error("verifying '" + path + "': tensor '" + t.name + "' did not read back");
      for (const auto& p : {&CastResult::codes, &CastResult::scale, &CastResult::zero,
                            &CastResult::tenscale, &CastResult::meta, &CastResult::mask,
                            &CastResult::residual, &CastResult::residual_scale})
        if (!same(t.result.*p, it->second->*p))
          throw Error("verifying '" + path + "': tensor '" + t.name +
                      "' reads back different data");
      if (!(it->second->dtype == t.result.dtype) || it->second->shape != t.result.shape)
        throw Error("verifying '" + path + "': tensor '" + t.name +
                    "' reads back a different datatype or shape");
    }
  } catch (...) {
    std::remove(staged.c_str());
    throw;
  }
  if (std::rename(staged.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(staged.c_str());
    throw Error("cannot write '" + path + "': " + why);
  }
}

}  // namespace castscope
