// vLLM's fused linear layers, by the module names of the checkpoints it loads: the
// packed_modules_mapping of its Llama / Mistral / Qwen / Gemma (QKVParallelLinear,
// MergedColumnParallelLinear) and Mixtral's experts (w1 and w3 merged, w2 alone).
#include <array>
#include <utility>

#include "castscope/fused.hpp"

namespace castscope {

std::string fused_group_of(const std::string& name) {
  static const std::array<std::pair<const char*, const char*>, 7> members = {{
      {"q_proj", "qkv_proj"},
      {"k_proj", "qkv_proj"},
      {"v_proj", "qkv_proj"},
      {"gate_proj", "gate_up_proj"},
      {"up_proj", "gate_up_proj"},
      {"w1", "w13"},
      {"w3", "w13"},
  }};
  std::string module = name;
  std::string suffix;
  const size_t dot = name.rfind('.');
  if (dot != std::string::npos && name.compare(dot, std::string::npos, ".weight") == 0) {
    module = name.substr(0, dot);
    suffix = ".weight";
  }
  const size_t start = module.rfind('.') == std::string::npos ? 0 : module.rfind('.') + 1;
  const std::string leaf = module.substr(start);
  for (const auto& [member, fused] : members) {
    if (leaf != member) continue;
    // Mixtral's w1 / w3 are fused only inside an expert (".experts.N.w1").
    if (leaf[0] == 'w' && module.find(".experts.") == std::string::npos) return {};
    return module.substr(0, start) + fused + suffix;
  }
  return {};
}

}  // namespace castscope
