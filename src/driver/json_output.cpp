#include "driver/json_output.h"

#include "loom_version.h"  // generated at build time: LOOM_VERSION, LOOM_GIT_DESCRIBE

namespace loom {

std::string loom_version_text() {
  const std::string git = LOOM_GIT_DESCRIBE;
  return std::string(LOOM_VERSION) + (git.empty() ? "" : " (git " + git + ")");
}

Json json_document(const std::string& command, bool ok) {
  Json j;
  j["loom"] = loom_version_text();
  j["command"] = command;
  j["ok"] = ok;
  return j;
}

Json json_error_document(const std::string& command, const std::string& message) {
  Json j = json_document(command, false);
  // A usage error's message ends with the usage text: the document keeps the message.
  const size_t usage = message.find("\nusage: ");
  j["error"] = message.substr(0, usage);
  return j;
}

std::string json_text(const Json& doc) {
  return doc.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

Json device_json(const DeviceInfo& d) {
  return {{"ordinal", d.ordinal},
          {"name", d.name},
          {"arch", d.arch()},
          {"sm_count", d.sm_count},
          {"l2_bytes", d.l2_bytes},
          {"smem_per_block_optin", d.smem_per_block_optin},
          {"global_mem_bytes", d.global_mem_bytes},
          {"dram_bytes_per_s", d.dram_bytes_per_s()},
          {"driver_version", d.driver_version},
          {"runtime_version", d.runtime_version}};
}

Json verify_json(const VerifyResult& v) {
  return {{"passed", v.passed},
          {"rel_fro_error", v.rel_fro_error},
          {"max_abs_error", v.max_abs_error},
          {"nan_count", v.nan_count},
          {"threshold", v.threshold},
          {"message", v.message}};
}

namespace {

// A time or rate that was measured: a positive finite number, else null (JSON has no NaN).
Json measured(double v) { return v > 0 && v < 1e300 ? Json(v) : Json(nullptr); }

Json timing_json(const std::string& name, const Timing& t, double flops) {
  Json j = {{"name", name},
            {"median_us", t.median_us},
            {"min_us", t.min_us},
            {"p10_us", t.p10_us},
            {"p90_us", t.p90_us},
            {"reps", t.reps},
            {"tflops", measured(flops / (t.median_us * 1e6))}};
  j["graph_median_us"] = t.graph_median_us ? measured(*t.graph_median_us) : Json(nullptr);
  return j;
}

Json kernel_json(const KernelReport& k) {
  Json j = {{"name", k.name},
            {"grid", {k.grid[0], k.grid[1], k.grid[2]}},
            {"block_threads", k.block_threads},
            {"smem_bytes", k.smem_bytes},
            {"registers", k.regs},
            {"spill_bytes", k.spill_bytes},
            {"knobs", k.knobs}};
  j["us"] = k.us ? measured(*k.us) : Json(nullptr);
  j["blocks_per_sm"] = k.blocks_per_sm ? Json(*k.blocks_per_sm) : Json(nullptr);
  j["occupancy"] = k.occupancy ? Json(*k.occupancy) : Json(nullptr);
  j["cluster_size"] = k.cluster_size ? Json(*k.cluster_size) : Json(nullptr);
  j["wgmma_serialized"] = k.wgmma_serialized.empty() ? Json(nullptr) : Json(k.wgmma_serialized);
  return j;
}

}  // namespace

Json run_json(const std::string& expression, const RunReport& r) {
  Json j = json_document("run", r.verify.passed && (!r.cublas_verify || r.cublas_verify->passed));
  j["expression"] = expression;
  j["summary"] = r.program.summary;
  j["knob_source"] = r.program.knob_source;
  j["notes"] = r.program.notes;
  j["device"] = device_json(r.device);
  const BenchHeader& h = r.header_fields;
  j["date"] = h.date;
  j["seed"] = h.seed;
  j["l2"] = h.l2;
  j["verify"] = verify_json(r.verify);
  j["lse_verify"] = r.lse_verify ? verify_json(*r.lse_verify) : Json(nullptr);
  j["reference_verify"] = r.cublas_verify ? verify_json(*r.cublas_verify) : Json(nullptr);
  Json kernels = Json::array();
  for (const auto& k : r.kernels) kernels.push_back(kernel_json(k));
  j["kernels"] = kernels;
  if (r.backends.empty()) {
    j["bench"] = nullptr;
    return j;
  }
  Json bench;
  bench["flops"] = r.flops;
  bench["reps"] = h.reps;
  Json backends = Json::array();
  for (const auto& b : r.backends) backends.push_back(timing_json(b.name, b.timing, r.flops));
  bench["backends"] = backends;
  // cuBLAS (the reference) first, Loom last; attention times Loom alone.
  const bool has_reference = r.backends.size() >= 2;
  bench["reference"] = has_reference ? Json(r.backends.front().name) : Json(nullptr);
  bench["reference_gemm_only"] = has_reference && r.cublas_has_epilogue;
  bench["ratio"] = has_reference ? measured(r.backends.front().timing.median_us /
                                            r.backends.back().timing.median_us)
                                 : Json(nullptr);
  j["bench"] = bench;
  return j;
}

Json ladder_json(const Ladder& l, const std::vector<LadderRow>& rows,
                 const std::optional<DeviceInfo>& device, const std::string& date) {
  Json j = json_document("ladder");
  j["ladder"] = l.name;
  j["expression"] = l.expression;
  j["reference"] = l.reference.empty() ? Json(nullptr) : Json(l.reference);
  j["device"] = device ? device_json(*device) : Json(nullptr);
  j["date"] = date;
  Json steps = Json::array();
  for (const auto& r : rows) {
    Json s = {{"name", r.step.name},
              {"knobs", r.step.knobs},
              {"what", r.step.what},
              {"ok", r.ok}};
    if (!r.ok) s["error"] = r.error;
    s["knobs_used"] = r.knobs_used;
    s["us"] = r.ok ? measured(r.us) : Json(nullptr);
    s["tflops"] = r.ok ? measured(r.tflops) : Json(nullptr);
    s["reference_us"] = r.ok ? measured(r.cublas_us) : Json(nullptr);
    s["ratio"] = r.ok && r.cublas_us > 0 ? measured(r.cublas_us / r.us) : Json(nullptr);
    steps.push_back(s);
  }
  j["steps"] = steps;
  return j;
}

}  // namespace loom
