#include "ir/warn_once.h"

#include <iostream>
#include <mutex>
#include <set>

namespace loom {

bool warn_once(const std::string& message) {
  static std::mutex mutex;
  static std::set<std::string> printed;
  std::lock_guard<std::mutex> lock(mutex);
  if (!printed.insert(message).second) return false;
  std::cerr << "loom: warning: " << message << "\n";
  return true;
}

}  // namespace loom
