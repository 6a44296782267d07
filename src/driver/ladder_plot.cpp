#include "driver/ladder_plot.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "ir/error.h"

namespace loom {

void check_plot_path(const std::string& path) {
  const std::string ext = ".svg";
  if (path.size() <= ext.size() || path.compare(path.size() - ext.size(), ext.size(), ext) != 0)
    throw Error("--plot " + path + ": Loom writes SVG; give a FILE.svg (for a PNG, convert it: "
                "rsvg-convert FILE.svg -o FILE.png)");
}

namespace {

std::string xml(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (c == '&') out += "&amp;";
    else if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '"') out += "&quot;";
    else if (c < 0x20) out += ' ';  // control characters are not XML 1.0
    else out += char(c);
  }
  return out;
}

// A tick step of 1, 2 or 5 times a power of ten giving about 5 ticks up to `top`.
double nice_step(double top) {
  const double raw = top / 5;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0})
    if (m * p >= raw) return m * p;
  return 10 * p;
}

// A white outline under a bar's labels keeps them readable where the reference line
// crosses them.
constexpr const char* kHalo = " stroke=\"white\" stroke-width=\"3\" paint-order=\"stroke\"";

std::string number(double v) {
  return v >= 100 ? fmt::format("{:.0f}", v) : v >= 10 ? fmt::format("{:.1f}", v) : fmt::format("{:.2f}", v);
}

}  // namespace

