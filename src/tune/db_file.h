// The tuning database's text format: what one record holds and how a file of them is
// written and checked. Kept apart from the file handling (database.h) so export, import
// and the shipped defaults embedded in the binary read and write the same way.
//
//   loom-tuning-db v1
//   gpu=NVIDIA H100 80GB HBM3<TAB>sms=132<TAB>cuda=13000<TAB>driver=13000<TAB>op=...<TAB>
//     shape=M=4096,N=4096,K=4096<TAB>knobs=BM=128,...<TAB>us=812.5<TAB>cublas_us=790.1<TAB>
//     trials=64<TAB>date=2026-11-22T05:47:48Z<TAB>rev=ea7c7b5<TAB>note=...<TAB>l2=rotate<TAB>
//     timed=graph<TAB>sum=<16 hex>
//   end 1
//
// `l2` (how the timing kept the L2 cold: rotate, read, flush, off; bench/timing_plan.h)
// came on 2026-11-22. Lines without it are read as before and stand for the write flush
// that every earlier tune used: their knobs are as valid as ever, but their times do not
// compare with times taken another way (prefer_record below).
//
// `timed` (graph: CUDA-graph replay per launch, as a short launch is ranked; event: CUDA
// events around each launch; tune/trial_timing.h) came on 2026-11-23. Lines without it
// were event-timed, as every tune before it was.
//
// One record per line (wrapped above). `sum` is the first 16 hex digits of the SHA-256 of
// the line before it, so a flipped byte anywhere in a record is caught; the `end N` line
// catches a file cut short at a line boundary, which per-line sums cannot. Lines may end
// in CRLF (a file that went through a Windows editor or transfer): the CR is not part of
// the line or its checksum; a UTF-8 byte-order mark before the header is skipped likewise.
// A missing final newline is harmless when the end line is there.
//
// Every field is checked when a line is read (a database, an import, a shipped file) and
// when a record is written: the key by key_problem (tuning_key.h), the record by
// record_problem below. A line that fails is a problem of that line alone.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "tune/tuning_key.h"

namespace loom::tune {

inline constexpr std::string_view kDbHeader = "loom-tuning-db v1";

// The plausible range of a median time, in µs. Below 0.1 µs is no GPU launch (a launch of
// an empty kernel costs a few µs by events, about 1 µs per launch in a CUDA-graph replay):
// such a time is damage or forgery, and it would beat every real record for its key for
// ever. Above 1e9 µs (about 17 minutes) no trial survives the tuner's watchdog.
inline constexpr double kMinRecordUs = 0.1;
inline constexpr double kMaxRecordUs = 1e9;

struct TuningRecord {
  std::string knobs;      // the full Knobs::str() of the winner
  double median_us = 0;   // its median time (docs/benchmarking.md protocol)
  double cublas_us = 0;   // cuBLAS on the same problem in the same run; 0 if unknown
  int trials = 0;         // candidates measured to find it
  std::string date;       // UTC, ISO 8601: 2026-11-22T05:47:48Z
  std::string revision;   // loom's git revision when it was built, if known
  std::string note;       // free text (e.g. "loom tune --budget 120")
  std::string l2;         // the timing's L2 method; "" = not recorded (an older record: flush)
  std::string timed;      // "graph" or "event"; "" = not recorded (an older record: event)
};

// The method a record's time was taken with: its `l2` ("flush" for older records), and
// ", graph replay" when it was replayed: "rotate", "rotate, graph replay".
std::string timing_method(const TuningRecord& r);

// Whether `candidate` should take the place of `current` under one key. Times compare
// only when taken the same way; otherwise the record timed as the benchmark times now
// (any recorded method) wins over an older write-flushed one, whatever the numbers — a
// write flush charges the timed launch for writing back dirty lines, so its times run
// high and would lose to nothing fairly — and between two different recorded methods
// the newer record (by date) wins.
bool prefer_record(const TuningRecord& candidate, const TuningRecord& current);

struct DbEntry {
  TuningKey key;
  TuningRecord rec;
};

struct DbProblem {
  int line = 0;      // 1-based; 0 for the file as a whole
  std::string what;
  std::string text;  // the damaged line as it was (no line end), when the problem is a line
                     // with content that must be kept (a record or the header); else ""
};

struct ParsedDb {
  std::vector<DbEntry> entries;     // the lines that parsed and passed their checks
  std::vector<int> entry_lines;     // the line of each entry (1-based)
  std::vector<DbProblem> problems;  // empty for a valid file
};

// Why `rec` is not a record Loom could have measured, or "": the median time finite and
// within [kMinRecordUs, kMaxRecordUs], cuBLAS's time 0 (unknown) or within the same range,
// trials 0..10^7, the date empty or `YYYY-MM-DDTHH:MM:SSZ` (a real calendar time), the
// knobs NAME=VALUE pairs (NAME upper-case letters, digits and _, VALUE letters, digits,
// `_ . + -`, no name twice: the syntax of Knobs::str(); whether this build knows each
// knob is Knobs::parse's question, asked by import and at lookup), the revision and note
// printable text (the note may hold tabs), and l2/timed one of their values.
std::string record_problem(const TuningRecord& rec);
// key_problem(e.key), else record_problem(e.rec).
std::string entry_problem(const DbEntry& e);

std::string format_entry(const DbEntry& e);  // one line, no newline, checksum included
std::string format_db(const std::vector<DbEntry>& entries);  // header, lines, end line
// Never throws: every defect (header, checksum, field, count) becomes a problem, and the
// lines that are intact are still returned: a damaged line costs that line alone.
ParsedDb parse_db(std::string_view text);

// What a file's text is, as far as the tuning database is concerned. Loom sets aside,
// repairs or rewrites only `loom` (and `empty`) text: anything else it leaves untouched.
enum class DbTextKind {
  empty,          // no bytes at all: an empty database
  loom,           // the header line, or a damaged header with at least one intact record
  other_version,  // a `loom-tuning-db v<N>` header of another version (a newer Loom)
  foreign,        // neither (or a `.rejected` side file): not a tuning database
};
DbTextKind classify_db_text(std::string_view text);

// The side file where a damaged line taken out of a database is kept (`<db>.rejected`):
// its first line, which is how Loom recognizes the file as its own.
inline constexpr std::string_view kRejectedHeader = "# loom-tuning-db rejected lines";

// The current time as the `date` field wants it.
std::string utc_now_iso();
// Loom's git revision when the build was configured ("" outside a git checkout).
std::string build_revision();

}  // namespace loom::tune
