#include "tune/db_file.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <ctime>
#include <map>
#include <set>

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
      why = "malformed field '" + quoted_text(field, 40) + "'";
      return false;
    }
    if (!f.emplace(std::string(field.substr(0, eq)), value).second) {
      why = "field '" + quoted_text(field.substr(0, eq)) + "' appears twice";
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
  e.rec.timed = f.count("timed") ? f["timed"] : "";
  e.key.gpu = f["gpu"];
  e.key.op = f["op"];
  e.key.shape = f["shape"];
  e.rec.knobs = f["knobs"];
  e.rec.date = f["date"];
  e.rec.revision = f["rev"];
  e.rec.note = f["note"];
  const char* const numeric[] = {"sms", "cuda", "driver", "us", "cublas_us", "trials"};
  bool ok[] = {parse_number(f["sms"], e.key.sm_count), parse_number(f["cuda"], e.key.cuda_runtime),
               parse_number(f["driver"], e.key.driver), parse_number(f["us"], e.rec.median_us),
               parse_number(f["cublas_us"], e.rec.cublas_us), parse_number(f["trials"], e.rec.trials)};
  for (size_t i = 0; i < std::size(ok); ++i)
    if (!ok[i]) {
      why = std::string(numeric[i]) + "='" + quoted_text(f[numeric[i]], 40) + "' is not a number";
      return false;
    }
  why = entry_problem(e);
  return why.empty();
}

bool is_knob_name_char(char c) { return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'; }
bool is_knob_value_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '+' || c == '-';
}

std::string knobs_problem(const std::string& knobs) {
  if (knobs.empty()) return "the knobs are empty";
  if (knobs.size() > 4096) return "the knobs are longer than 4096 bytes";
  std::set<std::string_view> names;
  std::string_view rest = knobs;
  while (true) {
    size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    size_t eq = item.find('=');
    std::string_view name = item.substr(0, eq);
    std::string_view value = eq == std::string_view::npos ? std::string_view() : item.substr(eq + 1);
    bool good = !name.empty() && name[0] >= 'A' && name[0] <= 'Z' && !value.empty() &&
                std::all_of(name.begin(), name.end(), is_knob_name_char) &&
                std::all_of(value.begin(), value.end(), is_knob_value_char);
    if (!good)
      return "the knobs '" + quoted_text(knobs, 80) + "' are not NAME=VALUE pairs (e.g. BM=128,BN=64)";
    if (!names.insert(name).second) return "the knobs set " + quoted_text(name) + " twice";
    if (comma == std::string_view::npos) return "";
    rest = rest.substr(comma + 1);
  }
}

// YYYY-MM-DDTHH:MM:SSZ naming a real time of 2000..2099.
bool valid_date(const std::string& d) {
  if (d.size() != 20 || d[4] != '-' || d[7] != '-' || d[10] != 'T' || d[13] != ':' || d[16] != ':' ||
      d[19] != 'Z')
    return false;
  for (size_t i : {0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18})
    if (d[i] < '0' || d[i] > '9') return false;
  std::tm tm{};
  tm.tm_year = std::stoi(d.substr(0, 4)) - 1900;
  tm.tm_mon = std::stoi(d.substr(5, 2)) - 1;
  tm.tm_mday = std::stoi(d.substr(8, 2));
  tm.tm_hour = std::stoi(d.substr(11, 2));
  tm.tm_min = std::stoi(d.substr(14, 2));
  tm.tm_sec = std::stoi(d.substr(17, 2));
  if (tm.tm_year < 100 || tm.tm_year > 199 || tm.tm_mon > 11 || tm.tm_hour > 23 || tm.tm_min > 59 ||
      tm.tm_sec > 59)
    return false;
  std::tm back = tm;
  ::timegm(&back);  // normalizes: Feb 30 becomes Mar 2
  return back.tm_mday == tm.tm_mday && back.tm_mon == tm.tm_mon;
}

bool plausible_us(double us) { return std::isfinite(us) && us >= kMinRecordUs && us <= kMaxRecordUs; }

std::string us_text(double v) {
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

}  // namespace

