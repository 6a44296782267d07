#include "tune/worker_protocol.h"

#include <cstdio>
#include <cstdlib>

#include "ir/error.h"
#include "tune/trial_timing.h"

namespace loom::tune {
namespace {

int64_t parse_int(const std::string& key, const std::string& v) {
  char* end = nullptr;
  long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0')
    throw Error("tune worker protocol: field " + key + " is not an integer: '" + v + "'");
  return x;
}

double parse_double(const std::string& key, const std::string& v) {
  char* end = nullptr;
  double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0')
    throw Error("tune worker protocol: field " + key + " is not a number: '" + v + "'");
  return x;
}

// Doubles travel in hex-float form: exact, and immune to the locale.
std::string exact(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", x);
  return buf;
}

const std::string& required(const Message& m, const std::string& key) {
  for (const auto& [k, v] : m)
    if (k == key) return v;
  throw Error("tune worker protocol: message has no field '" + key + "'");
}

constexpr const char* kSizePrefix = "size.";

}  // namespace

const char* trial_status_name(TrialStatus s) {
  switch (s) {
    case TrialStatus::ok: return "ok";
    case TrialStatus::compile_error: return "compile_error";
    case TrialStatus::wrong_answer: return "wrong_answer";
    case TrialStatus::fault: return "fault";
    case TrialStatus::timeout: return "timeout";
    case TrialStatus::worker_error: return "worker_error";
  }
  return "?";
}

TrialStatus parse_trial_status(const std::string& name) {
  for (TrialStatus s : {TrialStatus::ok, TrialStatus::compile_error, TrialStatus::wrong_answer,
                        TrialStatus::fault, TrialStatus::timeout, TrialStatus::worker_error})
    if (name == trial_status_name(s)) return s;
  throw Error("tune worker protocol: unknown trial status '" + name + "'");
}

std::string encode_message(const Message& m) {
  std::string out;
  for (const auto& [k, v] : m) {
    LOOM_CHECK(!k.empty() && k.find_first_of(" \n") == std::string::npos,
               "protocol keys are single words");
    out += k + " " + std::to_string(v.size()) + "\n" + v + "\n";
  }
  return out + "end\n";
}

std::optional<std::string> field(const Message& m, const std::string& key) {
  for (const auto& [k, v] : m)
    if (k == key) return v;
  return std::nullopt;
}

void MessageDecoder::feed(const char* data, size_t n) { buffer_.append(data, n); }

std::optional<Message> MessageDecoder::next() {
  Message m;
  size_t pos = 0;
  while (true) {
    size_t eol = buffer_.find('\n', pos);
    if (eol == std::string::npos) {
      if (buffer_.size() - pos > 256)
        throw Error(
            "tune worker protocol: header line longer than 256 bytes (the peer is "
            "not a Loom tune worker?)");
      return std::nullopt;
    }
    std::string line = buffer_.substr(pos, eol - pos);
    if (line == "end") {
      buffer_.erase(0, eol + 1);
      return m;
    }
    size_t sp = line.find(' ');
    if (sp == std::string::npos || sp == 0)
      throw Error("tune worker protocol: malformed field header '" + line + "'");
    int64_t len = parse_int("length", line.substr(sp + 1));
    if (len < 0) throw Error("tune worker protocol: negative field length in '" + line + "'");
    size_t value_at = eol + 1;
    if (buffer_.size() < value_at + size_t(len) + 1) return std::nullopt;
    if (buffer_[value_at + size_t(len)] != '\n')
      throw Error("tune worker protocol: field " + line.substr(0, sp) +
                  " is not followed by a newline");
    m.emplace_back(line.substr(0, sp), buffer_.substr(value_at, size_t(len)));
    pos = value_at + size_t(len) + 1;
  }
}

Message job_message(const MeasureJob& job) {
  Message m = {{"type", "job"},
               {"expression", job.expression},
               {"knobs", job.knobs},
               {"seed", std::to_string(job.seed)},
               {"warmup", std::to_string(job.timing.warmup)},
               {"reps", std::to_string(job.timing.reps)},
               {"max_seconds", exact(job.timing.max_seconds)},
               {"l2", l2_request_name(job.l2)},
               {"graph_replay_if_short", job.timing.graph_replay_if_short ? "1" : "0"}};
  for (const auto& [k, v] : job.sizes) m.emplace_back(kSizePrefix + k, std::to_string(v));
  if (!job.cuda_override.empty()) m.emplace_back("cuda_override", job.cuda_override);
  return m;
}

MeasureJob job_from_message(const Message& m) {
  if (required(m, "type") != "job") throw Error("tune worker protocol: expected a job message");
  MeasureJob j;
  j.expression = required(m, "expression");
  j.knobs = required(m, "knobs");
  j.seed = uint64_t(parse_int("seed", required(m, "seed")));
  j.timing.warmup = int(parse_int("warmup", required(m, "warmup")));
  j.timing.reps = int(parse_int("reps", required(m, "reps")));
  j.timing.max_seconds = parse_double("max_seconds", required(m, "max_seconds"));
  j.l2 = parse_l2_request(required(m, "l2"));
  j.timing.graph_replay_if_short = required(m, "graph_replay_if_short") == "1";
  const std::string prefix = kSizePrefix;
  for (const auto& [k, v] : m)
    if (k.compare(0, prefix.size(), prefix) == 0)
      j.sizes[k.substr(prefix.size())] = parse_int(k, v);
  j.cuda_override = field(m, "cuda_override").value_or("");
  return j;
}

Message phase_message(const std::string& phase, double host_seconds) {
  Message m = {{"type", "phase"}, {"phase", phase}};
  if (host_seconds > 0) m.push_back({"host_seconds", exact(host_seconds)});
  return m;
}

double phase_host_seconds(const Message& m) {
  double s = parse_double("host_seconds", field(m, "host_seconds").value_or("0"));
  if (!(s >= 0)) throw Error("tune worker protocol: field host_seconds is negative or NaN");
  return s;
}

Message result_message(const Measurement& r) {
  return {{"type", "result"},
          {"status", trial_status_name(r.status)},
          {"reason", r.reason},
          {"median_us", exact(r.median_us)},
          {"graph_us", exact(r.graph_us)},
          {"reps", std::to_string(r.reps)},
          {"rel_error", exact(r.rel_error)},
          {"threshold", exact(r.threshold)},
          {"timing_seconds", exact(r.timing_seconds)},
          {"setup_seconds", exact(r.setup_seconds)},
          {"l2", r.l2},
          {"input_sets", std::to_string(r.input_sets)}};
}

Measurement result_from_message(const Message& m) {
  if (required(m, "type") != "result")
    throw Error("tune worker protocol: expected a result message");
  Measurement r;
  r.status = parse_trial_status(required(m, "status"));
  r.reason = required(m, "reason");
  r.median_us = parse_double("median_us", required(m, "median_us"));
  r.reps = int(parse_int("reps", required(m, "reps")));
  r.rel_error = parse_double("rel_error", required(m, "rel_error"));
  r.threshold = parse_double("threshold", required(m, "threshold"));
  r.timing_seconds = parse_double("timing_seconds", required(m, "timing_seconds"));
  // Optional: a worker that does not time (a test's stand-in) need not say how.
  r.l2 = field(m, "l2").value_or("");
  r.graph_us = parse_double("graph_us", field(m, "graph_us").value_or("0"));
  r.input_sets = int(parse_int("input_sets", field(m, "input_sets").value_or("0")));
  r.setup_seconds = parse_double("setup_seconds", field(m, "setup_seconds").value_or("0"));
  if (!(r.setup_seconds >= 0))
    throw Error("tune worker protocol: field setup_seconds is negative or NaN");
  return r;
}

}  // namespace loom::tune