std::string ladder_svg(const Ladder& l, const std::vector<LadderRow>& rows, const std::string& gpu,
                       const std::string& date) {
  double top = 0, ref_sum = 0;
  int ran = 0, ref_count = 0;
  for (const auto& r : rows) {
    if (!r.ok) continue;
    ++ran;
    top = std::max(top, r.tflops);
    if (r.cublas_us > 0) {
      const double ref = r.tflops * r.us / r.cublas_us;  // the reference's TFLOP/s
      ref_sum += ref;
      ++ref_count;
      top = std::max(top, ref);
    }
  }
  if (ran == 0 || !(top > 0)) {
    std::string why = rows.empty() ? "the ladder has no steps" : rows[0].error;
    throw Error("nothing to plot: no step of the " + l.name + " ladder ran (" +
                why.substr(0, why.find('\n')) + ")");
  }
  const double ref_tflops = ref_count ? ref_sum / ref_count : 0;
  const double step = nice_step(top * 1.08);
  const double y_max = std::ceil(top * 1.08 / step) * step;

  // Layout: the plot area, with room left for the y labels and below for the step names
  // (rotated so long names stay readable).
  const int n = int(rows.size());
  const int slot = std::clamp(720 / std::max(n, 1), 48, 110);
  // The step names hang below the axis at 35 degrees: about 6.5 px per character across
  // sin(35) of it downwards.
  size_t longest = 0;
  for (const auto& r : rows) longest = std::max(longest, r.step.name.size());
  const int label_drop = int(double(longest) * 6.5 * 0.574) + 24;
  const int left = 80, right = 190, top_margin = 80, plot_h = 360, bottom = label_drop + 44;
  const int plot_w = slot * n;
  const int width = left + plot_w + right, height = top_margin + plot_h + bottom;
  auto y_of = [&](double v) { return top_margin + plot_h * (1 - v / y_max); };

  std::string s;
  s += fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" "
      "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n",
      width, height, width, height);
  s += fmt::format("<rect width=\"{}\" height=\"{}\" fill=\"white\"/>\n", width, height);
  s += fmt::format("<text x=\"{}\" y=\"28\" font-size=\"18\" font-weight=\"bold\">loom ladder {}</text>\n",
                   left, xml(l.name));
  s += fmt::format("<text x=\"{}\" y=\"50\" font-size=\"12\" fill=\"#333\">{}</text>\n", left,
                   xml(l.expression));
  s += fmt::format("<text x=\"{}\" y=\"68\" font-size=\"12\" fill=\"#333\">{} · {}</text>\n", left,
                   xml(gpu), xml(date));
  // Grid and y axis; the tick labels with as many decimals as the step has (5, 10, 15 or
  // 0.5, 1.0, 1.5), all alike.
  const int tick_decimals = std::max(0, -int(std::floor(std::log10(step) + 1e-9)));
  for (double v = 0; v <= y_max + step / 2; v += step) {
    const double y = y_of(v);
    s += fmt::format("<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\" stroke=\"#ddd\"/>\n", left, y,
                     left + plot_w, y);
    s += fmt::format("<text x=\"{}\" y=\"{:.1f}\" font-size=\"12\" text-anchor=\"end\">{}</text>\n",
                     left - 8, y + 4, fmt::format("{:.{}f}", v, tick_decimals));
  }
  s += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#333\"/>\n", left, top_margin,
                   left, top_margin + plot_h);
  s += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#333\"/>\n", left,
                   top_margin + plot_h, left + plot_w, top_margin + plot_h);
  s += fmt::format(
      "<text transform=\"translate(24,{}) rotate(-90)\" font-size=\"14\" text-anchor=\"middle\">TFLOP/s "
      "(higher is better)</text>\n",
      top_margin + plot_h / 2);
  s += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"14\" text-anchor=\"middle\">step</text>\n",
                   left + plot_w / 2, height - 14);
  // The reference line, under the bars' labels.
  const int lx = left + plot_w + 16;
  if (ref_count) {
    const double y = y_of(ref_tflops);
    s += fmt::format(
        "<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\" stroke=\"#c0392b\" stroke-width=\"2\" "
        "stroke-dasharray=\"6,4\"/>\n",
        left, y, left + plot_w, y);
    s += fmt::format("<text x=\"{}\" y=\"{:.1f}\" font-size=\"12\" fill=\"#c0392b\">{} {} TFLOP/s</text>\n", lx, y - 2,
                     xml(l.reference), number(ref_tflops));
    s += fmt::format("<text x=\"{}\" y=\"{:.1f}\" font-size=\"10\" fill=\"#c0392b\">(mean of its runs)</text>\n",
                     lx, y + 11);
  }
  // Bars.
  for (int i = 0; i < n; ++i) {
    const LadderRow& r = rows[size_t(i)];
    const double cx = left + slot * (i + 0.5);
    const double bw = slot * 0.62;
    if (r.ok) {
      const double y = y_of(r.tflops);
      s += fmt::format(
          "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"#4878a8\"><title>{}: "
          "{} TFLOP/s, {} us</title></rect>\n",
          cx - bw / 2, y, bw, top_margin + plot_h - y, xml(r.step.name), number(r.tflops), number(r.us));
      s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"11\" text-anchor=\"middle\"{}>{}</text>\n",
                       cx, y - (r.cublas_us > 0 ? 18 : 5), kHalo, number(r.tflops));
      if (r.cublas_us > 0)
        s += fmt::format(
            "<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"10\" text-anchor=\"middle\" fill=\"#555\"{}>{:.2f}x</text>\n",
            cx, y - 5, kHalo, r.cublas_us / r.us);
    } else {
      s += fmt::format(
          "<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"10\" text-anchor=\"middle\" fill=\"#b00\">not run</text>\n",
          cx, double(top_margin + plot_h - 6));
    }
    s += fmt::format(
        "<text transform=\"translate({:.1f},{}) rotate(-35)\" font-size=\"12\" text-anchor=\"end\">{}</text>\n",
        cx + 4, top_margin + plot_h + 16, xml(r.step.name));
  }
  // The legend.
  s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"#4878a8\"/>\n", lx, top_margin);
  s += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"12\">Loom (TFLOP/s)</text>\n", lx + 18, top_margin + 11);
  if (ref_count)
    s += fmt::format(
        "<text x=\"{}\" y=\"{}\" font-size=\"11\" fill=\"#555\">0.95x over a bar:</text>\n"
        "<text x=\"{}\" y=\"{}\" font-size=\"11\" fill=\"#555\">{} time / Loom time</text>\n",
        lx, top_margin + 30, lx, top_margin + 44, xml(l.reference));
  s += "</svg>\n";
  return s;
}

}  // namespace loom
