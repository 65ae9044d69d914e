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

TEST(MapGroups, NumberedLayers) {
  EXPECT_EQ(group_of("model.layers.3.self_attn.q_proj.weight"), "model.layers.3");
  EXPECT_EQ(group_of("blocks.11.attn.qkv.weight"), "blocks.11");
  EXPECT_EQ(group_of("encoder.layer.0.output.dense.weight"), "encoder.layer.0");
}

TEST(MapGroups, OnnxNodeScopes) {
  EXPECT_EQ(group_of("/backbone/conv1/Conv_output_0"), "/backbone/conv1");
  EXPECT_EQ(group_of("/head/fc/MatMul"), "/head/fc");
}

TEST(MapGroups, PaddleOpNames) {
  // ppocrv4_rec.onnx (Paddle2ONNX) names its weights OP_N.w_K: grouped by the op.
  EXPECT_EQ(group_of("linear_85.w_0"), "linear_*");
  EXPECT_EQ(group_of("conv2d_12.w_0"), "conv2d_*");
  EXPECT_EQ(group_of("batch_norm_3.w_1"), "batch_norm_*");
}

TEST(MapGroups, OutsideAnyScope) {
  EXPECT_EQ(group_of("lm_head.weight"), "");
  EXPECT_EQ(group_of("onnx::MatMul_1234"), "");
  EXPECT_EQ(group_of("weight"), "");
  EXPECT_EQ(group_of("conv_.w_0"), "");  // no op number
}

}  // namespace
}  // namespace castscope::gui
