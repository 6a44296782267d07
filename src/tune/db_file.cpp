#include "tune/db_file.h"

#include <charconv>
#include <ctime>
#include <map>

#include "runtime/sha256.h"

namespace loom::tune {
namespace {

// Field values may hold any text (a GPU name, a note): tabs and newlines would break the
// line structure, so they and the escape character itself are escaped.
std::string escape(std::string_view s) {
  std::string o;
  for (char c : s) {
    if (c == '\\') o += "\\\\";
    else if (c == '\t') o += "\\t";
    else if (c == '\n') o += "\\n";
    else if (c == '\r') o += "\\r";
    else o += c;
  }
  return o;
}

bool unescape(std::string_view s, std::string& o) {
  o.clear();
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\') { o += s[i]; continue; }
    if (++i == s.size()) return false;
    switch (s[i]) {
      case '\\': o += '\\'; break;
      case 't': o += '\t'; break;
      case 'n': o += '\n'; break;
      case 'r': o += '\r'; break;
      default: return false;
    }
  }
  return true;
}

std::string number(double v) {
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

template <typename T>
bool parse_number(const std::string& s, T& v) {
  auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  return !s.empty() && r.ec == std::errc() && r.ptr == s.data() + s.size();
}

std::string checksum(std::string_view body) { return sha256_hex(body).substr(0, 16); }

const char* const kFields[] = {"gpu", "sms",   "cuda",      "driver", "op",   "shape", "knobs",
                               "us",  "cublas_us", "trials", "date", "rev",   "note"};
// Fields a line may lack: records written before they existed.
const char* const kOptionalFields[] = {"l2", "timed"};

// One line -> entry; false with the reason on any defect.
bool parse_line(std::string_view line, DbEntry& e, std::string& why) {
  size_t sum_at = line.rfind("\tsum=");
  if (sum_at == std::string_view::npos) { why = "no checksum field"; return false; }
  if (checksum(line.substr(0, sum_at)) != line.substr(sum_at + 5)) {
    why = "checksum mismatch (the record was changed or damaged)";
    return false;
  }
  std::map<std::string, std::string> f;
  std::string_view body = line.substr(0, sum_at);
  while (!body.empty()) {
    size_t tab = body.find('\t');
    std::string_view field = body.substr(0, tab);
    body = tab == std::string_view::npos ? std::string_view() : body.substr(tab + 1);
    size_t eq = field.find('=');
    std::string value;
    if (eq == std::string_view::npos || !unescape(field.substr(eq + 1), value)) {
      why = "malformed field '" + std::string(field.substr(0, 40)) + "'";
      return false;
    }
    if (!f.emplace(std::string(field.substr(0, eq)), value).second) {
      why = "field '" + std::string(field.substr(0, eq)) + "' appears twice";
      return false;
    }
  }
  for (const char* name : kFields)
    if (!f.count(name)) { why = std::string("missing field '") + name + "'"; return false; }
  size_t optional = 0;
  for (const char* name : kOptionalFields) optional += f.count(name);
  if (f.size() != std::size(kFields) + optional) {
    why = "unknown field (a newer format?)";
    return false;
  }
  e.rec.l2 = f.count("l2") ? f["l2"] : "";
  if (!e.rec.l2.empty() && e.rec.l2 != "rotate" && e.rec.l2 != "read" && e.rec.l2 != "flush" &&
      e.rec.l2 != "off") {
    why = "l2 is not one of rotate, read, flush, off";
    return false;
  }
  e.rec.timed = f.count("timed") ? f["timed"] : "";
  if (!e.rec.timed.empty() && e.rec.timed != "graph" && e.rec.timed != "event") {
    why = "timed is not one of graph, event";
    return false;
  }
  e.key.gpu = f["gpu"];
  e.key.op = f["op"];
  e.key.shape = f["shape"];
  e.rec.knobs = f["knobs"];
  e.rec.date = f["date"];
  e.rec.revision = f["rev"];
  e.rec.note = f["note"];
  if (!parse_number(f["sms"], e.key.sm_count) || !parse_number(f["cuda"], e.key.cuda_runtime) ||
      !parse_number(f["driver"], e.key.driver) || !parse_number(f["us"], e.rec.median_us) ||
      !parse_number(f["cublas_us"], e.rec.cublas_us) || !parse_number(f["trials"], e.rec.trials)) {
    why = "a numeric field does not hold a number";
    return false;
  }
  if (!(e.rec.median_us > 0) || e.key.gpu.empty() || e.key.op.empty() || e.rec.knobs.empty()) {
    why = "empty gpu, op or knobs, or a time that is not positive";
    return false;
  }
  return true;
}

}  // namespace

std::string format_entry(const DbEntry& e) {
  const std::string values[] = {e.key.gpu,  std::to_string(e.key.sm_count), std::to_string(e.key.cuda_runtime),
                                std::to_string(e.key.driver), e.key.op, e.key.shape, e.rec.knobs,
                                number(e.rec.median_us), number(e.rec.cublas_us),
                                std::to_string(e.rec.trials), e.rec.date, e.rec.revision, e.rec.note};
  std::string line;
  for (size_t i = 0; i < std::size(kFields); ++i)
    line += (i ? "\t" : "") + std::string(kFields[i]) + "=" + escape(values[i]);
  // An unrecorded method stays unwritten, so an old line round-trips byte for byte (its
  // checksum with it).
  if (!e.rec.l2.empty()) line += "\tl2=" + escape(e.rec.l2);
  if (!e.rec.timed.empty()) line += "\ttimed=" + escape(e.rec.timed);
  return line + "\tsum=" + checksum(line);
}

std::string format_db(const std::vector<DbEntry>& entries) {
  std::string s = std::string(kDbHeader) + "\n";
  for (const DbEntry& e : entries) s += format_entry(e) + "\n";
  return s + "end " + std::to_string(entries.size()) + "\n";
}

ParsedDb parse_db(std::string_view text) {
  ParsedDb p;
  auto problem = [&](int line, std::string what) { p.problems.push_back({line, std::move(what)}); };
  if (!text.empty() && text.back() != '\n') problem(0, "the file does not end with a newline (cut short?)");
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    lines.push_back(text.substr(0, nl));
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
  }
  if (lines.empty() || lines[0] != kDbHeader) {
    problem(1, "the first line is not '" + std::string(kDbHeader) + "'");
    if (lines.empty()) return p;
  }
  bool ended = false;
  for (size_t i = 1; i < lines.size(); ++i) {
    const int n = int(i) + 1;
    if (ended) { problem(n, "text after the end line"); break; }
    if (lines[i].starts_with("end ")) {
      ended = true;
      size_t count = 0;
      if (!parse_number(std::string(lines[i].substr(4)), count) || count != i - 1)
        problem(n, "the end line does not count the " + std::to_string(i - 1) + " lines before it");
      continue;
    }
    DbEntry e;
    std::string why;
    if (parse_line(lines[i], e, why)) {
      p.entries.push_back(std::move(e));
      p.entry_lines.push_back(n);
    } else {
      problem(n, why);
    }
  }
  if (!ended) problem(0, "no end line (the file was cut short)");
  return p;
}

std::string timing_method(const TuningRecord& r) {
  return (r.l2.empty() ? "flush" : r.l2) + (r.timed == "graph" ? ", graph replay" : "");
}

bool prefer_record(const TuningRecord& candidate, const TuningRecord& current) {
  if (timing_method(candidate) == timing_method(current))
    return candidate.median_us < current.median_us;
  if (current.l2.empty()) return true;
  if (candidate.l2.empty()) return false;
  return candidate.date > current.date;  // ISO 8601 UTC sorts by time
}

std::string utc_now_iso() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string build_revision() { return LOOM_GIT_REVISION; }

}  // namespace loom::tune
