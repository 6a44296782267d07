// include/loom/loom_c.h over loom::Plan. Every entry point catches everything: no C++
// exception crosses into C. A handle is the address of a loom_plan_s the registry keeps
// alive by shared_ptr: a call holds its own reference while it runs, so a destroy on
// another thread frees the plan only when that call ends, and an unknown or destroyed
// handle is refused instead of dereferenced.
#include "loom/loom_c.h"

#include <mutex>
#include <new>
#include <string>
#include <unordered_map>

#include "loom/plan.h"
#include "driver/run.h"

struct loom_plan_s {
  explicit loom_plan_s(loom::Plan p)
      : plan(std::move(p)), knobs(plan.knobs_string()), description(plan.describe()) {
    for (const auto& r : plan.runtime_sizes()) runtime_sizes += (runtime_sizes.empty() ? "" : ",") + r;
  }
  loom::Plan plan;
  std::string knobs;
  std::string description;
  std::string runtime_sizes;
};

namespace {

#define LOOM_STR2(x) #x
#define LOOM_STR(x) LOOM_STR2(x)
constexpr const char* kVersion =
    LOOM_STR(LOOM_VERSION_MAJOR) "." LOOM_STR(LOOM_VERSION_MINOR) "." LOOM_STR(LOOM_VERSION_PATCH);

thread_local std::string last_error;
thread_local std::string no_gpu_text;

std::mutex registry_mu;
std::unordered_map<loom_plan_t, std::shared_ptr<loom_plan_s>>& registry() {
  static auto* r = new std::unordered_map<loom_plan_t, std::shared_ptr<loom_plan_s>>();
  return *r;  // never destroyed: plans a program leaks outlive static destruction
}

loom_status fail(loom_status s, std::string message) noexcept {
  try {
    last_error = std::move(message);
  } catch (...) {  // no memory for the message: keep the status, clear the text
    last_error.clear();
  }
  return s;
}

std::shared_ptr<loom_plan_s> lookup(loom_plan_t plan) {
  std::lock_guard<std::mutex> lock(registry_mu);
  auto it = registry().find(plan);
  return it == registry().end() ? nullptr : it->second;
}

loom_status bad_handle(const char* fn, loom_plan_t plan) {
  return fail(LOOM_ERROR_INVALID_HANDLE,
              std::string(fn) + ": " +
                  (plan ? "this loom_plan_t is not a live plan (destroyed already, or never "
                          "made by loom_plan_create): pass a handle loom_plan_create returned"
                        : "the plan is NULL: pass a handle loom_plan_create returned"));
}

// Runs `body` with the live plan, mapping every exception to a status: ArgumentError
// and NoGpuError by type, any other loom::Error to `other`.
template <class Body>
loom_status with_plan(const char* fn, loom_plan_t handle, loom_status other, Body body) {
  std::shared_ptr<loom_plan_s> p = lookup(handle);
  if (!p) return bad_handle(fn, handle);
  try {
    body(*p);
    return LOOM_SUCCESS;
  } catch (const loom::ArgumentError& e) {
    return fail(LOOM_ERROR_INVALID_ARGUMENT, e.what());
  } catch (const loom::NoGpuError& e) {
    return fail(LOOM_ERROR_NO_GPU, e.what());
  } catch (const loom::Error& e) {
    return fail(other, e.what());
  } catch (const std::bad_alloc&) {
    return fail(LOOM_ERROR_INTERNAL, std::string(fn) + ": out of host memory");
  } catch (const std::exception& e) {
    return fail(LOOM_ERROR_INTERNAL, std::string(fn) + ": " + e.what());
  } catch (...) {
    return fail(LOOM_ERROR_INTERNAL, std::string(fn) + ": unknown exception");
  }
}

loom_status null_arg(const char* fn, const char* what) {
  return fail(LOOM_ERROR_INVALID_ARGUMENT, std::string(fn) + ": " + what + " is NULL: pass a valid pointer");
}

// The three execute entry points: `names` NULL means positional.
loom_status execute(const char* fn, loom_plan_t plan, const char* const* names, void* const* ptrs,
                    size_t count, const char* const* size_names, const int64_t* size_values,
                    size_t size_count, struct CUstream_st* stream) {
  if (!lookup(plan)) return bad_handle(fn, plan);
  if (count && !ptrs) return null_arg(fn, "ptrs");
  if (size_count && !size_names) return null_arg(fn, "size_names");
  if (size_count && !size_values) return null_arg(fn, "size_values");
  for (size_t i = 0; names && i < count; ++i)
    if (!names[i]) return null_arg(fn, ("names[" + std::to_string(i) + "]").c_str());
  for (size_t i = 0; i < size_count; ++i)
    if (!size_names[i]) return null_arg(fn, ("size_names[" + std::to_string(i) + "]").c_str());
  return with_plan(fn, plan, LOOM_ERROR_CUDA, [&](loom_plan_s& p) {
    std::map<std::string, int64_t> sizes;
    for (size_t i = 0; i < size_count; ++i)
      if (!sizes.emplace(size_names[i], size_values[i]).second)
        throw loom::ArgumentError(std::string(fn) + ": size " + size_names[i] +
                                  " is given twice: pass each run-time size once");
    if (!names) {
      p.plan.execute(std::vector<void*>(ptrs, ptrs + count), sizes, stream);
      return;
    }
    std::map<std::string, void*> m;
    for (size_t i = 0; i < count; ++i)
      if (!m.emplace(names[i], ptrs[i]).second)
        throw loom::ArgumentError(std::string(fn) + ": tensor " + names[i] +
                                  " is named twice: pass one pointer per tensor");
    p.plan.execute(m, sizes, stream);
  });
}

}  // namespace

