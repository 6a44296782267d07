#include "tune/tuning_key.h"

#include <charconv>
#include <set>
#include <tuple>

#include "ir/error.h"

namespace loom::tune {
namespace {

// Role names of the contraction's output dims: [batch,] M, N.
std::vector<std::string> result_roles(const Node& mm) {
  std::vector<std::string> r;
  for (size_t i = 0; i + 2 < mm.shape.size(); ++i) r.push_back(i ? "batch" + std::to_string(i) : "batch");
  r.push_back("M");
  r.push_back("N");
  return r;
}

std::string dims_text(std::vector<std::string> logical, bool transposed) {
  if (transposed && logical.size() >= 2) std::swap(logical[logical.size() - 2], logical.back());
  std::string s = "[";
  for (size_t i = 0; i < logical.size(); ++i) s += (i ? "," : "") + logical[i];
  return s + "]";
}

struct Signer {
  const Graph& g;
  std::vector<std::string> out_roles;  // roles of the contraction's (and the result's) dims

  std::string input(const Node& n, const std::vector<std::string>& logical_roles) const {
    // A view's strides key apart from the dense tensor: they decide which copies are
    // legal (a dense row's TMA record would be refused for a pitch of odd 16-byte units).
    std::string dims = dims_text(logical_roles, n.transposed);
    for (size_t i = 0; i < n.pitch.size(); ++i)
      dims.insert(dims.size() - 1, (i ? "," : "|") + std::to_string(n.pitch[i]));
    return std::string(dtype_name(n.dtype)) + dims + (n.transposed ? ".T" : "");
  }

  // An elementwise operand broadcasts against the result from the right (numpy): each of
  // its dims is the result's dim at that place, or a broadcast 1.
  std::string broadcast_operand(const Node& n, const Node& against) const {
    std::vector<std::string> roles(n.shape.size());
    size_t off = against.shape.size() - n.shape.size();
    for (size_t i = 0; i < n.shape.size(); ++i)
      roles[i] = n.shape[i] == against.shape[off + i] ? out_roles[off + i] : "1";
    return input(n, roles);
  }

