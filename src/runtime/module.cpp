#include "runtime/module.h"

#include <utility>

#include "ir/error.h"
#include "runtime/driver.h"

namespace loom {
namespace {

// Limits of every GPU since compute capability 3.0 (CUDA programming guide, "Technical
// Specifications per Compute Capability").
constexpr unsigned kMaxGrid[3] = {2147483647u, 65535u, 65535u};
constexpr unsigned kMaxBlock[3] = {1024u, 1024u, 64u};
constexpr unsigned kMaxBlockThreads = 1024;
constexpr unsigned kDefaultDynamicSmem = 48 * 1024;

std::string dims(const unsigned d[3]) {
  return "(" + std::to_string(d[0]) + ", " + std::to_string(d[1]) + ", " +
         std::to_string(d[2]) + ")";
}

void check_launch_shape(const LaunchConfig& cfg) {
  static const char* axis = "xyz";
  for (int i = 0; i < 3; ++i) {
    if (cfg.grid[i] == 0 || cfg.block[i] == 0)
      throw Error("cannot launch grid " + dims(cfg.grid) + " x block " + dims(cfg.block) +
                  ": every dimension must be at least 1");
    if (cfg.grid[i] > kMaxGrid[i])
      throw Error(std::string("grid.") + axis[i] + " = " + std::to_string(cfg.grid[i]) +
                  " exceeds the hardware limit " + std::to_string(kMaxGrid[i]) +
                  ": use larger tiles or move the work to grid.x");
    if (cfg.block[i] > kMaxBlock[i])
      throw Error(std::string("block.") + axis[i] + " = " + std::to_string(cfg.block[i]) +
                  " exceeds the hardware limit " + std::to_string(kMaxBlock[i]));
  }
  uint64_t threads = uint64_t(cfg.block[0]) * cfg.block[1] * cfg.block[2];
  if (threads > kMaxBlockThreads)
    throw Error("block " + dims(cfg.block) + " has " + std::to_string(threads) +
                " threads; a block holds at most " + std::to_string(kMaxBlockThreads));
}

}  // namespace

Module Module::load(const std::vector<char>& cubin) {
  if (cubin.empty()) throw Error("cannot load an empty cubin: compile() produced nothing");
  ensure_context();
  CUmodule m = nullptr;
  check_cu(driver().cuModuleLoadData(&m, cubin.data()), "cuModuleLoadData");
  return Module(m);
}

Module::Module(Module&& other) noexcept : module_(std::exchange(other.module_, nullptr)) {}

Module& Module::operator=(Module&& other) noexcept {
  if (this != &other) {
    Module dying(std::move(*this));
    module_ = std::exchange(other.module_, nullptr);
  }
  return *this;
}

Module::~Module() {
  // A failure here (the context already torn down at exit) leaves nothing to clean up.
  if (module_) driver().cuModuleUnload(module_);
}

CUfunction Module::function(const std::string& name) const {
  LOOM_CHECK(module_, "function() on a moved-from Module");
  CUfunction f = nullptr;
  CUresult r = driver().cuModuleGetFunction(&f, module_, name.c_str());
  if (r == CUDA_ERROR_NOT_FOUND)
    throw Error("kernel '" + name + "' is not in the module: declare it extern \"C\" or pass "
                "its mangled name (the keys of CompileResult::resources)");
  check_cu(r, ("cuModuleGetFunction(" + name + ")").c_str());
  return f;
}

FuncAttributes func_attributes(CUfunction f) {
  const DriverApi& d = driver();
  FuncAttributes a;
  check_cu(d.cuFuncGetAttribute(&a.registers, CU_FUNC_ATTRIBUTE_NUM_REGS, f),
           "cuFuncGetAttribute(NUM_REGS)");
  check_cu(d.cuFuncGetAttribute(&a.static_smem_bytes, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f),
           "cuFuncGetAttribute(SHARED_SIZE_BYTES)");
  check_cu(d.cuFuncGetAttribute(&a.local_bytes, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, f),
           "cuFuncGetAttribute(LOCAL_SIZE_BYTES)");
  check_cu(d.cuFuncGetAttribute(&a.max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f),
           "cuFuncGetAttribute(MAX_THREADS_PER_BLOCK)");
  return a;
}

void set_dynamic_smem(CUfunction f, int bytes) {
  check_cu(driver().cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes),
           ("cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES, " + std::to_string(bytes) +
            "): more than this GPU's opt-in limit (DeviceInfo::smem_per_block_optin)?")
               .c_str());
}

int occupancy_blocks_per_sm(CUfunction f, int block_threads, int dynamic_smem) {
  int blocks = 0;
  check_cu(driver().cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, f, block_threads,
                                                                 size_t(dynamic_smem)),
           "cuOccupancyMaxActiveBlocksPerMultiprocessor");
  return blocks;
}

int max_active_clusters(CUfunction f, const LaunchConfig& cfg, int cluster_x) {
  CUlaunchAttribute attr{};
  attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  attr.value.clusterDim.x = unsigned(cluster_x);
  attr.value.clusterDim.y = attr.value.clusterDim.z = 1;
  CUlaunchConfig c{};
  c.gridDimX = cfg.grid[0], c.gridDimY = cfg.grid[1], c.gridDimZ = cfg.grid[2];
  c.blockDimX = cfg.block[0], c.blockDimY = cfg.block[1], c.blockDimZ = cfg.block[2];
  c.sharedMemBytes = cfg.dynamic_smem;
  c.attrs = &attr;
  c.numAttrs = 1;
  int clusters = 0;
  check_cu(driver().cuOccupancyMaxActiveClusters(&clusters, f, &c),
           "cuOccupancyMaxActiveClusters");
  return clusters;
}

void launch(CUfunction f, const LaunchConfig& cfg, void** args) {
  check_launch_shape(cfg);
  ensure_context();
  CUresult r;
  if (cfg.programmatic_dependent) {
    CUlaunchAttribute attr{};
    attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attr.value.programmaticStreamSerializationAllowed = 1;
    CUlaunchConfig c{};
    c.gridDimX = cfg.grid[0], c.gridDimY = cfg.grid[1], c.gridDimZ = cfg.grid[2];
    c.blockDimX = cfg.block[0], c.blockDimY = cfg.block[1], c.blockDimZ = cfg.block[2];
    c.sharedMemBytes = cfg.dynamic_smem;
    c.hStream = cfg.stream;
    c.attrs = &attr;
    c.numAttrs = 1;
    r = driver().cuLaunchKernelEx(&c, f, args, nullptr);
  } else {
    r = driver().cuLaunchKernel(f, cfg.grid[0], cfg.grid[1], cfg.grid[2], cfg.block[0],
                                cfg.block[1], cfg.block[2], cfg.dynamic_smem, cfg.stream, args,
                                nullptr);
  }
  if (r == CUDA_SUCCESS) return;
  std::string what = "cuLaunchKernel(grid " + dims(cfg.grid) + ", block " + dims(cfg.block) +
                     ", " + std::to_string(cfg.dynamic_smem) + " B dynamic smem)";
  if (r == CUDA_ERROR_INVALID_VALUE && cfg.dynamic_smem > kDefaultDynamicSmem)
    what += " [more than 48 KiB of dynamic smem needs set_dynamic_smem() first]";
  check_cu(r, what.c_str());
}

}  // namespace loom
