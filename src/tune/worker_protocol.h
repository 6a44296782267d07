// The wire protocol between the tuner and its measurement worker process.
//
// A message is a list of fields, each framed by its byte length so that values may hold
// anything (CUDA source, multi-line error text):
//
//     <key> <length>\n<length bytes of value>\n      (one per field, key without spaces)
//     end\n                                           (closes the message)
//
// The first field is always `type`. The tuner writes `type=job` messages to the worker's
// stdin; the worker answers each on its stdout with any number of `type=phase`
// messages (phase=compile|setup|setup: inputs|setup: reference|setup: input sets|run|time:
// the tuner restarts its timeout at each, so a slow first-time problem setup is not
// mistaken for a hung kernel; a set-up step also names the host seconds it expects beyond
// the timeout, `host_seconds`, which the tuner adds to that step's deadline) and one final
// `type=result` message. A worker that reads end of file on stdin exits.
#pragma once
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tune/measurement.h"

namespace loom::tune {

using Message = std::vector<std::pair<std::string, std::string>>;

std::string encode_message(const Message& m);

// The value of `key` in `m`, or nullopt.
std::optional<std::string> field(const Message& m, const std::string& key);

// Incremental decoder: feed bytes as they arrive, take complete messages out.
class MessageDecoder {
 public:
  void feed(const char* data, size_t n);
  // The next complete message, or nullopt when more bytes are needed. Throws
  // loom::Error on malformed framing (the peer is not speaking this protocol).
  std::optional<Message> next();
  bool empty() const { return buffer_.empty(); }

 private:
  std::string buffer_;
};

Message job_message(const MeasureJob& job);
MeasureJob job_from_message(const Message& m);  // throws loom::Error on a bad field

// A phase begins. `host_seconds` is the host work the worker expects the phase to take
// beyond the supervisor's per-phase limit (set-up of a problem whose inputs are gigabytes:
// random values, their upload, the reference); the supervisor adds it to that phase's
// deadline. 0 for phases bounded by the GPU.
Message phase_message(const std::string& phase, double host_seconds = 0);
// The allowance a phase message carries (0 when it carries none); throws loom::Error on
// a malformed or negative value.
double phase_host_seconds(const Message& m);
Message result_message(const Measurement& r);
Measurement result_from_message(const Message& m);  // throws loom::Error on a bad field

}  // namespace loom::tune
