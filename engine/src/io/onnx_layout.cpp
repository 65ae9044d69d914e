// Quantization layouts of ONNX initializers, from the nodes that consume them: MatMul's B
// [K, N] sums over K, Gemm's operands follow transA / transB, Conv's W [O, I/g, k...] over
// I/g*k..., ConvTranspose's W [Cin, Cout/g, k...] over Cin. Weights reached through Transpose
// (its perm carries the answer back), Cast, Identity or DequantizeLinear are followed; an
// initializer whose consumers disagree is flagged.
#include <map>

#include "io/reader.hpp"
#include "onnx/onnx_pb.h"

namespace castscope::io::detail {
namespace {

struct Use {
  const onnx::NodeProto* node;
  int input;
};

using Uses = std::map<std::string, std::vector<Use>>;

int64_t int_attr(const onnx::NodeProto& n, const char* name, int64_t dflt) {
  for (const onnx::AttributeProto& a : n.attribute())
    if (a.name() == name) return a.i();
  return dflt;
}

std::string node_name(const onnx::NodeProto& n) {
  return n.op_type() + " '" + (n.name().empty() ? n.output_size() ? n.output(0) : "" : n.name()) +
         "'";
}

// An answer on the tensor as its consumer sees it: reduction axes [first, last] (one axis, or a
// run of axes merged), the layout name and why.
struct Answer {
  int first = 0, last = 0;
  std::string layout, reason;
  bool embedding = false;
};

// The answer of one terminal consumer for a tensor of rank `rank` at input `input`; empty
// layout when the op says nothing about a reduction.
Answer terminal(const onnx::NodeProto& n, int input, int rank) {
  Answer a;
  const std::string& op = n.op_type();
  const std::string who = node_name(n);
  if (rank < 2) return a;
  if (op == "MatMul" || op == "MatMulInteger" || op == "FusedMatMul") {
    if (input == 1) {
      a = {rank - 2, rank - 2, "matmul B [K, N]", who + " input B: sums over K"};
    } else if (input == 0) {
      a = {rank - 1, rank - 1, "matmul A [M, K]", who + " input A: sums over K"};
    }
  } else if (op == "Gemm") {
    const bool ta = int_attr(n, "transA", 0) != 0, tb = int_attr(n, "transB", 0) != 0;
    if (input == 1)
      a = tb ? Answer{1, 1, "gemm B^T [N, K]", who + " input B, transB = 1: sums over K"}
             : Answer{0, 0, "gemm B [K, N]", who + " input B, transB = 0: sums over K"};
    else if (input == 0)
      a = ta ? Answer{0, 0, "gemm A^T [K, M]", who + " input A, transA = 1: sums over K"}
             : Answer{1, 1, "gemm A [M, K]", who + " input A, transA = 0: sums over K"};
  } else if ((op == "Conv" || op == "ConvInteger") && input == 1 && rank >= 3) {
    const int64_t g = int_attr(n, "group", 1);
    const std::string kind = rank == 3 ? "conv1d" : rank == 5 ? "conv3d" : "conv";
    a = {1, rank - 1, (g > 1 ? "grouped " + kind : kind) + " [O, I/g, k...]",
         who + (g > 1 ? " (group " + std::to_string(g) + ")" : std::string()) +
             " input W: each output sums over I/g*k..."};
  } else if (op == "ConvTranspose" && input == 1 && rank >= 3) {
    a = {0, 0, "conv-transpose [Cin, Cout/g, k...]", who + " input W: sums over Cin"};
  } else if ((op == "LSTM" || op == "GRU" || op == "RNN") && (input == 1 || input == 2)) {
    a = {rank - 1, rank - 1, "rnn [D, gates*H, in]", who + " weights: sum over the last axis"};
  } else if (op == "Gather" && input == 0) {
    a = {rank - 1, rank - 1, "embedding [rows, dim]", who + " input data: rows looked up"};
    a.embedding = true;
  }
  return a;
}

// Follows value `v` (seen with rank `rank`; `perm[j]` the stored axis behind seen axis j)
// through pass-through ops to its terminal consumers.
void walk(const Uses& uses, const std::string& v, const std::vector<int>& perm,
          const std::string& via, std::vector<std::pair<Answer, std::vector<int>>>& out,
          int depth) {
  auto it = uses.find(v);
  if (it == uses.end() || depth > 8) return;
  const int rank = static_cast<int>(perm.size());
  for (const Use& u : it->second) {
    const onnx::NodeProto& n = *u.node;
    const std::string& op = n.op_type();
    if (n.output_size() > 0 && u.input == 0 &&
        (op == "Cast" || op == "Identity" || op == "DequantizeLinear" || op == "CastLike")) {
      walk(uses, n.output(0), perm, via + op + " -> ", out, depth + 1);
      continue;
    }
    if (op == "Transpose" && n.output_size() > 0 && u.input == 0) {
      std::vector<int> p(static_cast<size_t>(rank));
      bool have = false;
      for (const onnx::AttributeProto& a : n.attribute())
        if (a.name() == "perm" && a.ints_size() == rank) {
          for (int j = 0; j < rank; ++j) p[static_cast<size_t>(j)] = static_cast<int>(a.ints(j));
          have = true;
        }
      if (!have)  // no perm: the axes reversed
        for (int j = 0; j < rank; ++j) p[static_cast<size_t>(j)] = rank - 1 - j;
      std::vector<int> np(static_cast<size_t>(rank));
      bool ok = true;
      for (int j = 0; j < rank; ++j) {
        if (p[static_cast<size_t>(j)] < 0 || p[static_cast<size_t>(j)] >= rank) ok = false;
        np[static_cast<size_t>(j)] = ok ? perm[static_cast<size_t>(p[static_cast<size_t>(j)])] : 0;
      }
      if (ok) walk(uses, n.output(0), np, via + "Transpose -> ", out, depth + 1);
      continue;
    }
    Answer a = terminal(n, u.input, rank);
    if (a.layout.empty()) continue;
    if (!via.empty()) a.reason = "through " + via + a.reason;
    out.emplace_back(a, perm);
  }
}

// The answer restated on the stored tensor: the seen axes [first, last] must map to stored
// axes that run in order, at the start (lead) or to the end (flatten), or be one axis.
bool to_stored(const Answer& a, const std::vector<int>& perm, AxisSpec& spec) {
  const int rank = static_cast<int>(perm.size());
  std::vector<int> axes;
  for (int j = a.first; j <= a.last; ++j) axes.push_back(perm[static_cast<size_t>(j)]);
  for (size_t i = 1; i < axes.size(); ++i)
    if (axes[i] != axes[i - 1] + 1) return false;
  if (axes.size() == 1) {
    // Axis 0 of a weight of rank 3 or more (ConvTranspose's Cin): the view [d0, the rest].
    if (axes[0] == 0 && rank > 2)
      spec = {false, 0, true, true};
    else
      spec = {false, axes[0] == rank - 1 ? -1 : axes[0], false, false};
    return true;
  }
  if (axes.back() == rank - 1) {
    spec = {false, axes.front(), true, false};
    return true;
  }
  if (axes.front() == 0) {
    spec = {false, axes.back(), true, true};
    return true;
  }
  return false;
}

}  // namespace

void resolve_onnx_layouts(const onnx::GraphProto& g, std::vector<Entry>& entries) {
  Uses uses;
  for (const onnx::NodeProto& n : g.node())
    for (int i = 0; i < n.input_size(); ++i)
      if (!n.input(i).empty()) uses[n.input(i)].push_back({&n, i});
  for (Entry& e : entries) {
    const Shape& s = e.info.shape;
    if (s.size() < 2) continue;  // the rule by rank: one axis has one answer
    const int rank = static_cast<int>(s.size());
    std::vector<int> id(static_cast<size_t>(rank));
    for (int j = 0; j < rank; ++j) id[static_cast<size_t>(j)] = j;
    std::vector<std::pair<Answer, std::vector<int>>> found;
    walk(uses, e.info.name, id, "", found, 0);
    std::vector<ResolvedLayout> got;
    for (const auto& [a, perm] : found) {
      AxisSpec spec;
      if (!to_stored(a, perm, spec)) continue;
      try {
        std::string name = a.layout;
        if (name.rfind("grouped conv", 0) == 0 && s[1] == 1)  // I/g = 1: one input per output
          name = "depthwise " + name.substr(8);
        ResolvedLayout l = make_layout(name, spec, s, a.reason);
        l.embedding = a.embedding;
        got.push_back(l);
      } catch (const Error&) {
      }
    }
    if (got.empty()) continue;
    ResolvedLayout l = got.front();
    for (size_t i = 1; i < got.size(); ++i)
      if (got[i].axis != l.axis) {
        l.conflict = true;
        l.reason += "; but " + got[i].reason + " (axis " + got[i].axis.str() + ")";
      }
    e.info.layout = l;
  }
}

}  // namespace castscope::io::detail
