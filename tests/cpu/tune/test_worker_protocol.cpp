// The tuner <-> worker wire protocol: jobs and results survive the round trip exactly,
// messages decode from any split of the byte stream, and malformed framing is an error
// rather than a hang or a misread.
#include <gtest/gtest.h>

#include "ir/error.h"
#include "tune/worker_protocol.h"

namespace loom::tune {
namespace {

MeasureJob sample_job() {
  MeasureJob j;
  j.expression = "matmul(A[M,K]:bf16, B[K,N]:bf16)";
  j.sizes = {{"M", 4096}, {"N", 14336}, {"K", 4096}};
  j.knobs = "BM=128,BN=256,BK=64";
  j.timing.reps = 17;
  j.timing.warmup = 2;
  j.timing.max_seconds = 2.5;
  j.l2 = L2Request::read;
  j.seed = 99;
  j.cuda_override = "extern \"C\" __global__ void k() {\n}\nend\nsize 12\n";
  return j;
}

TEST(WorkerProtocol, JobRoundTrips) {
  MessageDecoder d;
  std::string bytes = encode_message(job_message(sample_job()));
  d.feed(bytes.data(), bytes.size());
  auto m = d.next();
  ASSERT_TRUE(m);
  MeasureJob j = job_from_message(*m);
  MeasureJob e = sample_job();
  EXPECT_EQ(j.expression, e.expression);
  EXPECT_EQ(j.sizes, e.sizes);
  EXPECT_EQ(j.knobs, e.knobs);
  EXPECT_EQ(j.timing.reps, 17);
  EXPECT_EQ(j.timing.warmup, 2);
  EXPECT_EQ(j.timing.max_seconds, 2.5);
  EXPECT_EQ(j.l2, L2Request::read);
  EXPECT_EQ(j.seed, 99u);
  EXPECT_EQ(j.cuda_override, e.cuda_override);
  EXPECT_FALSE(d.next());
  EXPECT_TRUE(d.empty());
}

TEST(WorkerProtocol, ResultsRoundTripExactly) {
  Measurement r;
  r.status = TrialStatus::wrong_answer;
  r.reason = "FAIL rel error 0.3\nsecond line";
  r.median_us = 1234.5678901234567;
  r.graph_us = 7.312345678901234;
  r.reps = 50;
  r.rel_error = 0.1 / 3;
  r.threshold = 1e-5;
  r.timing_seconds = 0.123456789;
  r.l2 = "rotate";
  r.input_sets = 7;
  MessageDecoder d;
  std::string bytes = encode_message(result_message(r));
  d.feed(bytes.data(), bytes.size());
  Measurement back = result_from_message(*d.next());
  EXPECT_EQ(back.status, r.status);
  EXPECT_EQ(back.reason, r.reason);
  EXPECT_EQ(back.median_us, r.median_us);
  EXPECT_EQ(back.graph_us, r.graph_us);
  EXPECT_EQ(back.reps, r.reps);
  EXPECT_EQ(back.rel_error, r.rel_error);
  EXPECT_EQ(back.threshold, r.threshold);
  EXPECT_EQ(back.timing_seconds, r.timing_seconds);
  EXPECT_EQ(back.l2, "rotate");
  EXPECT_EQ(back.input_sets, 7);
}

// The tuner's jobs ask for the benchmark's automatic plan unless told otherwise: a job
// built with defaults must carry "auto", not the old write flush.
TEST(WorkerProtocol, JobsDefaultToTheBenchmarksL2Plan) {
  MeasureJob plain;
  plain.expression = "matmul(A[M,K]:bf16, B[K,N]:bf16)";
  MessageDecoder d;
  std::string bytes = encode_message(job_message(plain));
  d.feed(bytes.data(), bytes.size());
  EXPECT_EQ(job_from_message(*d.next()).l2, L2Request::automatic);
}

// A result without the L2 fields (a worker that never timed) still decodes.
TEST(WorkerProtocol, ResultWithoutL2FieldsDecodes) {
  Message m = result_message(failed_measurement(TrialStatus::fault, "boom"));
  Message trimmed;
  for (const auto& f : m)
    if (f.first != "l2" && f.first != "input_sets" && f.first != "graph_us") trimmed.push_back(f);
  Measurement back = result_from_message(trimmed);
  EXPECT_EQ(back.status, TrialStatus::fault);
  EXPECT_EQ(back.graph_us, 0);
  EXPECT_EQ(back.l2, "");
  EXPECT_EQ(back.input_sets, 0);
}

TEST(WorkerProtocol, DecodesMessagesSplitAnywhere) {
  std::string bytes = encode_message(phase_message("compile")) +
                      encode_message(job_message(sample_job())) +
                      encode_message(phase_message("run"));
  MessageDecoder d;
  std::vector<Message> got;
  for (char c : bytes) {
    d.feed(&c, 1);
    while (auto m = d.next()) got.push_back(*m);
  }
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(field(got[0], "phase"), "compile");
  EXPECT_EQ(job_from_message(got[1]).cuda_override, sample_job().cuda_override);
  EXPECT_EQ(field(got[2], "phase"), "run");
}

TEST(WorkerProtocol, SetupSecondsRoundTripAndAreOptional) {
  Measurement m;
  m.status = TrialStatus::ok;
  m.setup_seconds = 12.25;
  EXPECT_EQ(result_from_message(result_message(m)).setup_seconds, 12.25);
  Message old = result_message(m);
  Message trimmed;
  for (const auto& f : old)
    if (f.first != "setup_seconds") trimmed.push_back(f);
  EXPECT_EQ(result_from_message(trimmed).setup_seconds, 0);
  for (auto& f : old)
    if (f.first == "setup_seconds") f.second = "-3";
  EXPECT_THROW(result_from_message(old), Error);
}

TEST(WorkerProtocol, PhaseHostSecondsRoundTripAndAreChecked) {
  EXPECT_EQ(phase_host_seconds(phase_message("run")), 0.0);
  EXPECT_EQ(field(phase_message("run"), "host_seconds"), std::nullopt) << "no field for 0";
  EXPECT_EQ(phase_host_seconds(phase_message("setup: inputs", 141.5)), 141.5);
  Message bad = {{"type", "phase"}, {"phase", "setup: inputs"}, {"host_seconds", "-1"}};
  EXPECT_THROW(phase_host_seconds(bad), Error);
  bad.back().second = "lots";
  EXPECT_THROW(phase_host_seconds(bad), Error);
}

TEST(WorkerProtocol, MalformedInputIsAnError) {
  MessageDecoder a;
  a.feed("hello\n", 6);
  EXPECT_THROW(a.next(), Error);
  MessageDecoder b;
  std::string wrong_length = "type 3\nresultX\nend\n";
  b.feed(wrong_length.data(), wrong_length.size());
  EXPECT_THROW(b.next(), Error);
  MessageDecoder c;
  std::string endless(300, 'x');
  c.feed(endless.data(), endless.size());
  EXPECT_THROW(c.next(), Error);
  EXPECT_THROW(parse_trial_status("fine"), Error);
  Message no_status = {{"type", "result"}};
  EXPECT_THROW(result_from_message(no_status), Error);
}

TEST(WorkerProtocol, StatusNamesRoundTrip) {
  for (TrialStatus s : {TrialStatus::ok, TrialStatus::compile_error, TrialStatus::wrong_answer,
                        TrialStatus::fault, TrialStatus::timeout, TrialStatus::worker_error})
    EXPECT_EQ(parse_trial_status(trial_status_name(s)), s);
}

}  // namespace
}  // namespace loom::tune
