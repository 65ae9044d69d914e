// ONNX reader: the graph's initializers and the tensors of its Constant nodes, with their data
// inline (raw_data or the typed repeated fields) or in external files beside the model. The
// protobuf is parsed once on open (inline data stays in that parsed message); external files
// are memory-mapped and touched only when a tensor is loaded.
#include <climits>
#include <filesystem>
#include <map>

#include "io/reader.hpp"
#include "onnx/onnx_pb.h"

namespace castscope::io::detail {
namespace {

struct OnnxType {
  int id;
  const char* name;
  bool known;  // has a DType
  DType dtype;
  uint64_t bytes;
};
// Ids 17-20 are the float8 types of newer ONNX releases; they are handled by number so that
// files using them open with older libonnx headers too.
constexpr OnnxType kTypes[] = {
    {1, "FLOAT", true, DType::F32, 4},
    {2, "UINT8", true, DType::U8, 1},
    {3, "INT8", true, DType::I8, 1},
    {4, "UINT16", true, DType::U16, 2},
    {5, "INT16", true, DType::I16, 2},
    {6, "INT32", true, DType::I32, 4},
    {7, "INT64", true, DType::I64, 8},
    {9, "BOOL", true, DType::Bool, 1},
    {10, "FLOAT16", true, DType::F16, 2},
    {11, "DOUBLE", true, DType::F64, 8},
    {12, "UINT32", true, DType::U32, 4},
    {13, "UINT64", true, DType::U64, 8},
    {16, "BFLOAT16", true, DType::BF16, 2},
    {17, "FLOAT8E4M3FN", true, DType::F8E4M3, 1},
    {18, "FLOAT8E4M3FNUZ", false, DType::U8, 1},
    {19, "FLOAT8E5M2", true, DType::F8E5M2, 1},
    {20, "FLOAT8E5M2FNUZ", false, DType::U8, 1},
};

const OnnxType* find_type(int id) {
  for (const OnnxType& t : kTypes)
    if (t.id == id) return &t;
  return nullptr;
}

struct Source {
  std::shared_ptr<const onnx::ModelProto> model;
  const onnx::TensorProto* t;
  std::shared_ptr<const MappedFile> ext;  // external data file, when used
  const uint8_t* ext_data = nullptr;
};

// Typed-field storage to the stored dtype.
Tensor from_fields(const onnx::TensorProto& t, const OnnxType& ty, const Shape& shape) {
  Tensor out = Tensor::empty(ty.dtype, shape);
  const int64_t n = out.numel();
  uint8_t* d = static_cast<uint8_t*>(out.mutable_data());
  auto put = [&](int64_t i, auto v) { std::memcpy(d + i * ty.bytes, &v, ty.bytes); };
  switch (ty.dtype) {
    case DType::F32:
      for (int64_t i = 0; i < n; ++i) put(i, t.float_data(static_cast<int>(i)));
      break;
    case DType::F64:
      for (int64_t i = 0; i < n; ++i) put(i, t.double_data(static_cast<int>(i)));
      break;
    case DType::I64:
      for (int64_t i = 0; i < n; ++i) put(i, t.int64_data(static_cast<int>(i)));
      break;
    case DType::U32:
      for (int64_t i = 0; i < n; ++i)
        put(i, static_cast<uint32_t>(t.uint64_data(static_cast<int>(i))));
      break;
    case DType::U64:
      for (int64_t i = 0; i < n; ++i) put(i, t.uint64_data(static_cast<int>(i)));
      break;
    case DType::I32:
      for (int64_t i = 0; i < n; ++i) put(i, t.int32_data(static_cast<int>(i)));
      break;
    default:  // narrower types travel as int32 holding the value or the bit pattern
      for (int64_t i = 0; i < n; ++i) {
        const uint32_t v = static_cast<uint32_t>(t.int32_data(static_cast<int>(i)));
        std::memcpy(d + i * ty.bytes, &v, ty.bytes);  // little-endian host: low bytes first
      }
  }
  return out;
}

int64_t field_count(const onnx::TensorProto& t, DType d) {
  switch (d) {
    case DType::F32:
      return t.float_data_size();
    case DType::F64:
      return t.double_data_size();
    case DType::I64:
      return t.int64_data_size();
    case DType::U32:
    case DType::U64:
      return t.uint64_data_size();
    default:
      return t.int32_data_size();
  }
}

}  // namespace

std::vector<Entry> read_onnx(const std::string& path) {
  auto map = MappedFile::open(path);
  if (map->size() > static_cast<uint64_t>(INT_MAX))
    throw Error(
        "'" + path +
        "': ONNX protobuf over 2 GB (large models keep their weights in external data files)");
  auto model = std::make_shared<onnx::ModelProto>();
  if (!model->ParseFromArray(map->data(), static_cast<int>(map->size())))
    throw Error("'" + path + "': truncated or not an ONNX model: its " +
                std::to_string(map->size()) +
                " bytes do not parse as an ONNX protobuf (a partial download or copy, or "
                "another format named .onnx)");
  if (!model->has_graph()) throw Error("'" + path + "': ONNX model has no graph");
  const std::filesystem::path base = std::filesystem::path(path).parent_path();
  std::map<std::string, std::shared_ptr<const MappedFile>> ext_files;

  // Constant nodes may give their value as a plain number or list: turn those into tensors in
  // the parsed copy so that every constant is read the same way.
  for (onnx::NodeProto& n : *model->mutable_graph()->mutable_node()) {
    if (n.op_type() != "Constant") continue;
    for (onnx::AttributeProto& a : *n.mutable_attribute()) {
      onnx::TensorProto* t = nullptr;
      if (a.name() == "value_float" || a.name() == "value_floats") {
        t = a.mutable_t();
        t->set_data_type(onnx::TensorProto_DataType_FLOAT);
        if (a.name() == "value_float") t->add_float_data(a.f());
        for (float f : a.floats()) t->add_float_data(f);
      } else if (a.name() == "value_int" || a.name() == "value_ints") {
        t = a.mutable_t();
        t->set_data_type(onnx::TensorProto_DataType_INT64);
        if (a.name() == "value_int") t->add_int64_data(a.i());
        for (int64_t i : a.ints()) t->add_int64_data(i);
      }
      if (t && (a.name() == "value_floats" || a.name() == "value_ints"))
        t->add_dims(a.name() == "value_floats" ? a.floats_size() : a.ints_size());
      if (t) a.set_name("value");
    }
  }

  std::vector<std::pair<std::string, const onnx::TensorProto*>> found;
  const onnx::GraphProto& g = model->graph();
  for (const onnx::TensorProto& t : g.initializer()) found.emplace_back(t.name(), &t);
  for (const onnx::NodeProto& n : g.node()) {
    if (n.op_type() != "Constant") continue;
    for (const onnx::AttributeProto& a : n.attribute())
      if (a.name() == "value" && a.has_t())
        found.emplace_back(n.output_size() ? n.output(0) : a.t().name(), &a.t());
  }

  std::vector<Entry> out;
  for (const auto& item : found) {
    const std::string name = item.first;  // a plain variable: lambdas below capture it
    const onnx::TensorProto* tp = item.second;
    const onnx::TensorProto& t = *tp;
    const OnnxType* ty = find_type(t.data_type());
    if (!ty)
      throw Error(where(path, name) + "ONNX data type " + std::to_string(t.data_type()) +
                  " is not supported");
    Shape shape(t.dims().begin(), t.dims().end());
    if (shape.size() > 64)
      throw Error(where(path, name) + "absurd rank " + std::to_string(shape.size()));
    const uint64_t numel = checked_numel(shape, path, name);
    const uint64_t nbytes = numel * ty->bytes;
    Source src{model, tp, nullptr, nullptr};
    enum { Raw, Fields, External } kind;
    if (t.data_location() == onnx::TensorProto_DataLocation_EXTERNAL) {
      kind = External;
      std::string location;
      uint64_t offset = 0, length = UINT64_MAX;
      for (const onnx::StringStringEntryProto& kv : t.external_data()) {
        try {
          if (kv.key() == "location")
            location = kv.value();
          else if (kv.key() == "offset")
            offset = std::stoull(kv.value());
          else if (kv.key() == "length")
            length = std::stoull(kv.value());
        } catch (const std::exception&) {
          throw Error(where(path, name) + "external_data " + kv.key() + " '" + kv.value() +
                      "' is not a number");
        }
      }
      const std::filesystem::path loc(location);
      bool escapes = location.empty() || loc.is_absolute();
      for (const auto& part : loc)
        if (part == "..") escapes = true;
      if (escapes)
        throw Error(where(path, name) + "external data location '" + location +
                    "' is not a path inside the model's folder");
      const std::string ext_path = (base / loc).string();
      auto& ext = ext_files[ext_path];
      if (!ext) {
        try {
          ext = MappedFile::open(ext_path);
        } catch (const Error& e) {
          throw Error(where(path, name) + "external data: " + e.what());
        }
      }
      if (length == UINT64_MAX) length = nbytes;
      if (length != nbytes)
        throw Error(where(path, name) + "external data length " + std::to_string(length) +
                    " does not match " + ty->name + " " + shape_str(shape) + " (" +
                    std::to_string(nbytes) + " bytes)");
      if (offset > ext->size() || length > ext->size() - offset)
        throw Error(where(path, name) + "external data [" + std::to_string(offset) + ", +" +
                    std::to_string(length) + ") runs past the end of '" + ext_path + "' (" +
                    std::to_string(ext->size()) + " bytes)");
      src.ext = ext;
      src.ext_data = ext->data() + offset;
    } else if (t.has_raw_data()) {
      kind = Raw;
      if (t.raw_data().size() != nbytes)
        throw Error(where(path, name) + "raw_data holds " + std::to_string(t.raw_data().size()) +
                    " bytes but " + ty->name + " " + shape_str(shape) + " needs " +
                    std::to_string(nbytes));
    } else {
      kind = Fields;
      const int64_t have = field_count(t, ty->known ? ty->dtype : DType::U8);
      if (static_cast<uint64_t>(have) != numel)
        throw Error(where(path, name) + "holds " + std::to_string(have) + " values but " +
                    ty->name + " " + shape_str(shape) + " needs " + std::to_string(numel));
    }
    Entry e;
    e.info = {name, ty->name, shape, nbytes, path, {}, {}};
    if (!ty->known) {
      const std::string tn = ty->name;
      e.load = [path, name, tn]() -> Tensor {
        throw Error(where(path, name) + tn +
                    " is not supported (no float32 conversion for fnuz float8)");
      };
      out.push_back(std::move(e));
      continue;
    }
    const DType dt = ty->dtype;
    const OnnxType tyc = *ty;
    e.raw = [src, kind, dt, shape, tyc]() -> Tensor {
      if (kind == External) return view_raw(src.ext, src.ext_data, dt, shape);
      if (kind == Raw)
        return view_raw(src.model, reinterpret_cast<const uint8_t*>(src.t->raw_data().data()), dt,
                        shape);
      return from_fields(*src.t, tyc, shape);
    };
    auto raw = e.raw;
    e.load = [raw, dt] {
      Tensor t = raw();
      return dt == DType::F32 ? t : t.to_f32();
    };
    out.push_back(std::move(e));
  }
  resolve_onnx_layouts(g, out);
  return out;
}

}  // namespace castscope::io::detail
