#include "tune/progress.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <sstream>
#include <vector>

namespace loom::tune {
namespace {

constexpr int kBarCells = 20;

std::string clock_text(double s) {
  if (s < 0) s = 0;
  long t = long(s + 0.5);
  char buf[32];
  if (t >= 3600)
    std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
  else
    std::snprintf(buf, sizeof buf, "%ld:%02ld", t / 60, t % 60);
  return buf;
}

std::string us_text(double us) {
  char buf[32];
  std::snprintf(buf, sizeof buf, us >= 100 ? "%.0f us" : "%.2f us", us);
  return buf;
}

}  // namespace

std::string short_knobs(const std::string& knobs, size_t max_chars) {
  std::vector<std::pair<std::string, std::string>> kv;
  std::stringstream ss(knobs);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t eq = item.find('=');
    if (eq != std::string::npos) kv.emplace_back(item.substr(0, eq), item.substr(eq + 1));
  }
  std::map<std::string, std::string> tile;
  for (const auto& [k, v] : kv)
    if (k == "BM" || k == "BN" || k == "BK") tile[k] = v;
  std::string out;
  // The block tile says the most about a GEMM configuration: it leads, as MxNxK.
  if (tile.size() == 3) out = tile["BM"] + "x" + tile["BN"] + "x" + tile["BK"];
  for (const auto& [k, v] : kv) {
    if (tile.size() == 3 && tile.count(k)) continue;
    out += (out.empty() ? "" : " ") + k + "=" + v;
  }
  if (out.size() > max_chars) out = max_chars > 3 ? out.substr(0, max_chars - 3) + "..." : "";
  return out;
}

std::string format_progress(const ProgressState& s, size_t width) {
  int planned = std::max(s.planned, s.done);
  int filled = planned > 0 ? int(double(kBarCells) * s.done / planned + 0.5) : 0;
  std::string bar =
      "[" + std::string(size_t(filled), '#') + std::string(size_t(kBarCells - filled), '.') + "]";
  std::string head = bar + " " + std::to_string(s.done) + "/" + std::to_string(planned) +
                     " trials, round " + std::to_string(s.round) + ", " +
                     std::to_string(s.failures) + " failed, ";
  std::string tail = ", " + clock_text(s.elapsed_s) + " elapsed, ETA " + clock_text(s.eta_s);
  if (!s.best_us) return head + "no verified result yet" + tail;
  std::string best = "best " + us_text(*s.best_us);
  size_t used = head.size() + best.size() + tail.size() + 1;
  std::string knobs = width > used + 8 ? short_knobs(s.best_knobs, width - used) : "";
  return head + best + (knobs.empty() ? "" : " " + knobs) + tail;
}

std::string format_summary(const ProgressState& s, size_t width) {
  std::string head = "tuned: " + std::to_string(s.done) + " trials (" + std::to_string(s.failures) +
                     " failed) in " + clock_text(s.elapsed_s) + ", ";
  if (!s.best_us) return head + "no verified result";
  std::string best = "best " + us_text(*s.best_us);
  size_t used = head.size() + best.size() + 1;
  std::string knobs = width > used + 8 ? short_knobs(s.best_knobs, width - used) : "";
  return head + best + (knobs.empty() ? "" : " " + knobs);
}

ProgressBar::ProgressBar(std::ostream& out, bool tty, size_t width)
    : out_(out), tty_(tty), width_(width) {}

ProgressBar ProgressBar::on_stderr() {
  size_t width = 100;
  if (const char* c = std::getenv("COLUMNS"))
    if (int w = std::atoi(c); w >= 40) width = size_t(w) - 1;
  return ProgressBar(std::cerr, isatty(STDERR_FILENO) != 0, width);
}

void ProgressBar::trial(const ProgressState& s) {
  if (!tty_) return;
  // Carriage return and erase-line: the one line is redrawn in place.
  out_ << "\r\033[K" << format_progress(s, width_) << std::flush;
}

void ProgressBar::round(const ProgressState& s) {
  if (tty_) return trial(s);
  out_ << format_progress(s, width_) << "\n" << std::flush;
}

void ProgressBar::finish(const ProgressState& s) {
  out_ << (tty_ ? "\r\033[K" : "") << format_summary(s, width_) << "\n" << std::flush;
}

}  // namespace loom::tune
