#include "castscope/widgets/composer.hpp"

#include <imgui.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace castscope::widgets {

namespace {

const char* const kScale[] = {"e8m0",    "e4m3fn",   "e5m2", "float32",
                              "float16", "bfloat16", "e5m3", "e5m0"};
const char* const kElement[] = {"number format", "codebook"};
const char* const kSecond[] = {"(none)", "float32", "float16", "bfloat16", "int8", "e8m0"};
const char* const kKinds[] = {"float", "int", "uint"};
const char* const kInfNan[] = {"ieee (Inf and NaN)", "fn (NaN only)", "fnuz (NaN at -0)",
                               "finite (no Inf/NaN)"};
const char* const kScaling[] = {"none", "tensor", "channel", "1-D tile", "2-D tile"};
const char* const kRound[] = {"even", "away", "zero", "stochastic"};
const char* const kScaleMode[] = {"floor", "ceil", "midmax", "option3", "topbinade"};
const char* const kOverflow[] = {"saturate", "ieee"};

int index_of(const char* const* list, int n, const std::string& v) {
  for (int i = 0; i < n; ++i)
    if (v == list[i]) return i;
  return -1;
}

void help(const char* text) {
  ImGui::SameLine();
  ImGui::TextDisabled("(?)");
  if (ImGui::IsItemHovered()) {
    ImGui::BeginTooltip();
    ImGui::PushTextWrapPos(ImGui::GetFontSize() * 30.0f);
    ImGui::TextUnformatted(text);
    ImGui::PopTextWrapPos();
    ImGui::EndTooltip();
  }
}

void section(const char* label) {
  ImGui::Spacing();
  ImGui::TextDisabled("%s", label);
  ImGui::Separator();
}

}  // namespace

const char* const* scale_formats(int* count) {
  *count = IM_ARRAYSIZE(kScale);
  return kScale;
}
const char* const* second_formats(int* count) {
  *count = IM_ARRAYSIZE(kSecond);
  return kSecond;
}

void ComposerState::set(const DataType& d) {
  dtype = d;
  error.clear();
  std::snprintf(text, sizeof text, "%s", (d.name().empty() ? d.str() : d.name()).c_str());
  codebook = d.codebook() != nullptr;
  if (codebook) {
    const Codebook& cb = *d.codebook();
    cb_implicit = cb.implicit;
    cb_index = cb.index_bits;
    cb_meta = cb.meta_bits;
    std::snprintf(cb_clauses, sizeof cb_clauses, "%s", cb.clauses.c_str());
    std::snprintf(cb_compute, sizeof cb_compute, "%s", cb.compute.name().c_str());
    std::snprintf(cb_label, sizeof cb_label, "%s", cb.label.c_str());
    const ScaleSpec& sc = *d.scale();
    scale_fmt = std::max(0, index_of(kScale, IM_ARRAYSIZE(kScale), sc.scale.name()));
    scaling = 3;
    tile = sc.tiles[0].size;
    sub = sc.tiles[0].sub;
    second_fmt = sp_n = sp_m = 0;
    return;
  }
  if (!family_traits(d.family()).field_form) return;
  const NumberSpec& n = d.number();
  if (n.is_float()) {
    kind = 0;
    ebits = n.ebits();
    mbits = n.mbits();
    bias = n.bias();
    custom_bias = bias != (1 << (ebits - 1)) - 1;
    infnan = static_cast<int>(n.infnan());
  } else if (n.is_int() || n.is_uint()) {
    kind = n.is_int() ? 1 : 2;
    ibits = n.bits();
  }
  if (!d.scaled()) {
    scaling = 0;
    return;
  }
  const ScaleSpec& s = *d.scale();
  int i = index_of(kScale, IM_ARRAYSIZE(kScale), s.scale.name());
  scale_fmt = std::max(0, i);
  second_fmt =
      s.second ? std::max(0, index_of(kSecond, IM_ARRAYSIZE(kSecond), s.second->name())) : 0;
  sub = sp_n = sp_m = 0;
  if (s.tiles.empty()) {
    scaling = 1;
  } else if (s.tiles.size() == 1 && s.tiles[0].channel()) {
    scaling = 2;
  } else {
    scaling = s.tiles.size() == 1 ? 3 : 4;
    tile = s.tiles[0].size;
    if (s.tiles.size() > 1) tile2 = s.tiles[1].size;
    const TileSpec& last = s.tiles.back();
    sub = last.sub;
    offset = last.sub ? last.offset : 1;
    sp_n = last.n;
    sp_m = last.m;
  }
}

