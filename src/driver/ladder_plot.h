// `loom ladder NAME --plot FILE.svg`: the steps of a ladder as a bar chart written by Loom
// (no plotting library): one bar per step (x) at its TFLOP/s (y), labelled with the
// ratio to the reference (cuBLAS) when the ladder has one, a dashed line at the
// reference's TFLOP/s, and a title naming the ladder, the problem, the GPU and the date.
#pragma once
#include <string>
#include <vector>

#include "driver/ladder.h"

namespace loom {

// Throws loom::Error unless `path` names an .svg file (Loom writes SVG only; a PNG comes
// from converting it, e.g. rsvg-convert FILE.svg -o FILE.png).
void check_plot_path(const std::string& path);

// The SVG document. Throws loom::Error when no step ran (nothing was timed: no GPU, or
// every step failed), quoting the first step's error.
std::string ladder_svg(const Ladder& l, const std::vector<LadderRow>& rows, const std::string& gpu,
                       const std::string& date);

}  // namespace loom
