// Unified line diff (Myers' O((N+M)D) shortest edit script). A pass usually changes a
// few lines of a few hundred, so the common prefix and suffix are stripped first and D
// stays small; the per-step frontier snapshots then cost O(D^2) memory at most.
#include "ir/diff.h"

#include <algorithm>
#include <unordered_map>
#include <vector>

namespace loom {
namespace {

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

enum class Edit : char { Keep = ' ', Del = '-', Ins = '+' };

// Shortest edit script turning a into b (lines interned as ints).
std::vector<Edit> myers(const std::vector<int>& a, const std::vector<int>& b) {
  const int n = int(a.size()), m = int(b.size()), max = n + m;
  std::vector<int> v(size_t(2 * max + 3), 0);
  auto V = [&](int k) -> int& { return v[size_t(k + max + 1)]; };
  std::vector<std::vector<int>> trace;  // trace[d][k + d] = furthest x on diagonal k
  int found = -1;
  for (int d = 0; d <= max && found < 0; ++d) {
    for (int k = -d; k <= d; k += 2) {
      int x = (k == -d || (k != d && V(k - 1) < V(k + 1))) ? V(k + 1) : V(k - 1) + 1;
      int y = x - k;
      while (x < n && y < m && a[size_t(x)] == b[size_t(y)]) ++x, ++y;
      V(k) = x;
      if (x >= n && y >= m) found = d;
    }
    trace.emplace_back(v.begin() + (max + 1 - d), v.begin() + (max + 2 + d));
  }
  std::vector<Edit> edits;
  int x = n, y = m;
  for (int d = found; d > 0; --d) {
    const std::vector<int>& prev = trace[size_t(d - 1)];
    auto P = [&](int k) { return prev[size_t(k + d - 1)]; };
    int k = x - y;
    bool down = k == -d || (k != d && P(k - 1) < P(k + 1));
    int pk = down ? k + 1 : k - 1;
    int px = P(pk), py = px - pk;
    while (x > px && y > py) {  // the snake after the move is all matches
      edits.push_back(Edit::Keep);
      --x, --y;
    }
    edits.push_back(down ? Edit::Ins : Edit::Del);
    x = px, y = py;
  }
  for (; x > 0; --x) edits.push_back(Edit::Keep);
  std::reverse(edits.begin(), edits.end());
  return edits;
}

}  // namespace

std::string unified_diff(const std::string& before, const std::string& after, int context) {
  const std::vector<std::string> a = split_lines(before), b = split_lines(after);
  size_t pre = 0;
  while (pre < a.size() && pre < b.size() && a[pre] == b[pre]) ++pre;
  size_t suf = 0;
  while (suf < a.size() - pre && suf < b.size() - pre &&
         a[a.size() - 1 - suf] == b[b.size() - 1 - suf])
    ++suf;
  if (pre == a.size() && pre == b.size()) return "";

  std::unordered_map<std::string, int> ids;
  auto intern = [&](const std::vector<std::string>& lines) {
    std::vector<int> out;
    for (size_t i = pre; i < lines.size() - suf; ++i)
      out.push_back(ids.emplace(lines[i], int(ids.size())).first->second);
    return out;
  };
  std::vector<Edit> edits(pre, Edit::Keep);
  for (Edit e : myers(intern(a), intern(b))) edits.push_back(e);
  edits.insert(edits.end(), suf, Edit::Keep);

  // Line numbers in a and b before each edit, to label hunks and fetch the text.
  const size_t ne = edits.size();
  std::vector<size_t> ai(ne + 1, 0), bi(ne + 1, 0);
  for (size_t i = 0; i < ne; ++i) {
    ai[i + 1] = ai[i] + (edits[i] != Edit::Ins);
    bi[i + 1] = bi[i] + (edits[i] != Edit::Del);
  }

  const size_t ctx = size_t(std::max(context, 0));
  std::string out;
  size_t i = 0;
  while (i < ne) {
    while (i < ne && edits[i] == Edit::Keep) ++i;
    if (i == ne) break;
    size_t start = i > ctx ? i - ctx : 0;
    // Extend the hunk while the next change is within 2*context unchanged lines.
    size_t end = i;
    while (true) {
      while (end < ne && edits[end] != Edit::Keep) ++end;
      size_t next = end;
      while (next < ne && edits[next] == Edit::Keep) ++next;
      if (next < ne && next - end <= 2 * ctx) {
        end = next;
        continue;
      }
      end = std::min(ne, end + ctx);
      break;
    }
    size_t acount = ai[end] - ai[start], bcount = bi[end] - bi[start];
    // An empty side is labelled with the line before it, as diff -u does.
    size_t astart = acount ? ai[start] + 1 : ai[start];
    size_t bstart = bcount ? bi[start] + 1 : bi[start];
    out += "@@ -" + std::to_string(astart) + "," + std::to_string(acount) + " +" +
           std::to_string(bstart) + "," + std::to_string(bcount) + " @@\n";
    for (size_t j = start; j < end; ++j) {
      const std::string& line = edits[j] == Edit::Ins ? b[bi[j]] : a[ai[j]];
      out += char(edits[j]);
      out += line;
      out += '\n';
    }
    i = end;
  }
  return out;
}

}  // namespace loom