extern "C" {

const char* loom_version(void) { return kVersion; }

const char* loom_status_string(loom_status status) {
  switch (status) {
    case LOOM_SUCCESS: return "success";
    case LOOM_ERROR_INVALID_ARGUMENT: return "invalid argument";
    case LOOM_ERROR_INVALID_HANDLE: return "invalid plan handle";
    case LOOM_ERROR_COMPILE: return "compile error";
    case LOOM_ERROR_NO_GPU: return "no usable GPU";
    case LOOM_ERROR_CUDA: return "CUDA error";
    case LOOM_ERROR_OUT_OF_RANGE: return "index out of range";
    case LOOM_ERROR_INTERNAL: return "internal error";
  }
  return "unknown loom_status";
}

const char* loom_last_error(void) { return last_error.c_str(); }

const char* loom_no_gpu_reason(int device) {
  try {
    no_gpu_text = loom::no_gpu_reason(device);
  } catch (...) {
    no_gpu_text = "cannot probe GPU " + std::to_string(device);
  }
  return no_gpu_text.c_str();
}

void loom_plan_options_init(loom_plan_options* options) {
  if (!options) return;
  *options = loom_plan_options{};
  options->struct_size = sizeof(loom_plan_options);
  options->use_tuning_db = 1;
}

loom_status loom_plan_create(const char* expression, const loom_plan_options* options,
                             loom_plan_t* plan) {
  const char* fn = "loom_plan_create";
  if (!plan) return null_arg(fn, "the output handle pointer");
  *plan = nullptr;
  if (!expression) return null_arg(fn, "the expression");
  if (options && options->struct_size != sizeof(loom_plan_options))
    return fail(LOOM_ERROR_INVALID_ARGUMENT,
                std::string(fn) + ": loom_plan_options.struct_size is " +
                    std::to_string(options->struct_size) + ", not " +
                    std::to_string(sizeof(loom_plan_options)) +
                    (options->struct_size > sizeof(loom_plan_options)
                         ? ": the program was built with a newer loom_c.h than this library"
                         : ": fill the options with loom_plan_options_init first"));
  try {
    loom::PlanOptions opt;
    if (options) {
      opt.knobs = options->knobs ? options->knobs : "";
      opt.target = options->target ? options->target : "";
      if (options->sizes) opt.sizes = loom::parse_dims(options->sizes);
      for (std::string rest = options->runtime_sizes ? options->runtime_sizes : ""; !rest.empty();) {
        const size_t comma = rest.find(',');
        std::string name = rest.substr(0, comma);
        while (!name.empty() && name.front() == ' ') name.erase(name.begin());
        while (!name.empty() && name.back() == ' ') name.pop_back();
        if (name.empty())
          throw loom::Error(std::string("loom_plan_options.runtime_sizes \"") + options->runtime_sizes +
                            "\" has an empty name: write symbols separated by commas, \"B,S\"");
        opt.runtime_sizes.push_back(name);
        rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
        if (comma != std::string::npos && rest.empty())
          throw loom::Error(std::string("loom_plan_options.runtime_sizes \"") + options->runtime_sizes +
                            "\" ends with a comma: write symbols separated by commas, \"B,S\"");
      }
      opt.device = options->device;
      opt.use_tuning_db = options->use_tuning_db != 0;
    }
    auto p = std::make_shared<loom_plan_s>(loom::Plan(expression, opt));
    loom_plan_t h = p.get();
    std::lock_guard<std::mutex> lock(registry_mu);
    registry()[h] = std::move(p);
    *plan = h;
    return LOOM_SUCCESS;
  } catch (const loom::NoGpuError& e) {
    return fail(LOOM_ERROR_NO_GPU, e.what());
  } catch (const loom::Error& e) {
    return fail(LOOM_ERROR_COMPILE, e.what());
  } catch (const std::bad_alloc&) {
    return fail(LOOM_ERROR_INTERNAL, std::string(fn) + ": out of host memory");
  } catch (const std::exception& e) {
    return fail(LOOM_ERROR_INTERNAL, std::string(fn) + ": " + e.what());
  } catch (...) {
    return fail(LOOM_ERROR_INTERNAL, std::string(fn) + ": unknown exception");
  }
}

loom_status loom_plan_destroy(loom_plan_t plan) {
  if (!plan) return LOOM_SUCCESS;
  std::shared_ptr<loom_plan_s> doomed;  // freed after the lock, outside it
  {
    std::lock_guard<std::mutex> lock(registry_mu);
    auto it = registry().find(plan);
    if (it == registry().end()) return bad_handle("loom_plan_destroy", plan);
    doomed = std::move(it->second);
    registry().erase(it);
  }
  try {
    doomed.reset();
  } catch (...) {
    return fail(LOOM_ERROR_INTERNAL, "loom_plan_destroy: freeing the plan failed");
  }
  return LOOM_SUCCESS;
}

loom_status loom_plan_execute(loom_plan_t plan, const char* const* names, void* const* ptrs,
                              size_t count, struct CUstream_st* stream) {
  if (count && !names) return null_arg("loom_plan_execute", "names");
  return execute("loom_plan_execute", plan, names, ptrs, count, nullptr, nullptr, 0, stream);
}

loom_status loom_plan_execute_positional(loom_plan_t plan, void* const* ptrs, size_t count,
                                         struct CUstream_st* stream) {
  return execute("loom_plan_execute_positional", plan, nullptr, ptrs, count, nullptr, nullptr, 0, stream);
}

loom_status loom_plan_execute_sized(loom_plan_t plan, const char* const* names, void* const* ptrs,
                                    size_t count, const char* const* size_names,
                                    const int64_t* size_values, size_t size_count,
                                    struct CUstream_st* stream) {
  return execute("loom_plan_execute_sized", plan, names, ptrs, count, size_names, size_values,
                 size_count, stream);
}

loom_status loom_plan_runtime_sizes(loom_plan_t plan, const char** names) {
  const char* fn = "loom_plan_runtime_sizes";
  std::shared_ptr<loom_plan_s> p = lookup(plan);
  if (!p) return bad_handle(fn, plan);
  if (!names) return null_arg(fn, "names");
  *names = p->runtime_sizes.c_str();
  return LOOM_SUCCESS;
}

loom_status loom_plan_num_tensors(loom_plan_t plan, size_t* count) {
  const char* fn = "loom_plan_num_tensors";
  if (!lookup(plan)) return bad_handle(fn, plan);
  if (!count) return null_arg(fn, "count");
  return with_plan(fn, plan, LOOM_ERROR_INTERNAL,
                   [&](loom_plan_s& p) { *count = p.plan.tensors().size(); });
}

loom_status loom_plan_tensor(loom_plan_t plan, size_t index, loom_tensor_info* info) {
  const char* fn = "loom_plan_tensor";
  std::shared_ptr<loom_plan_s> p = lookup(plan);
  if (!p) return bad_handle(fn, plan);
  if (!info) return null_arg(fn, "info");
  const auto& ts = p->plan.tensors();
  if (index >= ts.size())
    return fail(LOOM_ERROR_OUT_OF_RANGE, std::string(fn) + ": index " + std::to_string(index) +
                                             " is past the plan's " + std::to_string(ts.size()) +
                                             " tensors (loom_plan_num_tensors)");
  const loom::TensorInfo& t = ts[index];
  if (t.shape.size() > LOOM_MAX_RANK)
    return fail(LOOM_ERROR_INTERNAL, std::string(fn) + ": tensor " + t.name + " has rank " +
                                         std::to_string(t.shape.size()) + " > LOOM_MAX_RANK");
  *info = loom_tensor_info{};
  info->name = t.name.c_str();
  info->role = t.role.c_str();
  info->dtype = t.dtype.c_str();
  info->rank = int(t.shape.size());
  for (size_t i = 0; i < t.shape.size(); ++i) info->shape[i] = t.shape[i];
  info->bytes = t.bytes;
  return LOOM_SUCCESS;
}

loom_status loom_plan_cuda_source(loom_plan_t plan, const char** source) {
  const char* fn = "loom_plan_cuda_source";
  std::shared_ptr<loom_plan_s> p = lookup(plan);
  if (!p) return bad_handle(fn, plan);
  if (!source) return null_arg(fn, "source");
  *source = p->plan.cuda_source().c_str();
  return LOOM_SUCCESS;
}

loom_status loom_plan_knobs(loom_plan_t plan, const char** knobs) {
  const char* fn = "loom_plan_knobs";
  std::shared_ptr<loom_plan_s> p = lookup(plan);
  if (!p) return bad_handle(fn, plan);
  if (!knobs) return null_arg(fn, "knobs");
  *knobs = p->knobs.c_str();
  return LOOM_SUCCESS;
}

loom_status loom_plan_describe(loom_plan_t plan, const char** text) {
  const char* fn = "loom_plan_describe";
  std::shared_ptr<loom_plan_s> p = lookup(plan);
  if (!p) return bad_handle(fn, plan);
  if (!text) return null_arg(fn, "text");
  *text = p->description.c_str();
  return LOOM_SUCCESS;
}

loom_status loom_plan_executable(loom_plan_t plan, int* executable) {
  const char* fn = "loom_plan_executable";
  std::shared_ptr<loom_plan_s> p = lookup(plan);
  if (!p) return bad_handle(fn, plan);
  if (!executable) return null_arg(fn, "executable");
  *executable = p->plan.executable() ? 1 : 0;
  return LOOM_SUCCESS;
}

}  // extern "C"