bool ComposerState::set_text(const std::string& str) {
  try {
    set(DataType::parse(str));
    std::snprintf(text, sizeof text, "%s", str.c_str());
    return true;
  } catch (const Error& e) {
    error = e.what();
    return false;
  }
}

std::string ComposerState::fields_string() const {
  std::string s;
  if (codebook) {
    s = std::string(cb_implicit ? "icb" : "cb") + std::to_string(cb_index) +
        std::to_string(cb_meta) + (cb_implicit ? cb_clauses : "") + "_" + cb_compute;
    if (cb_label[0]) s += std::string("_") + cb_label;
    s += std::string("_") + kScale[scale_fmt] + "_t" + std::to_string(tile);
    if (sub > 0) s += "s" + std::to_string(sub);
    return s;
  }
  if (kind == 0) {
    const int b = custom_bias ? bias : (1 << (ebits - 1)) - 1;
    s = NumberSpec::make_float(ebits, mbits, b, static_cast<InfNan>(infnan)).name();
  } else {
    s = std::string(kind == 1 ? "int" : "uint") + std::to_string(ibits);
  }
  if (scaling == 0) return s;
  s += std::string("_") + kScale[scale_fmt];
  if (second_fmt > 0) s += std::string("_") + kSecond[second_fmt];
  auto seg = [&](int size, bool last) {
    std::string t = "_t" + std::to_string(size);
    if (last && sub > 0) t += "s" + std::to_string(sub) + "o" + std::to_string(offset);
    if (last && sp_m > 0) t += "n" + std::to_string(sp_n) + "m" + std::to_string(sp_m);
    return t;
  };
  if (scaling == 2) s += seg(0, true);
  if (scaling == 3) s += seg(tile, true);
  if (scaling == 4) s += seg(tile, false) + seg(tile2, true);
  return s;
}

const RegistryEntry* registry_items(const std::string& current, bool describe) {
  const RegistryEntry* picked = nullptr;
  std::string group;
  for (const RegistryEntry& e : registry()) {
    if (e.group != group) {
      group = e.group;
      ImGui::TextDisabled("%s", group.c_str());
    }
    char label[200];
    std::snprintf(label, sizeof label, "  %-14s %s", e.name.c_str(), e.spec.c_str());
    if (ImGui::Selectable(label, current == e.name)) picked = &e;
    if (describe && ImGui::IsItemHovered()) ImGui::SetTooltip("%s", e.description.c_str());
  }
  return picked;
}

