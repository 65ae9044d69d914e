// One size on short rows: every figure that states what a datatype costs on a tensor (storage_bits,
// DataType::bits_per_value at the row length as Python reads it, the model map's cells and their
// totals, the auto-planner's ranking, the budget planner's candidates) equals the bytes the native
// export writes for that tensor, for every family, on rows of 9, 27 and 120 and a depthwise conv
// [16, 1, 3, 3]. On such rows a partial tile or ggml block is stored whole, so a nominal figure
// (q4_k's 4.5 bits on rows of 9, which store 128) is far off.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <random>

#include "castscope/autoplan.hpp"
#include "castscope/export.hpp"
#include "castscope/modelmap.hpp"
#include "castscope/planner.hpp"
#include "castscope/storage_bits.hpp"
#include "st_reader.hpp"
#include "test_seed.hpp"

using namespace castscope;
namespace fs = std::filesystem;

namespace {

// TensorCast grammar (float and int with channel, tile, 2-D, zero point, subtile, sparse), NVFP4,
// MX, ggml blocks, codebooks and TCFP.
const std::vector<std::string> kDatatypes = {"mxfp8e4",
                                             "mxfp6e2",
                                             "mxfp4e2",
                                             "nvfp4",
                                             "e4m3fn_float32_t0",
                                             "int4_float32_t32",
                                             "uint4_fi32",
                                             "mx6",
                                             "e4m3fn_e8m0_t16n2m4",
                                             "bfloat16",
                                             "q4_0",
                                             "q8_0",
                                             "q4_k",
                                             "q6_k",
                                             "iq4_nl",
                                             "icb44fi_e4m3fn_e8m0_t32s8",
                                             "tcfp8",
                                             "tcfp12",
                                             "tcfp16"};

struct Case {
  std::string name;
  Shape shape;
};
const std::vector<Case> kTensors = {{"conv_dw.weight", {16, 1, 3, 3}},
                                    {"conv3.weight", {8, 3, 3, 3}},
                                    {"rows9.weight", {12, 9}},
                                    {"rows27.weight", {6, 27}},
                                    {"linear120.weight", {10, 120}}};

Tensor random_tensor(const Shape& shape, std::mt19937_64& rng) {
  Tensor t = Tensor::empty(DType::F32, shape);
  std::normal_distribution<float> n(0.0f, 1.0f);
  for (int64_t i = 0; i < t.numel(); ++i) t.mutable_ptr<float>()[i] = n(rng);
  return t;
}

// Bytes the native file holds for a tensor: its own entry or its parts ("name.scale", ...).
uint64_t file_bytes(const exporttest::StFile& f, const std::string& name) {
  uint64_t b = 0;
  for (const auto& [k, t] : f.tensors)
    if (k == name || k.rfind(name + ".", 0) == 0) b += t.bytes.size();
  return b;
}

TEST(ShortRows, EveryFigureEqualsTheNativeExport) {
  const uint64_t seed = castscope::test::test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (set CASTSCOPE_TEST_SEED to repeat)");
  std::mt19937_64 rng(seed + 4800);
  MemoryModel m;
  for (const Case& c : kTensors) m.add(c.name, random_tensor(c.shape, rng));
  CastOptions co;
  co.device = Device::CPU;
  AxisSpec::parse("auto").apply(co);

  MapOptions mo;
  mo.dtypes = kDatatypes;
  mo.cast = co;
  const ModelMap map = sweep_model(m, mo);
  ASSERT_EQ(map.rows.size(), kTensors.size());

  const fs::path dir =
      fs::temp_directory_path() / ("castscope_short_rows_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  bool q4k_far_from_nominal = false;
  for (size_t d = 0; d < kDatatypes.size(); ++d) {
    const std::string& dt = kDatatypes[d];
    const DataType dtype = DataType::parse(dt);
    SCOPED_TRACE(dt);
    ExportOptions eo;
    eo.layout = Layout::Native;
    eo.cast = co;
    const fs::path out = dir / ("m" + std::to_string(d) + ".safetensors");
    const ExportPlan plan = parse_plan(nlohmann::json({{"default", dt}}).dump(), "short rows");
    const ExportReport rep = export_model(m, out.string(), plan, eo);
    const exporttest::StFile f = exporttest::read_st(out.string());
    for (size_t i = 0; i < kTensors.size(); ++i) {
      const Case& c = kTensors[i];
      SCOPED_TRACE(c.name + " " + shape_str(c.shape));
      const io::TensorInfo* info = nullptr;
      for (const io::TensorInfo& t : m.tensors())
        if (t.name == c.name) info = &t;
      ASSERT_NE(info, nullptr);
      const CastOptions to = io::cast_options_for(co, *info);
      const uint64_t bits = storage_bits(dtype, c.shape, to);
      const uint64_t wrote = file_bytes(f, c.name);
      // Each stored part (codes, scales, meta, mask, tensor scale) rounds up to whole bytes.
      const uint64_t want = (bits + 7) / 8;
      EXPECT_GE(wrote + 0, want) << "storage_bits " << bits;
      EXPECT_LE(wrote, want + 4) << "storage_bits " << bits;
      for (const ExportedTensor& e : rep.tensors)
        if (e.name == c.name) EXPECT_EQ(e.bytes_out, wrote);

      // Python's DataType.bits_per_value(len): per row of the resolved axis, the tensor scale
      // counted once per tensor.
      const int64_t len = axis_length(to, c.shape);
      const double n = static_cast<double>(numel(c.shape));
      const double tscale = !dtype.scaled()                ? 0.0
                            : dtype.multiscale()           ? dtype.scale()->second->bits()
                            : dtype.scale()->tiles.empty() ? dtype.scale()->scale.bits()
                                                           : 0.0;
      if (!dtype.scaled() || dtype.scale()->tiles.size() < 2)
        EXPECT_DOUBLE_EQ(dtype.bits_per_value(len) * n + tscale, static_cast<double>(bits));

      // The model map's cell and the totals a plan from it announces.
      const MapRow& row = map.rows[i];
      ASSERT_EQ(row.name, c.name);
      EXPECT_TRUE(row.cells[d].error.empty()) << row.cells[d].error;
      EXPECT_EQ(row.cells[d].storage_bits, bits);
      std::vector<int> choice(map.rows.size(), -1);
      choice[i] = static_cast<int>(d);
      const MapTotals tot = map_totals(map, choice);
      EXPECT_DOUBLE_EQ(tot.bits - (tot.stored_bits - 8.0 * row.stored_bytes),
                       static_cast<double>(bits));

      // The auto-planner's ranking on this tensor.
      const std::vector<RankedCandidate> ranked = rank_candidates({dt}, c.shape, to);
      ASSERT_EQ(ranked.size(), 1u);
      EXPECT_DOUBLE_EQ(ranked[0].bits * n, static_cast<double>(bits));

      // The labelled figure names the nominal cost and the tensor's own.
      const std::string label = bits_label(dtype, c.shape, to);
      if (dt == "q4_k" && len < 256) {
        EXPECT_NE(label.find("nominal 4.5, on rows of " + std::to_string(len)), std::string::npos)
            << label;
        q4k_far_from_nominal |= static_cast<double>(wrote) > 4 * 4.5 * n / 8;
      }
    }
  }
  EXPECT_TRUE(q4k_far_from_nominal);

  // The budget planner's candidate sizes on the same tensors.
  BudgetPlanOptions po;
  po.candidates = kDatatypes;
  po.cast = co;
  const PlanTable table = build_plan_table(m, po);
  size_t seen = 0;
  for (const PlanTensor& t : table.tensors) {
    const io::TensorInfo* info = nullptr;
    for (const io::TensorInfo& x : m.tensors())
      if (x.name == t.name) info = &x;
    ASSERT_NE(info, nullptr);
    for (const PlanOption& o : t.options) {
      const std::string& dt = table.candidates[static_cast<size_t>(o.candidate)];
      EXPECT_EQ(o.bits,
                storage_bits(DataType::parse(dt), info->shape, io::cast_options_for(co, *info)))
          << t.name << " " << dt;
      ++seen;
    }
  }
  EXPECT_GT(seen, kTensors.size());
  fs::remove_all(dir);
}

}  // namespace
