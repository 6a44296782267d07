#include "bench/timing_plan.h"

#include <algorithm>
#include <cstdio>

#include "ir/error.h"

namespace loom {
namespace {

std::string mib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", double(bytes) / (1 << 20));
  return buf;
}

std::string times(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1fx", v);
  return buf;
}

}  // namespace

L2Request parse_l2_request(const std::string& text) {
  if (text == "auto") return L2Request::automatic;
  if (text == "off") return L2Request::off;
  if (text == "flush") return L2Request::flush;
  if (text == "read") return L2Request::read;
  if (text == "rotate") return L2Request::rotate;
  throw Error("--l2 " + text +
              ": expected auto (rotate inputs under L2, else read), rotate, read, flush or off");
}

const char* l2_method_name(L2Method m) {
  switch (m) {
    case L2Method::off: return "off";
    case L2Method::flush: return "flush";
    case L2Method::read: return "read";
    case L2Method::rotate: return "rotate";
  }
  return "?";
}

L2Method l2_method_from_name(const std::string& name) {
  for (L2Method m : {L2Method::off, L2Method::flush, L2Method::read, L2Method::rotate})
    if (name == l2_method_name(m)) return m;
  throw Error("unknown L2 method '" + name + "': expected off, flush, read or rotate");
}

int rotation_sets(int64_t set_bytes, int64_t l2_bytes, int64_t budget_bytes) {
  if (set_bytes <= 0 || l2_bytes <= 0) return 0;
  const int64_t need = std::max<int64_t>(2, (2 * l2_bytes + set_bytes - 1) / set_bytes);
  if (need > kMaxInputSets || need * set_bytes > budget_bytes) return 0;
  return int(need);
}

L2Plan plan_l2(L2Request req, int64_t set_bytes, int64_t l2_bytes, int64_t budget_bytes) {
  L2Plan p;
  p.set_bytes = set_bytes;
  p.l2_bytes = l2_bytes;
  const int r = rotation_sets(set_bytes, l2_bytes, budget_bytes);
  switch (req) {
    case L2Request::off: p.method = L2Method::off; p.why = "--l2 off"; return p;
    case L2Request::flush: p.method = L2Method::flush; p.why = "--l2 flush"; return p;
    case L2Request::read: p.method = L2Method::read; p.why = "--l2 read"; return p;
    case L2Request::rotate:
      if (r == 0)
        throw Error("--l2 rotate: 2x L2 (" + mib(2 * l2_bytes) + ") in input sets of " +
                    mib(set_bytes) + " needs more than " + std::to_string(kMaxInputSets) +
                    " sets or more than the " + mib(budget_bytes) +
                    " of device memory set aside for them; use --l2 read");
      p.method = L2Method::rotate;
      p.sets = r;
      p.why = "--l2 rotate";
      return p;
    case L2Request::automatic: break;
  }
  if (set_bytes < l2_bytes && r > 0) {
    p.method = L2Method::rotate;
    p.sets = r;
    p.why = "auto: inputs under L2";
  } else {
    p.method = L2Method::read;
    p.why = set_bytes >= l2_bytes ? "auto: inputs of L2 size or more"
                                  : "auto: too many input sets needed to rotate";
  }
  return p;
}

std::string describe_l2(const L2Plan& p) {
  const std::string buffer = mib(2 * p.l2_bytes);
  const std::string why = p.why.empty() ? "" : " (" + p.why + ")";
  switch (p.method) {
    case L2Method::off: return "off: L2 left warm" + why;
    case L2Method::flush:
      return "flush: write " + buffer + " before each rep, leaving dirty lines" + why;
    case L2Method::read:
      return "read: a kernel reads " + buffer + " before each rep, leaving clean lines" + why;
    case L2Method::rotate: {
      const int64_t total = int64_t(p.sets) * p.set_bytes;
      return "rotate over " + std::to_string(p.sets) + " input sets of " + mib(p.set_bytes) +
             " (" + mib(total) + " = " +
             times(p.l2_bytes > 0 ? double(total) / double(p.l2_bytes) : 0) + " L2), no flush" +
             why;
    }
  }
  return "?";
}

}  // namespace loom