std::string record_problem(const TuningRecord& r) {
  if (!plausible_us(r.median_us))
    return "us=" + us_text(r.median_us) + " is not a plausible kernel time (finite, " + us_text(kMinRecordUs) +
           " to " + us_text(kMaxRecordUs) + " us)";
  if (r.cublas_us != 0 && !plausible_us(r.cublas_us))
    return "cublas_us=" + us_text(r.cublas_us) + " is not a plausible kernel time (0 when unknown, else " +
           us_text(kMinRecordUs) + " to " + us_text(kMaxRecordUs) + " us)";
  if (r.trials < 0 || r.trials > 10000000)
    return "trials=" + std::to_string(r.trials) + " is not a trial count (0..10000000)";
  if (std::string why = knobs_problem(r.knobs); !why.empty()) return why;
  if (!r.date.empty() && !valid_date(r.date))
    return "date='" + quoted_text(r.date, 40) + "' is not a UTC time such as 2026-11-22T05:47:48Z";
  if (std::string why = text_problem("the revision", r.revision, 64); !why.empty()) return why;
  if (std::string why = text_problem("the note", r.note, 1024, /*allow_tab=*/true); !why.empty()) return why;
  if (!r.l2.empty() && r.l2 != "rotate" && r.l2 != "read" && r.l2 != "flush" && r.l2 != "off")
    return "l2 is not one of rotate, read, flush, off";
  if (!r.timed.empty() && r.timed != "graph" && r.timed != "event") return "timed is not one of graph, event";
  return "";
}

std::string entry_problem(const DbEntry& e) {
  std::string why = key_problem(e.key);
  return why.empty() ? record_problem(e.rec) : why;
}

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

namespace {

// The lines of a text, each without its line end ("\n" or "\r\n"), and without the
// UTF-8 byte-order mark a Windows editor puts in front of the first.
std::vector<std::string_view> split_lines(std::string_view text) {
  if (text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    if (line.ends_with('\r')) line.remove_suffix(1);
    lines.push_back(line);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
  }
  return lines;
}

bool is_end_line(std::string_view l) { return l.starts_with("end ") && l.size() > 4 && l.size() < 24; }

}  // namespace

ParsedDb parse_db(std::string_view text) {
  ParsedDb p;
  auto problem = [&](int line, std::string what, std::string_view keep = {}) {
    p.problems.push_back({line, std::move(what), std::string(keep)});
  };
  std::vector<std::string_view> lines = split_lines(text);
  if (lines.empty()) {
    problem(0, "the file is empty (no '" + std::string(kDbHeader) + "' line)");
    return p;
  }
  int end_line = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i == 0 && lines[0] == kDbHeader) continue;
    const int n = int(i) + 1;
    if (i > 0 && is_end_line(lines[i])) {
      size_t count = 0;
      if (end_line)
        problem(n, "a second end line (files joined?)");
      else if (!parse_number(std::string(lines[i].substr(4)), count) || count != i - 1)
        problem(n, "the end line does not count the " + std::to_string(i - 1) +
                       " lines before it (lines were lost)");
      if (!end_line) end_line = n;
      continue;
    }
    if (lines[i].empty()) {
      problem(n, "an empty line");
      continue;
    }
    DbEntry e;
    std::string why;
    if (parse_line(lines[i], e, why)) {
      p.entries.push_back(std::move(e));
      p.entry_lines.push_back(n);
      if (i == 0) problem(1, "no '" + std::string(kDbHeader) + "' line (the header was lost)");
    } else if (i == 0) {
      problem(1, "the first line is not '" + std::string(kDbHeader) + "' (a damaged header)", lines[0]);
    } else {
      problem(n, why, lines[i]);
    }
    if (end_line) problem(n, "a line after the end line (files joined?)");
  }
  if (!end_line) problem(0, "no end line (the file was cut short: records after the last line are lost)");
  return p;
}

DbTextKind classify_db_text(std::string_view text) {
  if (text.empty()) return DbTextKind::empty;
  std::vector<std::string_view> lines = split_lines(text);
  if (lines[0] == kDbHeader) return DbTextKind::loom;
  if (lines[0].starts_with("loom-tuning-db ")) return DbTextKind::other_version;
  // Loom's side file of damaged lines holds records too, but it is not a database.
  if (lines[0].starts_with(kRejectedHeader)) return DbTextKind::foreign;
  // A damaged header: the file is Loom's when a line of it is a record whose checksum
  // verifies (a SHA-256 a foreign file does not match by chance).
  for (size_t i = 1; i < lines.size(); ++i) {
    size_t sum_at = lines[i].rfind("\tsum=");
    if (sum_at != std::string_view::npos && checksum(lines[i].substr(0, sum_at)) == lines[i].substr(sum_at + 5))
      return DbTextKind::loom;
  }
  return DbTextKind::foreign;
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
