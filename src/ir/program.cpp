// Tensor declarations and program-level lookups (printers: print.cpp, verifiers: verify.cpp).
#include "ir/program.h"

#include <algorithm>
#include <set>

#include "ir/error.h"

namespace loom {

std::vector<Expr> TensorDecl::strides() const {
  if (pitched()) {
    LOOM_CHECK(pitch.size() + 1 == shape.size(), "a pitch gives every stride but the innermost");
    std::vector<Expr> s = pitch;
    s.push_back(Expr(1));
    return s;
  }
  std::vector<Expr> s(shape.size(), Expr(1));
  for (size_t i = shape.size(); i-- > 1;)
    s[i - 1] = (i == shape.size() - 1 ? shape[i] + pad : shape[i]) * s[i];
  return s;
}

Expr TensorDecl::footprint() const {
  if (shape.empty()) return Expr(1);
  if (pitched()) {
    // One past the last element: the element at (shape - 1) in every dimension.
    const std::vector<Expr> s = strides();
    Expr last(0);
    for (size_t i = 0; i < shape.size(); ++i) last = last + (shape[i] - 1) * s[i];
    return last + 1;
  }
  return shape[0] * strides()[0];
}

void TensorDecl::check_pitch(const Expr::Env& env) const {
  if (!pitched()) return;
  const std::vector<Expr> s = strides();
  // extent: elements one entry of dimensions i+1.. spans, the smallest stride for i.
  int64_t extent = shape.back().eval(env);
  for (size_t i = shape.size() - 1; i-- > 0;) {
    const int64_t stride = s[i].eval(env);
    if (stride < extent) {
      const bool row = i + 2 == shape.size();
      throw Error("tensor " + name + ": its " + (row ? "row pitch" : "stride of dimension " +
                  std::to_string(i)) + " is " + std::to_string(stride) + " elements, below the " +
                  std::to_string(extent) + (row ? " of a row (its width " + shape.back().str() + ")"
                                                : " one entry of the dimensions inside it spans") +
                  ", so elements would overlap; give a " + (row ? "pitch" : "stride") +
                  " of at least " + std::to_string(extent) + " (the buffer's real row length)");
    }
    extent = (shape[i].eval(env) - 1) * stride + extent;
  }
}

int64_t Swizzle::apply(int64_t offset) const {
  if (bits == 0) return offset;
  int64_t mask = ((int64_t(1) << bits) - 1) << (base + shift);
  return offset ^ ((offset & mask) >> shift);
}

int64_t TensorDecl::chunked(int64_t offset) const {
  if (row_chunk <= 0) return offset;
  const int64_t L = shape.back().const_value();
  const int64_t R = shape.size() >= 2 ? shape[shape.size() - 2].const_value() : 1;
  const int64_t slab = offset / (R * L), r = offset % (R * L) / L, c = offset % L;
  return slab * R * L + c / row_chunk * R * row_chunk + r * row_chunk + c % row_chunk;
}

Expr TensorDecl::numel() const {
  Expr n(1);
  for (const Expr& d : shape) n = n * d;
  return n;
}

bool ProgramBase::has_tensor(const std::string& name) const {
  for (const TensorDecl& t : tensors)
    if (t.name == name) return true;
  return false;
}

const TensorDecl& ProgramBase::tensor(const std::string& name) const {
  for (const TensorDecl& t : tensors)
    if (t.name == name) return t;
  std::string known;
  for (const TensorDecl& t : tensors) known += (known.empty() ? "" : ", ") + t.name;
  throw Error("unknown tensor '" + name + "'; the program declares: " +
              (known.empty() ? "no tensors" : known));
}

TensorDecl& ProgramBase::tensor(const std::string& name) {
  return const_cast<TensorDecl&>(static_cast<const ProgramBase&>(*this).tensor(name));
}

const WarpAtom* find_warp_atom(const KernelOp& k, const std::string& id) {
  for (const WarpAtom& w : k.warp_atoms)
    if (w.id == id) return &w;
  return nullptr;
}

const WarpCopy* find_warp_copy(const KernelOp& k, const std::string& id) {
  for (const WarpCopy& w : k.warp_copies)
    if (w.id == id) return &w;
  return nullptr;
}

SharedLayout shared_layout(const KernelProgram& p, const KernelOp& k) {
  std::set<std::string> used;
  walk(k.body, [&](const Stmt& s) {
    for (const auto* name : {&s.tensor, &s.src})
      if (!name->empty() && p.has_tensor(*name) && p.tensor(*name).role == TensorRole::Shared)
        used.insert(*name);
  });
  SharedLayout l;
  for (const auto& t : p.tensors) {
    if (!used.count(t.name)) continue;
    Expr n = t.footprint();
    if (!n.is_const())
      throw Error("shared tensor " + t.name + " has a symbolic size " + n.str());
    int64_t& end = l.part_bytes[t.overlay];
    end = (end + 127) / 128 * 128;
    l.offset_bytes[t.name] = end;
    end += n.const_value() * dtype_bytes(t.dtype);
    l.total_bytes = std::max(l.total_bytes, end);
  }
  return l;
}

}  // namespace loom
