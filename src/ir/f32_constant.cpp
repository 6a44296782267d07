#include "ir/f32_constant.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>

namespace loom {
std::string shortest_text(double v) {
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

std::string f32_constant_problem(double v) {
  if (std::isnan(v)) return "is not a number";
  const double limit = double(std::numeric_limits<float>::max());
  char range[160];
  std::snprintf(range, sizeof range, "f32 holds magnitudes up to %.9g and down to %.9g",
                limit, double(std::numeric_limits<float>::denorm_min()));
  // Round to nearest even: from FLT_MAX + half an ulp up rounds to infinity, and up to
  // 2^-150 (half the smallest subnormal, a tie going to the even 0) rounds to 0.
  if (std::fabs(v) >= 0x1.ffffffp+127) return std::string("overflows f32 (") + range + ")";
  if (v != 0.0 && std::fabs(v) <= 0x1p-150) return std::string("rounds to 0 in f32 (") + range + ")";
  return "";
}

std::string attention_scale_problem(double scale) {
  if (std::string why = f32_constant_problem(scale); !why.empty()) return why;
  if (std::string why = f32_constant_problem(scale * M_LOG2E); !why.empty())
    return "gives scale·log2(e) = " + shortest_text(scale * M_LOG2E) + ", which " + why +
           " (the kernels' exponent multiplier)";
  return "";
}

}  // namespace loom