  std::string node(const Node& n) const {
    const std::string dt = std::string(":") + dtype_name(n.dtype);
    switch (n.kind) {
      case OpKind::Input:
        return input(n, out_roles);
      case OpKind::Matmul: {
        // An operand without batch dims (shared by every entry) has none in its roles, so
        // [B,M,K] x [K,N] keys apart from [B,M,K] x [B,K,N].
        const Node& na = g.node(n.inputs[0]);
        const Node& nb = g.node(n.inputs[1]);
        const auto batch_of = [&](const Node& x) {
          return std::vector<std::string>(out_roles.end() - 2 - long(x.shape.size() - 2),
                                          out_roles.end() - 2);
        };
        std::vector<std::string> a = batch_of(na), b = batch_of(nb);
        a.insert(a.end(), {"M", "K"});
        b.insert(b.end(), {"K", "N"});
        return "matmul(" + input(na, a) + ", " + input(nb, b) + ")" + dt;
      }
      case OpKind::Unary:
        return n.name + "(" + node(g.node(n.inputs[0])) + ")" + dt;
      case OpKind::Binary: {
        std::string rhs = n.inputs.size() > 1 ? broadcast_operand(g.node(n.inputs[1]), n) : "scalar";
        return n.name + "(" + node(g.node(n.inputs[0])) + ", " + rhs + ")" + dt;
      }
      case OpKind::Attention:
        break;  // never reached: contraction() refuses a graph without a matmul first
    }
    LOOM_CHECK(false, "unknown op kind");
  }
};

// Attention's signature: the operands' dtype and roles, the mask and whether LSE is a
// result. The scale is left out, like an elementwise immediate: it is one multiply
// folded into the softmax and does not change the schedule. The serving forms
// (docs/attention.md) name their own roles, so no dense record lands on them: paged KV
// reads K and V as pools [P,Hkv,page,D] through a block table [B,maxp] and lengths [B];
// packed sequences (varlen) read Q [Tq,Hq,D] and K, V [Tk,Hkv,D] through two cumulative
// length arrays of B + 1 entries, and max_seqlen_q (Sq) sizes the grid.
std::string attention_signature(const Graph& g, const Node& a) {
  const std::string q = dtype_name(g.node(a.inputs[0]).dtype);
  const std::string kv = dtype_name(g.node(a.inputs[1]).dtype);
  std::string operands;
  if (a.paged_attention())
    operands = q + "[B,Hq,Sq,D], " + kv + "[P,Hkv,page,D], " + kv + "[P,Hkv,page,D], i32[B,maxp], i32[B]";
  else if (a.varlen_attention())
    operands = q + "[Tq,Hq,D], " + kv + "[Tk,Hkv,D], " + kv + "[Tk,Hkv,D], i32[Bplus1], i32[Bplus1], max_seqlen_q=Sq";
  else
    operands = q + "[B,Hq,Sq,D], " + kv + "[B,Hkv,Sk,D], " + kv + "[B,Hkv,Sk,D]";
  return "attention(" + operands + ", causal=" + causal_name(a.attention.causal) +
         (a.attention.lse ? ", lse=true" : "") + "):" + dtype_name(a.dtype);
}

// The sizes of a bound attention graph, named as its signature names them.
std::string attention_shape(const Graph& g, const Node& a) {
  const Node& q = g.node(a.inputs[0]);
  const Node& k = g.node(a.inputs[1]);
  auto v = [](const Dim& d) { return std::to_string(d.value); };
  if (a.paged_attention()) {
    const Node& table = g.node(a.inputs[3]);
    return "B=" + v(q.shape[0]) + ",Hq=" + v(q.shape[1]) + ",Sq=" + v(q.shape[2]) + ",D=" + v(q.shape[3]) +
           ",P=" + v(k.shape[0]) + ",Hkv=" + v(k.shape[1]) + ",page=" + v(k.shape[2]) +
           ",maxp=" + v(table.shape[1]);
  }
  if (a.varlen_attention()) {
    const Node& cu = g.node(a.inputs[3]);
    return "Tq=" + v(q.shape[0]) + ",Hq=" + v(q.shape[1]) + ",D=" + v(q.shape[2]) + ",Tk=" + v(k.shape[0]) +
           ",Hkv=" + v(k.shape[1]) + ",Bplus1=" + v(cu.shape[0]) +
           ",Sq=" + std::to_string(a.attention.max_seqlen_q);
  }
  return "B=" + v(q.shape[0]) + ",Hq=" + v(q.shape[1]) + ",Hkv=" + v(k.shape[1]) +
         ",Sq=" + v(q.shape[2]) + ",Sk=" + v(k.shape[2]) + ",D=" + v(q.shape[3]);
}

const Node& contraction(const Graph& g) {
  for (const Node& n : g.nodes)
    if (n.kind == OpKind::Matmul) return n;
  throw Error("the expression has no contraction (matmul, bmm or linear): nothing to tune");
}

}  // namespace

std::string TuningKey::str() const {
  return gpu + " (" + std::to_string(sm_count) + " SMs, CUDA " + cuda_version_text(cuda_runtime) +
         ", driver " + cuda_version_text(driver) + ") | " + op + " | " + shape;
}

bool TuningKey::same_problem(const TuningKey& o) const {
  return std::tie(gpu, sm_count, op, shape) == std::tie(o.gpu, o.sm_count, o.op, o.shape);
}

std::string op_signature(const Graph& g) {
  if (const Node* a = g.attention()) return attention_signature(g, *a);
  const Node& mm = contraction(g);
  Signer s{g, result_roles(mm)};
  return s.node(g.node(g.result()));
}

std::optional<TuningKey> key_for(const Graph& g, const DeviceInfo& dev, std::string* why_not) {
  // A contraction keys each run-time size as `*` (M=*, and N=*, K=* for a run-time N or
  // K): one kernel serves every value of it, so one record does, apart from every bound
  // size's record (its defaults differ too: families/wgmma.cpp, symbolic_wgmma_defaults). A
  // record replaces the defaults' kernel per range of a run-time M with its one kernel
  // (driver/size_variants.h). Attention's defaults do not depend on its
  // lengths, and its records stay per shape.
  for (const Node& n : g.nodes)
    for (const Dim& d : n.shape)
      if (d.is_sym() && g.attention()) {
        if (why_not)
          *why_not = "dimension " + d.sym + " has no value (bind it with --dims " + d.sym +
                     "=<size>): tuning records are per shape";
        return std::nullopt;
      }
  TuningKey k;
  k.gpu = dev.name;
  k.sm_count = dev.sm_count;
  k.cuda_runtime = dev.runtime_version;
  k.driver = dev.driver_version;
  if (const Node* a = g.attention()) {
    k.op = attention_signature(g, *a);
    k.shape = attention_shape(g, *a);
    return k;
  }
  const Node& mm = contraction(g);
  std::vector<std::string> roles = result_roles(mm);
  std::string shape;
  auto size = [](const Dim& d) { return d.is_sym() ? std::string(kRunTimeSize) : std::to_string(d.value); };
  for (size_t i = 0; i < roles.size(); ++i)
    shape += (i ? "," : "") + roles[i] + "=" + size(mm.shape[i]);
  shape += ",K=" + size(g.node(mm.inputs[0]).shape.back());

  k.op = op_signature(g);
  k.shape = shape;
  return k;
}

std::string cuda_version_text(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

namespace {

bool is_word_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

bool is_name(std::string_view w) {
  if (w.empty() || !((w[0] >= 'a' && w[0] <= 'z') || (w[0] >= 'A' && w[0] <= 'Z'))) return false;
  for (char c : w)
    if (!is_word_char(c) || c == '_') return false;
  return true;
}

// Reads an op signature in the grammar op_signature prints, collecting the dim names it
// uses; false with the reason (and where) on the first thing that does not fit.
class SignatureReader {
 public:
  explicit SignatureReader(std::string_view s) : s_(s) {}

  bool read() {
    std::string_view name = word();
    if (!peek('(')) return fail("expected an op call such as matmul(...)");
    if (!call(name, /*top=*/true)) return false;
    if (i_ != s_.size()) return fail("unexpected text");
    if (matmuls_ == 0 && !attention_) return fail("no matmul or attention in the op");
    return true;
  }
  const std::set<std::string>& dims() const { return dims_; }
  bool attention() const { return attention_; }
  const std::string& why() const { return why_; }

 private:
  std::string_view s_;
  size_t i_ = 0;
  std::set<std::string> dims_;
  int matmuls_ = 0;
  bool attention_ = false;
  std::string why_;

  bool fail(const std::string& what) {
    if (why_.empty()) why_ = what + " at character " + std::to_string(i_ + 1);
    return false;
  }
  bool peek(char c) const { return i_ < s_.size() && s_[i_] == c; }
  bool eat(std::string_view t) {
    if (s_.substr(i_, t.size()) != t) return false;
    i_ += t.size();
    return true;
  }
  std::string_view word() {
    size_t b = i_;
    while (i_ < s_.size() && is_word_char(s_[i_])) ++i_;
    return s_.substr(b, i_ - b);
  }
  bool dtype(std::string_view w) {
    if (parse_dtype(w)) return true;
    return fail("'" + quoted_text(w) + "' is not a dtype (f32, tf32, f16, bf16, f64)");
  }

  // dtype[D1,D2,...][.T], the dtype word already read.
  bool operand(std::string_view dt) {
    if (!dtype(dt) || !eat("[")) return fail("expected '['");
    do {
      std::string_view d = word();
      if (d == "1") continue;  // a broadcast dim
      if (!is_name(d)) return fail("expected a dim name (M, N, K, batch, B, Hq, ...) or 1");
      dims_.insert(std::string(d));
    } while (eat(","));
    if (eat("|")) {  // a view's strides, numbers
      do {
        std::string_view d = word();
        if (d.empty() || d.find_first_not_of("0123456789") != std::string_view::npos)
          return fail("expected a stride (a number) after '|'");
      } while (eat(","));
    }
    if (!eat("]")) return fail("expected ']'");
    eat(".T");
    return true;
  }

  enum class Arg { call, operand, scalar, causal, lse, max_seqlen_q };

  bool arg(Arg& kind, bool in_attention) {
    std::string_view w = word();
    if (w.empty()) return fail("expected an operand");
    if (peek('(')) {
      kind = Arg::call;
      return call(w, false);
    }
    if (peek('[')) {
      kind = Arg::operand;
      return operand(w);
    }
    if (eat("=")) {
      std::string_view v = word();
      if (in_attention && w == "causal" && (v == "false" || v == "true" || v == "top_left")) {
        kind = Arg::causal;
        return true;
      }
      if (in_attention && w == "lse" && v == "true") {
        kind = Arg::lse;
        return true;
      }
      if (in_attention && w == "max_seqlen_q" && is_name(v)) {  // varlen: the dim that sizes the grid
        kind = Arg::max_seqlen_q;
        dims_.insert(std::string(v));
        return true;
      }
      return fail("'" + quoted_text(w) + "=" + quoted_text(v) + "' is not an attention option");
    }
    if (w == "scalar") {
      kind = Arg::scalar;
      return true;
    }
    return fail("'" + quoted_text(w) + "' is not an operand");
  }

  // name(args):dtype, the name already read and '(' next.
  bool call(std::string_view name, bool top) {
    if (name.empty() || !(name[0] >= 'a' && name[0] <= 'z'))
      return fail("expected an op name");
    const bool attention = name == "attention";
    if (attention && !top) return fail("attention inside another op");
    eat("(");
    std::vector<Arg> args;
    do {
      Arg kind{};
      if (!arg(kind, attention)) return false;
      args.push_back(kind);
    } while (eat(", "));
    if (!eat("):")) return fail("expected '):' after the operands of " + quoted_text(name));
    if (!dtype(word())) return false;
    auto is = [&](size_t k, Arg a) { return args.size() > k && args[k] == a; };
    if (attention) {
      attention_ = true;
      // q, k, v (dense), or q, k, v and two i32 operands: paged (block table, lengths) or
      // varlen (cumulative lengths twice, then max_seqlen_q=); then causal= and lse=true.
      size_t n = 0;
      while (is(n, Arg::operand)) ++n;
      if (n == 5 && is(n, Arg::max_seqlen_q)) ++n;
      bool ok = (n == 3 || n == 5 || n == 6) && is(n, Arg::causal) &&
                (args.size() == n + 1 || (args.size() == n + 2 && is(n + 1, Arg::lse)));
      return ok || fail("attention takes q, k, v (and a paged or varlen form's two i32 operands, "
                        "varlen's max_seqlen_q=), causal= and an optional lse=true");
    }
    if (name == "matmul") {
      ++matmuls_;
      return (args.size() == 2 && is(0, Arg::operand) && is(1, Arg::operand)) ||
             fail("matmul takes two operands");
    }
    for (Arg a : args)
      if (a == Arg::causal || a == Arg::lse || a == Arg::max_seqlen_q)
        return fail("an attention option outside attention");
    bool ok = (args.size() == 1 && (is(0, Arg::call) || is(0, Arg::operand))) ||
              (args.size() == 2 && (is(0, Arg::call) || is(0, Arg::operand)) &&
               (is(1, Arg::operand) || is(1, Arg::scalar)));
    return ok || fail(quoted_text(name) + " takes one or two operands");
  }
};

}  // namespace

std::string quoted_text(std::string_view text, size_t max_bytes) {
  std::string o;
  for (size_t i = 0; i < text.size() && i < max_bytes; ++i) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f) {
      o += char(c);
    } else {
      o += "\\x";
      o += "0123456789abcdef"[c >> 4];
      o += "0123456789abcdef"[c & 15];
    }
  }
  return text.size() > max_bytes ? o + "..." : o;
}

