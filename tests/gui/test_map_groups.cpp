// The model map's row groups: numbered layers as the engine finds them, else the tensor's scope.
#include <gtest/gtest.h>

#include "map_groups.hpp"

namespace castscope::gui {
namespace {

std::string group_of(const std::string& name) {
  MapRow r;
  r.name = name;
  layer_and_block(name, r.group, r.block);  // what the sweep fills in
  return map_group(r);
}

TEST(MapGroups, FromTheTensorName) {
  const struct {
    const char* name;
    const char* group;
  } cases[] = {
      // Numbered layers.
      {"model.layers.3.self_attn.q_proj.weight", "model.layers.3"},
      {"blocks.11.attn.qkv.weight", "blocks.11"},
      {"encoder.layer.0.output.dense.weight", "encoder.layer.0"},
      // ONNX node scopes.
      {"/backbone/conv1/Conv_output_0", "/backbone/conv1"},
      {"/head/fc/MatMul", "/head/fc"},
      // ppocrv4_rec.onnx (Paddle2ONNX) names its weights OP_N.w_K: grouped by the op.
      {"linear_85.w_0", "linear_*"},
      {"conv2d_12.w_0", "conv2d_*"},
      {"batch_norm_3.w_1", "batch_norm_*"},
      // Outside any scope.
      {"lm_head.weight", ""},
      {"onnx::MatMul_1234", ""},
      {"weight", ""},
      {"conv_.w_0", ""},  // no op number
  };
  for (const auto& c : cases) EXPECT_EQ(group_of(c.name), c.group) << c.name;
}

}  // namespace
}  // namespace castscope::gui
