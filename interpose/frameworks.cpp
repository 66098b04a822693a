// frameworks.cpp: recognising framework allocators at init (see frameworks.h). No allocation and
// no exceptions: everything works on the caller's buffers, as the rest of the library does.
#include "interpose/frameworks.h"

#include <link.h>

#include <cstdio>
#include <cstring>

namespace gswap::interpose {
namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

char lower(char c) {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

// [b, e) trimmed of blanks equals word, ignoring case.
bool span_is(const char* b, const char* e, const char* word) {
  while (b < e && is_space(*b)) ++b;
  while (e > b && is_space(e[-1])) --e;
  std::size_t n = std::strlen(word);
  if (static_cast<std::size_t>(e - b) != n) return false;
  for (std::size_t i = 0; i < n; ++i)
    if (lower(b[i]) != lower(word[i])) return false;
  return true;
}

// Calls fn(key_begin, key_end, value_begin, value_end) for each "key:value" of a PyTorch
// allocator config. Commas inside brackets belong to the value
// ("roundup_power2_divisions:[256:1,512:2]"). A token without ':' has an empty value.
template <typename Fn>
void for_each_option(const char* conf, Fn fn) {
  if (!conf) return;
  const char* p = conf;
  while (*p) {
    const char* start = p;
    int depth = 0;
    while (*p && !(*p == ',' && depth == 0)) {
      if (*p == '[') ++depth;
      if (*p == ']' && depth > 0) --depth;
      ++p;
    }
    const char* end = p;
    const char* colon = start;
    while (colon < end && *colon != ':') ++colon;
    if (colon < end)
      fn(start, colon, colon + 1, end);
    else
      fn(start, end, end, end);
    if (*p == ',') ++p;
  }
}

bool is_true(const char* b, const char* e) {
  return span_is(b, e, "true") || span_is(b, e, "1");
}

const char* nonempty(const char* v) {
  return (v && v[0] != '\0') ? v : nullptr;
}

bool contains(const char* s, const char* needle) {
  return std::strstr(s, needle) != nullptr;
}

int collect(struct dl_phdr_info* info, size_t, void* data) {
  if (info->dlpi_name) *static_cast<unsigned*>(data) |= framework_of(info->dlpi_name);
  return 0;
}

}  // namespace

unsigned framework_of(const char* path) {
  if (!path || !*path) return 0;
  const char* base = std::strrchr(path, '/');
  base = base ? base + 1 : path;
  unsigned bits = 0;
  if (contains(base, "libtorch_cuda")) bits |= kPyTorch;
  if (contains(base, "xla_extension") || contains(base, "libjax") || contains(path, "jaxlib/") ||
      contains(base, "jaxlib"))
    bits |= kJax;
  if (contains(base, "libtensorflow") || contains(base, "_pywrap_tensorflow")) bits |= kTensorFlow;
  return bits;
}

unsigned loaded_frameworks() {
  unsigned bits = 0;
  dl_iterate_phdr(collect, &bits);
  return bits;
}

bool pytorch_async_backend(const char* conf) {
  bool async = false;
  for_each_option(conf, [&](const char* kb, const char* ke, const char* vb, const char* ve) {
    if (span_is(kb, ke, "backend")) async = span_is(vb, ve, "cudaMallocAsync");
  });
  return async;
}

bool pytorch_expandable_segments(const char* conf) {
  bool expandable = false;
  for_each_option(conf, [&](const char* kb, const char* ke, const char* vb, const char* ve) {
    if (span_is(kb, ke, "expandable_segments")) expandable = is_true(vb, ve);
  });
  return expandable && !pytorch_async_backend(conf);
}

void check_frameworks(EnvLookup env, unsigned loaded, FrameworkCheck* out) {
  *out = FrameworkCheck();
  // PyTorch reads PYTORCH_ALLOC_CONF and falls back to the older PYTORCH_CUDA_ALLOC_CONF.
  const char* conf_name = "PYTORCH_ALLOC_CONF";
  const char* conf = nonempty(env(conf_name));
  if (!conf) {
    conf_name = "PYTORCH_CUDA_ALLOC_CONF";
    conf = nonempty(env(conf_name));
  }
  // Without caching PyTorch calls cudaMalloc per tensor and never maps expandable segments.
  const char* no_cache = nonempty(env("PYTORCH_NO_CUDA_MEMORY_CACHING"));
  bool uncached = no_cache && is_true(no_cache, no_cache + std::strlen(no_cache));
  if (!uncached && pytorch_expandable_segments(conf)) {
    out->refuse = true;
    std::snprintf(out->error, sizeof out->error,
                  "refusing to start: %s=\"%s\" enables expandable_segments; gswap cannot swap "
                  "memory in expandable segments because tensors share pages there. Set "
                  "%s=backend:cudaMallocAsync instead (one allocation per tensor)",
                  conf_name, conf, conf_name);
    return;
  }

  auto warn = [&](const char* framework, const char* allocator, const char* setting) {
    if (out->warnings >= kMaxFrameworkWarnings) return;
    std::snprintf(out->warning[out->warnings++], kFrameworkLineSize,
                  "%s is loaded with its %s: gswap sees its big segments, not tensors, and will "
                  "swap whole segments (coarser, still correct); for one allocation per tensor set "
                  "%s",
                  framework, allocator, setting);
  };
  if (loaded & kPyTorch) {
    if (!uncached && !pytorch_async_backend(conf))
      warn("PyTorch", "caching allocator", "PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync");
  }
  if (loaded & kJax) {
    const char* a = nonempty(env("XLA_PYTHON_CLIENT_ALLOCATOR"));
    bool per_tensor = a && (span_is(a, a + std::strlen(a), "platform") ||
                            span_is(a, a + std::strlen(a), "cuda_async"));
    if (!per_tensor)
      warn("JAX/XLA", "BFC allocator",
           "XLA_PYTHON_CLIENT_ALLOCATOR=platform XLA_PYTHON_CLIENT_PREALLOCATE=false");
  }
  if (loaded & kTensorFlow) {
    const char* a = nonempty(env("TF_GPU_ALLOCATOR"));
    if (!(a && span_is(a, a + std::strlen(a), "cuda_malloc_async")))
      warn("TensorFlow", "BFC allocator", "TF_GPU_ALLOCATOR=cuda_malloc_async");
  }
}

}  // namespace gswap::interpose