std::string text_problem(const std::string& what, std::string_view text, size_t max_bytes,
                         bool allow_tab) {
  if (text.size() > max_bytes)
    return what + " is " + std::to_string(text.size()) + " bytes long (at most " +
           std::to_string(max_bytes) + ")";
  for (size_t i = 0; i < text.size();) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      if ((c < 0x20 && !(c == '\t' && allow_tab)) || c == 0x7f)
        return what + " holds a control character (byte " + std::to_string(c) + " at " +
               std::to_string(i + 1) + ")";
      ++i;
      continue;
    }
    // UTF-8: the lead byte gives the length; continuation bytes are 10xxxxxx.
    int n = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 ? (c <= 0xef ? 3 : 0) : c >= 0xc2 ? 2 : 0;
    if (n == 0 || i + size_t(n) > text.size()) return what + " is not valid UTF-8";
    uint32_t cp = c & (0x7f >> n);
    for (int k = 1; k < n; ++k) {
      unsigned char cc = static_cast<unsigned char>(text[i + size_t(k)]);
      if ((cc & 0xc0) != 0x80) return what + " is not valid UTF-8";
      cp = (cp << 6) | (cc & 0x3f);
    }
    if ((n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)))
      return what + " is not valid UTF-8";
    if (cp >= 0x80 && cp <= 0x9f)
      return what + " holds a control character (U+00" + "0123456789ABCDEF"[cp >> 4] +
             "0123456789ABCDEF"[cp & 15] + ")";
    i += size_t(n);
  }
  return "";
}

