// Tensor declarations and program-level lookups (printers: print.cpp, verifiers: verify.cpp).
#include "ir/program.h"

#include "ir/error.h"

namespace loom {

std::vector<Expr> TensorDecl::strides() const {
  std::vector<Expr> s(shape.size(), Expr(1));
  for (size_t i = shape.size(); i-- > 1;) s[i - 1] = shape[i] * s[i];
  return s;
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

}  // namespace loom
