// frameworks.h: recognising the frameworks' own allocators at init, so gswap says what it will do.
//
// A framework that sub-allocates (PyTorch's caching allocator, XLA's and TensorFlow's BFC) hands
// gswap a few big segments instead of one allocation per tensor: gswap then swaps whole segments,
// which is coarser but still correct, so it warns and keeps working. PyTorch's expandable segments
// map the framework's own cuMemCreate/cuMemMap pages with several tensors per page, memory gswap
// cannot see or move: it refuses to start. The decision is a pure function of the environment and
// of which frameworks are loaded, so it is unit-tested without a process around it; the one impure
// part, loaded_frameworks(), walks the loaded objects with dl_iterate_phdr. Both run at the first
// cuInit only, never on the launch path. Frameworks load their CUDA libraries before they
// initialise CUDA, so the walk at init sees them.
#pragma once

#include "interpose/config.h"

namespace gswap::interpose {

// Bits of loaded frameworks.
enum FrameworkBits : unsigned {
  kPyTorch = 1u << 0,     // libtorch_cuda
  kJax = 1u << 1,         // xla_extension, libjax*, anything under a jaxlib/ directory
  kTensorFlow = 1u << 2,  // libtensorflow*, _pywrap_tensorflow*
};

// The frameworks a loaded object's path (as dl_iterate_phdr reports it) belongs to; 0 if none.
unsigned framework_of(const char* path);

// Walks the objects loaded in this process and ORs framework_of() over their names.
unsigned loaded_frameworks();

// True when a PyTorch allocator config ("key:value,key:value", PyTorch's syntax) enables
// expandable segments under the native backend. backend:cudaMallocAsync makes PyTorch ignore
// expandable_segments, so that is not a refusal. Null or empty: false.
bool pytorch_expandable_segments(const char* alloc_conf);
// True when the config selects backend:cudaMallocAsync.
bool pytorch_async_backend(const char* alloc_conf);

constexpr unsigned kMaxFrameworkWarnings = 3;
constexpr unsigned kFrameworkLineSize = 400;

struct FrameworkCheck {
  bool refuse = false;                  // expandable segments: cuInit must fail
  char error[kFrameworkLineSize] = {};  // the one error line when refuse
  unsigned warnings = 0;                // one line per loaded framework that sub-allocates
  char warning[kMaxFrameworkWarnings][kFrameworkLineSize] = {};
};

// Decides from the environment (PYTORCH_ALLOC_CONF, else PYTORCH_CUDA_ALLOC_CONF;
// PYTORCH_NO_CUDA_MEMORY_CACHING; XLA_PYTHON_CLIENT_ALLOCATOR; TF_GPU_ALLOCATOR) and the loaded
// frameworks (FrameworkBits) whether to refuse, and which caching allocators to warn about.
// The refusal does not depend on PyTorch being loaded yet: the setting only matters to PyTorch.
void check_frameworks(EnvLookup env, unsigned loaded, FrameworkCheck* out);

}  // namespace gswap::interpose
