// Projections that vLLM fuses into one weight (q / k / v into qkv_proj, gate / up into
// gate_up_proj, Mixtral's expert w1 / w3): such a group is one matrix at run time, so it needs one
// datatype and, for NVFP4, one global scale. The one table of these names.
#pragma once

#include <string>

namespace castscope {

// The fused weight a tensor belongs to: its name with the member's module replaced by the fused
// module's ("model.layers.0.self_attn.q_proj.weight" ->
// "model.layers.0.self_attn.qkv_proj.weight"); empty for a tensor that vLLM does not fuse with
// others (already fused names included).
std::string fused_group_of(const std::string& tensor_name);

}  // namespace castscope
