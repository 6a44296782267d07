// `loom ladder --plot`'s SVG (src/driver/ladder_plot.h) from made-up rows: every step is
// named, bars only for the steps that ran, the reference line and ratios only with a
// reference, text escaped, and no plot (a clear error) when nothing ran.
#include <gtest/gtest.h>

#include <fstream>

#include "driver/ladder_plot.h"
#include "ir/error.h"

namespace {

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

int count(const std::string& s, const std::string& part) {
  int n = 0;
  for (size_t at = 0; (at = s.find(part, at)) != std::string::npos; ++at) ++n;
  return n;
}

loom::LadderRow row(const loom::Ladder& l, size_t i, double us, double ref_us, double flops) {
  loom::LadderRow r;
  r.step = l.steps[i];
  r.ok = us > 0;
  if (!r.ok) r.error = "verification failed: FAIL rel_fro 1.0\nsecond line";
  r.us = us;
  r.cublas_us = ref_us;
  r.tflops = us > 0 ? flops / (us * 1e6) : 0;
  return r;
}

TEST(LadderPlot, HopperStepsWithAReference) {
  loom::Ladder l = loom::make_ladder("hopper", "");
  const double flops = 2.0 * 4096 * 4096 * 4096;
  const double us[] = {420, 300, 0, 190, 185, 180, 170};  // step 3 did not run
  std::vector<loom::LadderRow> rows;
  for (size_t i = 0; i < l.steps.size(); ++i) rows.push_back(row(l, i, us[i], 175, flops));
  const std::string svg = loom::ladder_svg(l, rows, "NVIDIA H100 80GB HBM3", "2026-11-27T15:00:00Z");
  std::ofstream(testing::TempDir() + "/ladder_plot_hopper.svg") << svg;
  EXPECT_TRUE(has(svg, "<svg xmlns=\"http://www.w3.org/2000/svg\"")) << svg;
  EXPECT_TRUE(has(svg, "loom ladder hopper (bf16)")) << svg;
  EXPECT_TRUE(has(svg, "NVIDIA H100 80GB HBM3 · 2026-11-27T15:00:00Z")) << svg;
  EXPECT_TRUE(has(svg, "TFLOP/s")) << svg;
  for (const auto& s : l.steps) EXPECT_TRUE(has(svg, ">" + s.name + "</text>")) << s.name;
  EXPECT_EQ(count(svg, "fill=\"#4878a8\"><title>"), 6) << svg;  // the six that ran
  EXPECT_EQ(count(svg, ">not run</text>"), 1) << svg;
  EXPECT_TRUE(has(svg, "stroke-dasharray")) << svg;  // the cuBLAS line
  EXPECT_TRUE(has(svg, ">cuBLAS ")) << svg;
  EXPECT_TRUE(has(svg, ">1.03x</text>")) << svg;  // 175 / 170
  EXPECT_TRUE(has(svg, "</svg>\n")) << svg;
}

TEST(LadderPlot, WithoutAReferenceThereIsNoRatioOrLine) {
  loom::Ladder l = loom::make_ladder("flash", "1x2x256x64");
  std::vector<loom::LadderRow> rows;
  for (size_t i = 0; i < l.steps.size(); ++i) rows.push_back(row(l, i, 50.0 + double(i), 0, 1e9));
  const std::string svg = loom::ladder_svg(l, rows, "gpu <&> \"x\"", "now");
  std::ofstream(testing::TempDir() + "/ladder_plot_flash.svg") << svg;
  // Tick labels alike: 0, 5, 10, ... (not 5.00 beside 10.0).
  EXPECT_TRUE(has(svg, "text-anchor=\"end\">5</text>")) << svg;
  EXPECT_TRUE(has(svg, "text-anchor=\"end\">10</text>")) << svg;
  EXPECT_FALSE(has(svg, "stroke-dasharray")) << svg;
  for (char d = '0'; d <= '9'; ++d) EXPECT_FALSE(has(svg, std::string(1, d) + "x</text>")) << svg;
  EXPECT_TRUE(has(svg, "gpu &lt;&amp;&gt; &quot;x&quot;")) << svg;  // escaped
}

TEST(LadderPlot, NothingRanIsAClearError) {
  loom::Ladder l = loom::make_ladder("swizzle", "");
  std::vector<loom::LadderRow> rows;
  for (size_t i = 0; i < l.steps.size(); ++i) rows.push_back(row(l, i, 0, 0, 1e9));
  try {
    loom::ladder_svg(l, rows, "none", "now");
    FAIL() << "plotted nothing";
  } catch (const loom::Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "nothing to plot: no step of the swizzle ladder ran (verification failed: FAIL rel_fro 1.0)");
  }
}

TEST(LadderPlot, OnlySvgPathsAreTaken) {
  EXPECT_NO_THROW(loom::check_plot_path("out/ladder.svg"));
  for (const std::string p : {"ladder.png", "svg", ".svg", "ladder.svg.txt"})
    EXPECT_THROW(loom::check_plot_path(p), loom::Error) << p;
}

}  // namespace
