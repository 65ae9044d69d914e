// The quantization layout of a tensor: which of its axes a matrix product sums over, resolved
// once from what the file says (the ONNX graph, a checkpoint's config.json, Keras / TF names,
// GGUF rows) and used by every consumer (inspect, report, map, plan, export, Python, the app).
//
// Every layout is a 2-D view that merges contiguous axes, so no transpose is needed: the view is
// [prod(shape[:s]), prod(shape[s:])] and the reduction runs along one of its two axes, written
// as an AxisSpec ("-1", "1:", ":2", "0"). docs/formats.md ("Quantization axis") has the rules.
#pragma once

#include <string>

#include "castscope/cast.hpp"
#include "castscope/tensor.hpp"

namespace castscope {

struct ResolvedLayout {
  // Short name of the convention: "linear [out, in]", "matmul B [K, N]", "conv [O, I/g, k...]",
  // "conv-transpose [Cin, Cout/g, k...]", "keras conv [k..., Cin, Cout]", "dense [in, out]",
  // "gpt2 conv1d [in, out]", "experts [E, out, in]", "ggml rows", "vector", "embedding",
  // "default" (nothing in the file says: today's rule by rank).
  std::string layout;
  AxisSpec axis;           // the reduction axis as cast options take it (never automatic)
  std::string reason;      // what in the file decided it, e.g. "MatMul '/fc/MatMul' input B"
  bool guessed = true;     // nothing in the file showed the layout: the rule by rank
  bool conflict = false;   // consumers disagree (an ONNX initializer used by two ops)
  bool embedding = false;  // a lookup table (Gather / embedding name): kept by shortcuts
  bool empty() const { return layout.empty(); }
};

// Today's rule by rank, marked guessed: rank 4 / 5 a conv [O, I, k...] (axis 1 flattened),
// others their last axis; rank 0 / 1 "vector" (not guessed: one axis has one answer).
ResolvedLayout default_layout(const Shape& shape);
// A layout from its parts; `axis` is checked against `shape` (throws Error when out of range).
ResolvedLayout make_layout(const std::string& name, const AxisSpec& axis, const Shape& shape,
                           const std::string& reason, bool guessed = false);
// The 2-D view [outputs, reduction] of `shape` under the layout's axis (rank 0 / 1: [1, n]).
Shape layout_view(const Shape& shape, const AxisSpec& axis);
// `o` with an automatic axis replaced by the layout's (an explicit axis, from the command line
// or a plan rule, wins), then resolved for `shape` (resolve_axis). The one place a tensor's
// cast options meet its layout.
CastOptions options_for(const CastOptions& o, const Shape& shape, const ResolvedLayout& layout);
// "matmul B [K, N]: axis 0 (K = 120), view [6625, 120]; MatMul 'x' input B" for display.
std::string describe_layout(const ResolvedLayout& layout, const Shape& shape);

}  // namespace castscope
