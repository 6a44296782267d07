#include "bench/report.h"

#include <algorithm>
#include <cstdio>
#include <ctime>

#include "ir/error.h"

namespace loom {
namespace {

std::string printf_str(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

// Display width of UTF-8 text: continuation bytes (10xxxxxx) add no column.
size_t display_width(const std::string& s) {
  return size_t(std::count_if(s.begin(), s.end(),
                              [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

std::string pad(const std::string& s, size_t width, Align a) {
  const std::string fill(width - std::min(width, display_width(s)), ' ');
  return a == Align::Left ? s + fill : fill + s;
}

std::string rstrip(std::string s) {
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

std::string version_str(int v) {
  if (v <= 0) return "unknown";
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

// "132", "64x32", "8x8x4": trailing dimensions of 1 are dropped.
std::string grid_str(const std::array<int64_t, 3>& g) {
  int last = g[2] != 1 ? 2 : g[1] != 1 ? 1 : 0;
  std::string s = std::to_string(g[0]);
  for (int i = 1; i <= last; ++i) s += "x" + std::to_string(g[i]);
  return s;
}

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

}  // namespace

TextTable::TextTable(std::vector<Column> columns) : columns_(std::move(columns)) {}

void TextTable::add_row(std::vector<std::string> cells) {
  LOOM_CHECK(cells.size() == columns_.size(), "table row has " + std::to_string(cells.size()) +
                                                  " cells for " + std::to_string(columns_.size()) +
                                                  " columns");
  rows_.push_back(std::move(cells));
}

std::string TextTable::str() const {
  std::vector<size_t> width(columns_.size());
  for (size_t c = 0; c < columns_.size(); ++c) {
    width[c] = display_width(columns_[c].header);
    for (const auto& row : rows_) width[c] = std::max(width[c], display_width(row[c]));
  }
  auto line = [&](auto cell) {
    std::string s;
    for (size_t c = 0; c < columns_.size(); ++c) s += (c ? "  " : "") + cell(c);
    return rstrip(s) + "\n";
  };
  std::string out = line([&](size_t c) { return pad(columns_[c].header, width[c], columns_[c].align); });
  out += line([&](size_t c) { return std::string(width[c], '-'); });
  for (const auto& row : rows_)
    out += line([&](size_t c) { return pad(row[c], width[c], columns_[c].align); });
  return out;
}

std::string format_us(double us) { return printf_str("%.1f", us); }
std::string format_tflops(double tflops) { return printf_str("%.1f", tflops); }
std::string format_ratio(double r) { return printf_str("%.2f", r) + "x"; }

std::string format_bytes(int64_t bytes) {
  if (bytes < 1024) return std::to_string(bytes) + " B";
  const bool mib = bytes >= (1 << 20);
  const int64_t unit = mib ? 1 << 20 : 1 << 10;
  const std::string suffix = mib ? " MiB" : " KiB";
  if (bytes % unit == 0) return std::to_string(bytes / unit) + suffix;
  return printf_str("%.1f", double(bytes) / double(unit)) + suffix;
}

std::string format_backends(const std::vector<BackendResult>& rows, double flops,
                            size_t reference) {
  LOOM_CHECK(rows.empty() || reference < rows.size(), "reference row out of range");
  const bool any_graph = std::any_of(rows.begin(), rows.end(), [](const BackendResult& r) {
    return r.timing.graph_median_us.has_value();
  });
  std::vector<TextTable::Column> cols = {{"Backend", Align::Left},
                                         {"µs", Align::Right},
                                         {"TFLOP/s", Align::Right},
                                         {"vs " + (rows.empty() ? std::string("reference")
                                                                : rows[reference].name),
                                          Align::Right}};
  if (any_graph) {
    cols.push_back({"graph µs", Align::Right});
    cols.push_back({"graph vs " + rows[reference].name, Align::Right});
  }
  TextTable t(cols);
  const std::optional<double> ref_graph = rows.empty() ? std::nullopt
                                                       : rows[reference].timing.graph_median_us;
  for (const BackendResult& r : rows) {
    const double us = r.timing.median_us;
    std::vector<std::string> cells = {
        r.name, format_us(us), format_tflops(flops / (us * 1e-6) / 1e12),
        format_ratio(rows[reference].timing.median_us / us)};
    if (any_graph) {
      const std::optional<double> g = r.timing.graph_median_us;
      cells.push_back(g ? format_us(*g) : "-");
      cells.push_back(g && ref_graph ? format_ratio(*ref_graph / *g) : "-");
    }
    t.add_row(std::move(cells));
  }
  return t.str();
}

std::string format_kernels(const std::vector<KernelReport>& kernels) {
  TextTable t({{"kernel", Align::Left},
               {"µs", Align::Right},
               {"grid", Align::Right},
               {"block", Align::Right},
               {"smem", Align::Right},
               {"regs", Align::Right},
               {"occupancy", Align::Right},
               {"spills", Align::Right},
               {"knobs", Align::Left}});
  for (const KernelReport& k : kernels) {
    std::string occ = "-";
    if (k.occupancy && k.blocks_per_sm)
      occ = printf_str("%.0f%%", *k.occupancy * 100) + " (" + std::to_string(*k.blocks_per_sm) + "/SM)";
    else if (k.occupancy)
      occ = printf_str("%.0f%%", *k.occupancy * 100);
    else if (k.blocks_per_sm)
      occ = std::to_string(*k.blocks_per_sm) + "/SM";
    if (k.cluster_size && k.active_clusters)
      occ += ", " + std::to_string(*k.active_clusters) + " clusters of " +
             std::to_string(*k.cluster_size);
    t.add_row({k.name, k.us ? format_us(*k.us) : "-", grid_str(k.grid),
               std::to_string(k.block_threads), format_bytes(k.smem_bytes), std::to_string(k.regs),
               occ, k.spill_bytes ? format_bytes(k.spill_bytes) : "0",
               k.knobs.empty() ? "-" : k.knobs});
  }
  std::string out = t.str();
  for (const KernelReport& k : kernels) out += serialized_wgmma_warning(k.name, k.wgmma_serialized);
  return out;
}

std::string serialized_wgmma_warning(const std::string& kernel, const std::string& reason) {
  if (reason.empty()) return "";
  return "warning: ptxas serialized the wgmma.mma_async of " + kernel + " (" + reason +
         "): each product waits for the one before it, a fraction of the tensor cores' rate "
         "(no spill shows it); knobs that shrink the live accumulators (a smaller BLOCK_N or "
         "BN, ATTN_PEEL_MASK=0 or ATTN_OVERLAP=0 on attention) avoid it\n";
}

BenchHeader make_bench_header(const DeviceInfo& dev, uint64_t seed, const TimingOptions& opt,
                              std::string command) {
  BenchHeader h;
  h.gpu = dev.name;
  h.arch = dev.arch();
  h.sms = dev.sm_count;
  h.l2_bytes = dev.l2_bytes;
  h.driver_version = dev.driver_version;
  h.runtime_version = dev.runtime_version;
  h.sm_clock_mhz = dev.clock_khz / 1000;
  h.mem_clock_mhz = dev.mem_clock_khz / 1000;
  h.date = utc_now();
  h.seed = seed;
  L2Plan plan;
  plan.method = opt.l2;
  plan.sets = opt.input_sets;
  plan.set_bytes = opt.input_set_bytes;
  plan.l2_bytes = dev.l2_bytes;
  h.l2 = describe_l2(plan);
  h.reps = opt.reps;
  h.warmup = opt.warmup;
  h.command = std::move(command);
  return h;
}

std::string format_header(const BenchHeader& h) {
  auto mhz = [](int v) { return v > 0 ? std::to_string(v) + " MHz" : std::string("unknown"); };
  std::vector<std::pair<std::string, std::string>> kv = {
      {"GPU", h.gpu + " (" + h.arch + ", " + std::to_string(h.sms) + " SMs, L2 " +
                  printf_str("%.1f", double(h.l2_bytes) / (1 << 20)) + " MiB)"},
      {"CUDA", "driver " + version_str(h.driver_version) + ", runtime " +
                   version_str(h.runtime_version)},
      {"clocks", "SM " + mhz(h.sm_clock_mhz) + " max, memory " + mhz(h.mem_clock_mhz) + " max"},
      {"date", h.date},
      {"seed", std::to_string(h.seed)},
      {"timing", "median of " + std::to_string(h.reps) + " reps after " + std::to_string(h.warmup) +
                     " warm-up, interleaved; graph replay under " +
                     format_us(kGraphReplayBelowUs) + " µs"},
      {"L2", h.l2},
  };
  if (!h.command.empty()) kv.push_back({"command", h.command});
  size_t w = 0;
  for (const auto& [k, v] : kv) w = std::max(w, k.size());
  std::string out;
  for (const auto& [k, v] : kv) out += k + ":" + std::string(w - k.size() + 1, ' ') + v + "\n";
  return out;
}

}  // namespace loom