bool draw_composer(ComposerState& s) {
  bool changed = false;
  bool fields = false;
  ImGui::BeginDisabled(s.disabled);

  // Presets from the registry, grouped as the registry lists them.
  ImGui::SetNextItemWidth(-FLT_MIN);
  if (ImGui::BeginCombo("##preset", "Presets (registry)...")) {
    if (const RegistryEntry* e = registry_items(s.dtype.name(), true)) {
      s.set(DataType::parse(e->name));
      changed = true;
    }
    ImGui::EndCombo();
  }

  // Room for the label and the "(?)" after it, at any font size.
  const ImGuiStyle& st = ImGui::GetStyle();
  ImGui::SetNextItemWidth(-(ImGui::CalcTextSize("string").x + ImGui::CalcTextSize("(?)").x +
                            st.ItemInnerSpacing.x + st.ItemSpacing.x + 1));
  if (ImGui::InputText("string", s.text, sizeof s.text, ImGuiInputTextFlags_EnterReturnsTrue) ||
      (ImGui::IsItemDeactivatedAfterEdit())) {
    changed |= s.set_text(s.text);
  }
  help(
      "Type a registry name (mxfp4e2, nvfp4, ...) or NSPEC[_SSPEC], e.g. e4m3fn_e8m0_t32 or "
      "int4_float16_t0; press Enter to apply.");

  int element = s.codebook ? 1 : 0;
  const FamilyTraits& fam = family_traits(s.dtype.family());
  if (!fam.field_form) {
    ImGui::TextWrapped("%s is a %s datatype: it has its own kernels and no field form.",
                       s.dtype.label().c_str(), fam.kind);
  } else if (ImGui::Combo("element", &element, kElement, IM_ARRAYSIZE(kElement))) {
    s.codebook = element == 1;
    if (s.codebook) s.scaling = 3, s.second_fmt = s.sp_n = s.sp_m = 0;
    fields = true;
  }
  if (!fam.field_form) {
  } else if (s.codebook) {
    section("Codebook");
    fields |= ImGui::Checkbox("implicit (pattern clauses)", &s.cb_implicit);
    help(
        "Implicit codebooks generate their mappings from clauses: f (fp pattern), i (int "
        "pattern), p / s (progressive / static steps), digits for offsets, e for binades lower "
        "(docs/formats.md). Generic codebooks take their tables from a JSON file loaded with "
        "--codebook.");
    fields |= ImGui::SliderInt("index bits", &s.cb_index, 2, 8);
    fields |= ImGui::SliderInt("meta bits", &s.cb_meta, 1, 8);
    if (s.cb_implicit) fields |= ImGui::InputText("clauses", s.cb_clauses, sizeof s.cb_clauses);
    fields |= ImGui::InputText("compute format", s.cb_compute, sizeof s.cb_compute);
    fields |= ImGui::InputText("label", s.cb_label, sizeof s.cb_label);
    section("Scaling");
    fields |= ImGui::Combo("scale format", &s.scale_fmt, kScale, IM_ARRAYSIZE(kScale));
    fields |= ImGui::InputInt("tile size", &s.tile, 8, 32);
    fields |= ImGui::InputInt("subtile", &s.sub, 1, 2);
    help("Elements that choose a mapping together (0: the whole tile).");
  } else {
    section("Number format");
    fields |= ImGui::Combo("kind", &s.kind, kKinds, IM_ARRAYSIZE(kKinds));
    if (s.kind == 0) {
      fields |= ImGui::SliderInt("exponent bits", &s.ebits, 1, 8);
      fields |= ImGui::SliderInt("mantissa bits", &s.mbits, 0, 23);
      fields |= ImGui::Checkbox("custom bias", &s.custom_bias);
      if (s.custom_bias) {
        ImGui::SameLine();
        ImGui::SetNextItemWidth(ImGui::GetFontSize() * 5);
        fields |= ImGui::InputInt("##bias", &s.bias);
      }
      fields |= ImGui::Combo("inf/NaN", &s.infnan, kInfNan, IM_ARRAYSIZE(kInfNan));
    } else {
      fields |= ImGui::SliderInt("bits", &s.ibits, 2, 16);
    }
    section("Scaling");
    fields |= ImGui::Combo("scaling", &s.scaling, kScaling, IM_ARRAYSIZE(kScaling));
    if (s.scaling > 0) {
      fields |= ImGui::Combo("scale format", &s.scale_fmt, kScale, IM_ARRAYSIZE(kScale));
      fields |= ImGui::Combo(s.kind == 2 ? "zero point" : "tensor scale", &s.second_fmt, kSecond,
                             IM_ARRAYSIZE(kSecond));
    }
    if (s.scaling >= 3) {
      fields |= ImGui::InputInt(s.scaling == 4 ? "tile rows" : "tile size", &s.tile, 8, 32);
      if (s.scaling == 4) fields |= ImGui::InputInt("tile cols", &s.tile2, 8, 32);
      fields |= ImGui::InputInt("subtile", &s.sub, 1, 2);
      help("Subtile size (0: none); each subtile has an exponent offset below the tile's scale.");
      if (s.sub > 0) {
        fields |= ImGui::SliderInt("offset bits", &s.offset, 1, 2);
        help("Bits of each subtile's exponent offset: o1 (MX9 / MX6 / MX4) or o2.");
      }
    }
    if (s.scaling >= 2) {
      ImGui::PushItemWidth(ImGui::GetFontSize() * 4);
      fields |= ImGui::InputInt("N", &s.sp_n, 0, 0);
      ImGui::SameLine();
      fields |= ImGui::InputInt("M sparsity", &s.sp_m, 0, 0);
      ImGui::PopItemWidth();
      help("N:M sparsity keeps the N largest of every M values (0:0 = dense).");
    }
  }

  if (fields) {
    s.tile = std::clamp(s.tile, 0, 1 << 16);
    s.tile2 = std::clamp(s.tile2, 0, 1 << 16);
    s.sub = std::max(0, s.sub);
    s.sp_n = std::max(0, s.sp_n);
    s.sp_m = std::max(0, s.sp_m);
    try {
      const std::string str = s.fields_string();
      DataType d = DataType::parse(str);
      s.dtype = d;
      s.error.clear();
      std::snprintf(s.text, sizeof s.text, "%s", d.str().c_str());
      changed = true;
    } catch (const Error& e) {
      s.error = e.what();
    }
  }

  section("Cast options");
  int r = static_cast<int>(s.round), m = static_cast<int>(s.scale_mode),
      o = static_cast<int>(s.overflow);
  if (ImGui::Combo("round", &r, kRound, IM_ARRAYSIZE(kRound))) changed = true;
  if (ImGui::Combo("scale mode", &m, kScaleMode, IM_ARRAYSIZE(kScaleMode))) changed = true;
  if (ImGui::Combo("overflow", &o, kOverflow, IM_ARRAYSIZE(kOverflow))) changed = true;
  s.round = static_cast<Round>(r);
  s.scale_mode = static_cast<ScaleMode>(m);
  s.overflow = static_cast<Overflow>(o);
  if (ImGui::Checkbox("auto axis", &s.axis.automatic)) changed = true;
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip(
        "The quantization axis of each tensor as its model reduces, resolved from the file "
        "(the tensor list's layout column): K of an ONNX MatMul weight [K, N], the in-features "
        "of a linear weight [out, in], I*kh*kw of a conv weight [O, I, kh, kw], kh*kw*Cin of a "
        "Keras kernel [kh, kw, Cin, Cout].");
  if (!s.axis.automatic) {
    if (ImGui::InputInt("tile axis", &s.axis.axis)) changed = true;
    if (ImGui::IsItemHovered())
      ImGui::SetTooltip(
          "The axis tiles run along (negative counts from the end); a 2-D tile covers this "
          "axis and the one before it.");
    bool later = s.axis.flatten && !s.axis.lead;
    if (ImGui::Checkbox("flatten later axes", &later)) {
      s.axis.flatten = later;
      s.axis.lead = false;
      changed = true;
    }
    if (ImGui::IsItemHovered())
      ImGui::SetTooltip(
          "This axis and every later one act as one (1 on a conv weight [O, I, kh, kw] casts "
          "the view [O, I*kh*kw]).");
    if (ImGui::Checkbox("flatten earlier axes", &s.axis.lead)) {
      s.axis.flatten = s.axis.lead;
      changed = true;
    }
    if (ImGui::IsItemHovered())
      ImGui::SetTooltip(
          "Axes 0 to this one act as one reduction, the rest as the outputs (2 on a Keras kernel "
          "[kh, kw, Cin, Cout] casts the view [kh*kw*Cin, Cout] down its columns).");
  }
  ImGui::EndDisabled();

  ImGui::Separator();
  ImGui::Text("datatype");
  ImGui::SameLine();
  // The canonical string and its registry name wrap together at the panel's edge (a long
  // string and its name do not fit one line of a narrow panel).
  ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(0.45f, 0.75f, 1.0f, 1.0f));
  if (s.dtype.name().empty())
    ImGui::TextWrapped("%s", s.dtype.str().c_str());
  else
    ImGui::TextWrapped("%s (%s)", s.dtype.str().c_str(), s.dtype.name().c_str());
  ImGui::PopStyleColor();
  ImGui::Text("nominal bits per value: %.4g", s.dtype.bits_per_value());
  if (!s.tensor_bits.empty()) ImGui::TextWrapped("%s", s.tensor_bits.c_str());
  if (!s.tensor_bits_note.empty()) ImGui::TextDisabled("%s", s.tensor_bits_note.c_str());
  if (s.dtype.scaled() && !s.dtype.scale()->tiles.empty() && s.dtype.scale()->tiles[0].channel())
    help(
        "A channel scale adds (scale bits) / (channel length); the views show the exact figure "
        "for the loaded tensor.");
  ImGui::TextWrapped("%s", s.dtype.describe().c_str());
  if (!s.error.empty()) {
    ImGui::PushStyleColor(ImGuiCol_Text, ImVec4(1.0f, 0.42f, 0.36f, 1.0f));
    ImGui::TextWrapped("invalid: %s", s.error.c_str());
    ImGui::PopStyleColor();
  }
  return changed;
}

}  // namespace castscope::widgets
