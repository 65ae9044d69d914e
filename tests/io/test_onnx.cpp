// ONNX models built here with protobuf: raw_data and typed-field initializers, a Constant node,
// and an initializer whose data lives in an external file.
#ifdef CASTSCOPE_HAVE_ONNX
#include <onnx/onnx_pb.h>

#include "io_test_util.hpp"

namespace castscope::iotest {
namespace {

void write_model(const onnx::ModelProto& m, const std::string& path) {
  std::string s;
  ASSERT_TRUE(m.SerializeToString(&s));
  write_file(path, Bytes(s.begin(), s.end()));
}

// A model of IR version 8 with an empty graph of this name.
onnx::ModelProto empty_model(const std::string& graph) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.mutable_graph()->set_name(graph);
  return m;
}

// An initializer of g with this name, data type and shape, its data left to the caller.
onnx::TensorProto* add_initializer(onnx::GraphProto* g, const std::string& name,
                                   onnx::TensorProto_DataType type, const Shape& shape) {
  onnx::TensorProto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(type);
  for (int64_t d : shape) t->add_dims(d);
  return t;
}

// A Constant node of g with this output and its one attribute (name and type), the value left to
// the caller.
onnx::AttributeProto* add_constant(onnx::GraphProto* g, const std::string& output,
                                   const std::string& attribute,
                                   onnx::AttributeProto_AttributeType type) {
  onnx::NodeProto* n = g->add_node();
  n->set_op_type("Constant");
  n->add_output(output);
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(attribute);
  a->set_type(type);
  return a;
}

// A float32 initializer holding v as raw_data.
onnx::TensorProto* add_raw_floats(onnx::GraphProto* g, const std::string& name, const Shape& shape,
                                  const std::vector<float>& v) {
  onnx::TensorProto* t = add_initializer(g, name, onnx::TensorProto_DataType_FLOAT, shape);
  t->set_raw_data(std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4));
  return t;
}

TEST(Onnx, InitializersConstantsAndExternalData) {
  IO_SEED_TRACE();
  std::mt19937_64 rng(seed() + 10);
  std::normal_distribution<float> nd;
  TempDir dir;
  onnx::ModelProto m = empty_model("g");
  onnx::GraphProto* g = m.mutable_graph();
  std::vector<float> raw(24), fields(6), ext(40), cst(5);
  for (auto* v : {&raw, &fields, &ext, &cst})
    for (float& x : *v) x = nd(rng);
  {  // raw_data float32 [4, 6]
    add_raw_floats(g, "w.raw", {4, 6}, raw);
  }
  {  // float16 through int32_data [2, 3]
    onnx::TensorProto* t = add_initializer(g, "w.f16", onnx::TensorProto_DataType_FLOAT16, {2, 3});
    for (float& x : fields) {
      const uint16_t h = float_to_half(x);
      x = half_to_float(h);
      t->add_int32_data(h);
    }
  }
  {  // int64 position ids
    onnx::TensorProto* t = add_initializer(g, "pos", onnx::TensorProto_DataType_INT64, {3});
    for (int64_t v : {7, -3, 11}) t->add_int64_data(v);
  }
  {  // external data: 16 bytes of something else first, then the tensor
    Bytes file(16, 0xAB);
    put_bytes(file, ext.data(), ext.size() * 4);
    write_file(dir / "weights.bin", file);
    onnx::TensorProto* t = add_initializer(g, "w.ext", onnx::TensorProto_DataType_FLOAT, {8, 5});
    t->set_data_location(onnx::TensorProto_DataLocation_EXTERNAL);
    auto kv = [&](const char* k, const std::string& v) {
      onnx::StringStringEntryProto* e = t->add_external_data();
      e->set_key(k);
      e->set_value(v);
    };
    kv("location", "weights.bin");
    kv("offset", "16");
    kv("length", std::to_string(ext.size() * 4));
  }
  {  // Constant node with float_data
    onnx::TensorProto* t =
        add_constant(g, "c.out", "value", onnx::AttributeProto_AttributeType_TENSOR)->mutable_t();
    t->set_data_type(onnx::TensorProto_DataType_FLOAT);
    t->add_dims(5);
    for (float x : cst) t->add_float_data(x);
  }
  {  // Constant nodes with value_floats and value_int
    onnx::AttributeProto* a =
        add_constant(g, "c.floats", "value_floats", onnx::AttributeProto_AttributeType_FLOATS);
    for (float x : cst) a->add_floats(-x);
    add_constant(g, "c.int", "value_int", onnx::AttributeProto_AttributeType_INT)->set_i(-42);
  }
  const std::string path = dir / "m.onnx";
  write_model(m, path);
  auto model = io::open_model(path);
  EXPECT_EQ(model->format(), "onnx");
  ASSERT_EQ(model->tensors().size(), 7u);
  auto check = [&](const std::string& name, const std::vector<float>& want, const Shape& shape) {
    SCOPED_TRACE(name);
    const Tensor t = model->load(name);
    ASSERT_EQ(t.shape(), shape);
    for (size_t k = 0; k < want.size(); ++k)
      ASSERT_EQ(t.ptr<float>()[k], want[k]) << "element " << k;
  };
  check("w.raw", raw, {4, 6});
  check("w.f16", fields, {2, 3});
  check("w.ext", ext, {8, 5});
  check("c.out", cst, {5});
  check("pos", {7, -3, 11}, {3});
  std::vector<float> neg(cst);
  for (float& v : neg) v = -v;
  check("c.floats", neg, {5});
  check("c.int", {-42}, {});
  EXPECT_EQ(model->find("pos")->dtype, "INT64");
  EXPECT_FALSE(io::is_float_storage("INT64"));
  EXPECT_EQ(model->find("w.f16")->dtype, "FLOAT16");

  // External data that escapes the folder, runs past its file, or is missing: errors naming it.
  for (const std::string& bad : {"../weights.bin", "/etc/passwd", "nothere.bin"}) {
    onnx::ModelProto m2 = m;
    m2.mutable_graph()->mutable_initializer(3)->mutable_external_data(0)->set_value(bad);
    write_model(m2, dir / "bad.onnx");
    try {
      io::open_model(dir / "bad.onnx");
      ADD_FAILURE() << "expected an error for location " << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("w.ext"), std::string::npos) << e.what();
    }
  }
  onnx::ModelProto m3 = m;
  m3.mutable_graph()->mutable_initializer(3)->mutable_external_data(1)->set_value("1000");
  write_model(m3, dir / "bad.onnx");
  EXPECT_THROW(io::open_model(dir / "bad.onnx"), Error);
  onnx::ModelProto m4 = m;
  m4.mutable_graph()->mutable_initializer(0)->add_dims(2);  // raw_data now too short
  write_model(m4, dir / "bad.onnx");
  EXPECT_THROW(io::open_model(dir / "bad.onnx"), Error);
}