std::string key_problem(const TuningKey& k) {
  if (k.gpu.empty()) return "the gpu name is empty";
  if (std::string why = text_problem("the gpu name", k.gpu, 256); !why.empty()) return why;
  if (k.sm_count < 1 || k.sm_count > 10000)
    return "sms=" + std::to_string(k.sm_count) + " is not an SM count (1..10000)";
  if (k.cuda_runtime < 0 || k.cuda_runtime > 999999 || k.driver < 0 || k.driver > 999999)
    return "cuda and driver must be CUDA version numbers such as 13000 (0 when unknown)";
  if (k.op.size() > 4096) return "the op is longer than 4096 bytes";
  SignatureReader sig(k.op);
  if (!sig.read()) return "the op '" + quoted_text(k.op, 120) + "' does not parse: " + sig.why();
  if (k.shape.size() > 1024) return "the shape is longer than 1024 bytes";
  std::set<std::string> names;
  std::string_view rest = k.shape;
  while (true) {
    size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    size_t eq = item.find('=');
    std::string_view name = item.substr(0, eq), value = eq == std::string_view::npos ? "" : item.substr(eq + 1);
    int64_t size = 0;
    auto r = std::from_chars(value.data(), value.data() + value.size(), size);
    const bool run_time = value == kRunTimeSize && !sig.attention();
    if (!is_name(name) || value.empty() ||
        (!run_time && (r.ec != std::errc() || r.ptr != value.data() + value.size() || size < 1 ||
                       size > (int64_t(1) << 40))))
      return "the shape '" + quoted_text(k.shape, 120) + "' is not NAME=SIZE pairs (sizes 1..2^40, "
             "or * for a contraction's run-time size), e.g. M=4096,N=4096,K=4096 or M=*,N=4096,K=4096";
    if (!names.insert(std::string(name)).second)
      return "the shape names " + quoted_text(name) + " twice";
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  if (names != sig.dims()) {
    std::string op_dims, shape_dims;
    for (const auto& d : sig.dims()) op_dims += (op_dims.empty() ? "" : ",") + d;
    for (const auto& d : names) shape_dims += (shape_dims.empty() ? "" : ",") + d;
    return "the shape's sizes (" + shape_dims + ") are not the op's dims (" + op_dims + ")";
  }
  return "";
}

}  // namespace loom::tune
