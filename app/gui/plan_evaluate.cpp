// The plan panel's "Evaluate": the plan run end to end in the model's own runtime (onnxruntime,
// PyTorch + transformers, llama.cpp) through the castscope Python package, as a background job
// with progress and cancel, its KL divergence, top-1 agreement and SNR shown beside the plan's
// size. The runtimes are Python libraries, so the job runs `python3 -m castscope.eval` (as
// castscope-cli eval does) and reads its progress lines and JSON result.
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "castscope/metrics_json.hpp"
#include "panels.hpp"
#include "python_job.hpp"

namespace castscope::gui {
namespace {

struct EvalOutput {
  std::string name, distribution;
  double snr_db = 0, kl = NAN, top1 = NAN;
};

struct EvalSummary {
  std::string runtime, device, inputs, plan_text;
  bool synthetic = false;
  double bpw = NAN, bpw_cast = NAN, ppl_ref = NAN, ppl_q = NAN, seconds = 0;
  int tensors_cast = 0;
  std::vector<EvalOutput> outputs;
  std::vector<std::string> notes;
};

struct EvalState {
  Job<EvalSummary> job;
  std::shared_ptr<const EvalSummary> result;
  std::string error;
  char inputs[512] = "";
  char act_dtype[64] = "";
};

EvalState& state() {
  static EvalState s;
  return s;
}

double num(const nlohmann::json& j, const char* key) {
  if (!j.contains(key) || !j[key].is_number()) return NAN;
  return j[key].get<double>();
}

EvalSummary parse_result(const std::string& text) {
  const nlohmann::json j = nlohmann::json::parse(text);
  EvalSummary s;
  s.runtime = j.value("runtime", "");
  s.device = j.value("device", "");
  s.inputs = j["inputs"].value("description", "");
  s.synthetic = j["inputs"].value("synthetic", false);
  s.bpw = num(j["size"], "bits_per_weight");
  s.bpw_cast = num(j["size"], "bits_per_weight_cast");
  s.tensors_cast = j["size"].value("tensors_cast", 0);
  if (j.contains("perplexity") && j["perplexity"].is_object()) {
    s.ppl_ref = num(j["perplexity"], "original");
    s.ppl_q = num(j["perplexity"], "quantized");
  }
  s.seconds = num(j, "seconds");
  for (const auto& o : j["outputs"]) {
    EvalOutput e;
    e.name = o.value("name", "");
    e.distribution = o["distribution"].is_string() ? o["distribution"].get<std::string>() : "";
    e.snr_db = metrics_json::snr_from(o, "snr_db");
    e.kl = num(o, "kl");
    e.top1 = num(o, "top1");
    s.outputs.push_back(e);
  }
  for (const auto& n : j["notes"]) s.notes.push_back(n.get<std::string>());
  return s;
}

// The evaluation child's JSON result; the plan file it read is removed whatever happens.
std::shared_ptr<const EvalSummary> run_eval(JobControl& ctl, std::vector<std::string> args,
                                            const std::string& plan_file) {
  struct Cleanup {
    std::string path;
    ~Cleanup() {
      std::error_code ec;
      std::filesystem::remove(path, ec);
    }
  } cleanup{plan_file};
  const std::string stdout_text = run_python_job(ctl, std::move(args), "evaluation");
  try {
    return std::make_shared<const EvalSummary>(parse_result(stdout_text));
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("the evaluation's result is not the JSON expected: ") + e.what());
  }
}

void start_evaluate(AppState& app) {
  EvalState& s = state();
  const std::string plan_file = (std::filesystem::temp_directory_path() /
                                 ("castscope-eval-plan-" + std::to_string(getpid()) + ".json"))
                                    .string();
  try {
    save_plan(plan_file, app.plan);
  } catch (const Error& e) {
    s.error = e.what();
    return;
  }
  std::vector<std::string> args = {python_interpreter(),
                                   "-m",
                                   "castscope.eval",
                                   app.model->path(),
                                   "--plan",
                                   plan_file,
                                   "--json",
                                   "--progress"};
  if (s.inputs[0]) args.insert(args.end(), {"--inputs", s.inputs});
  if (s.act_dtype[0]) args.insert(args.end(), {"--act-dtype", s.act_dtype});
  s.error.clear();
  s.job.start("evaluate",
              [args, plan_file](JobControl& ctl) { return run_eval(ctl, args, plan_file); });
}

}  // namespace

bool plan_evaluate_running() {
  return state().job.running();
}

std::string plan_evaluate_state_json() {
  const EvalState& s = state();
  auto finite = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); };
  nlohmann::json j = {{"running", s.job.running()}, {"error", s.error}};
  if (const EvalSummary* r = s.result.get()) {
    nlohmann::json outs = nlohmann::json::array();
    for (const EvalOutput& o : r->outputs)
      outs.push_back({{"name", o.name},
                      {"distribution", o.distribution},
                      {"snr_db", finite(o.snr_db)},
                      {"kl", finite(o.kl)},
                      {"top1", finite(o.top1)}});
    j["result"] = {{"runtime", r->runtime},
                   {"device", r->device},
                   {"synthetic", r->synthetic},
                   {"bits_per_weight", finite(r->bpw)},
                   {"bits_per_weight_cast", finite(r->bpw_cast)},
                   {"tensors_cast", r->tensors_cast},
                   {"outputs", outs}};
  }
  return j.dump();
}

void draw_plan_evaluate(AppState& app) {
  EvalState& s = state();
  std::shared_ptr<const EvalSummary> got;
  std::string err;
  bool cancelled = false;
  if (s.job.poll(&got, &err, &cancelled)) {
    s.error = cancelled ? "evaluation cancelled" : err;
    if (got) s.result = got;  // a failed or cancelled run keeps the last result on screen
  }
  ImGui::BeginDisabled(s.job.running());
  if (ImGui::Button("Evaluate")) start_evaluate(app);
  ImGui::EndDisabled();
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip(
        "Run the original and the plan-quantized model in the model's own runtime "
        "(onnxruntime, PyTorch + transformers, llama.cpp) and compare their outputs");
  ImGui::SameLine();
  hint_field("##evalinputs", "inputs (.npy / .npz / text)", s.inputs, 12);
  ImGui::SameLine();
  hint_field("##evalact", "activations", s.act_dtype, 7);
  job_line(s.job);
  if (!s.error.empty()) ImGui::TextColored(ImVec4(1, 0.45f, 0.35f, 1), "%s", s.error.c_str());
  const EvalSummary* r = s.result.get();
  if (!r) return;
  ImGui::Text("end to end: %.3f bits per weight (%.3f over the %d cast tensors)", r->bpw,
              r->bpw_cast, r->tensors_cast);
  for (const EvalOutput& o : r->outputs) {
    if (o.distribution.empty())
      ImGui::Text("  %s: SNR %.2f dB", o.name.c_str(), o.snr_db);
    else
      ImGui::Text("  %s: KL %.4g, top-1 %.2f%%, SNR %.2f dB", o.name.c_str(), o.kl, 100 * o.top1,
                  o.snr_db);
  }
  if (!std::isnan(r->ppl_ref)) ImGui::Text("  perplexity %.4f -> %.4f", r->ppl_ref, r->ppl_q);
  ImGui::TextDisabled("%s on %s; inputs %s%s", r->runtime.c_str(), r->device.c_str(),
                      r->synthetic ? "SYNTHETIC: " : "", r->inputs.c_str());
  for (const std::string& n : r->notes) ImGui::TextDisabled("%s", n.c_str());
}

}  // namespace castscope::gui