// A CNN's Conv weights as ONNX stores them, [O, I, kh, kw]: the default datatype (mxfp8e4, tiles
// of 32) on the default axis casts them over I*kh*kw, exactly as their [O, I*kh*kw] view.
TEST(Onnx, ConvWeightsCastOverTheirReduction) {
  IO_SEED_TRACE();
  std::mt19937_64 rng(seed() + 11);
  std::normal_distribution<float> nd;
  onnx::ModelProto m = empty_model("cnn");
  onnx::GraphProto* g = m.mutable_graph();
  const std::vector<Shape> shapes = {{64, 3, 7, 7}, {256, 128, 3, 3}};
  std::vector<std::vector<float>> data;
  for (size_t k = 0; k < shapes.size(); ++k) {
    std::vector<float> v(static_cast<size_t>(numel(shapes[k])));
    for (float& x : v) x = nd(rng) * 0.05f;
    const onnx::TensorProto* t =
        add_raw_floats(g, "conv" + std::to_string(k) + ".weight", shapes[k], v);
    onnx::NodeProto* n = g->add_node();
    n->set_op_type("Conv");
    n->add_input(k ? "h" : "x");
    n->add_input(t->name());
    n->add_output(k ? "y" : "h");
    data.push_back(std::move(v));
  }
  TempDir dir;
  const std::string path = dir / "cnn.onnx";
  write_model(m, path);
  auto model = io::open_model(path);
  const DataType d = DataType::parse("mxfp8e4");
  for (size_t k = 0; k < shapes.size(); ++k) {
    SCOPED_TRACE(shape_str(shapes[k]));
    const Tensor x = model->load("conv" + std::to_string(k) + ".weight");
    CastOptions o;
    o.device = Device::CPU;
    o.axis_auto = true;
    const CastResult r = cast(x, d, o);
    EXPECT_EQ(describe_axis(o, x.shape()), "1..3:" + std::to_string(x.numel() / x.shape()[0]));
    CastOptions plain;
    plain.device = Device::CPU;
    const Tensor want = cast(x.reshaped({x.shape()[0], x.numel() / x.shape()[0]}), d, plain).values;
    ASSERT_EQ(r.values.shape(), shapes[k]);
    EXPECT_EQ(std::memcmp(r.values.data(), want.data(), want.nbytes()), 0);
  }
}

}  // namespace
}  // namespace castscope::iotest
#endif
