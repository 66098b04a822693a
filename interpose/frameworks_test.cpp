// frameworks_test.cpp: the framework-allocator decision (frameworks.h) from environment strings
// and loaded-object names, without a process around it.
#include "interpose/frameworks.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace gswap::interpose {
namespace {

std::map<std::string, std::string>* g_env;
const char* lookup(const char* name) {
  auto it = g_env->find(name);
  return it == g_env->end() ? nullptr : it->second.c_str();
}

FrameworkCheck check(std::map<std::string, std::string> env, unsigned loaded) {
  g_env = &env;
  FrameworkCheck c;
  check_frameworks(lookup, loaded, &c);
  return c;
}

TEST(Frameworks, RecognisesLoadedObjects) {
  EXPECT_EQ(framework_of("/usr/lib/python3/site-packages/torch/lib/libtorch_cuda.so"), kPyTorch);
  EXPECT_EQ(framework_of("libtorch_cuda.so"), kPyTorch);
  EXPECT_EQ(framework_of("/x/site-packages/jaxlib/xla_extension.so"), kJax);
  EXPECT_EQ(framework_of("/x/site-packages/jaxlib/_jax.so"), kJax);
  EXPECT_EQ(framework_of("/x/jax_plugins/libjax_common.so"), kJax);
  EXPECT_EQ(framework_of("/x/tensorflow/libtensorflow_framework.so.2"), kTensorFlow);
  EXPECT_EQ(framework_of("/x/tensorflow/python/_pywrap_tensorflow_internal.so"), kTensorFlow);
  EXPECT_EQ(framework_of("/usr/lib/libtorch_cpu.so"), 0u);
  EXPECT_EQ(framework_of("/usr/lib/x86_64-linux-gnu/libcuda.so.1"), 0u);
  EXPECT_EQ(framework_of(""), 0u);
  EXPECT_EQ(framework_of(nullptr), 0u);
}

TEST(Frameworks, ExpandableSegmentsParsing) {
  EXPECT_TRUE(pytorch_expandable_segments("expandable_segments:True"));
  EXPECT_TRUE(pytorch_expandable_segments("expandable_segments:true"));
  EXPECT_TRUE(pytorch_expandable_segments("expandable_segments:1"));
  EXPECT_TRUE(pytorch_expandable_segments(" expandable_segments : TRUE "));
  EXPECT_TRUE(pytorch_expandable_segments("max_split_size_mb:128,expandable_segments:True"));
  EXPECT_TRUE(
      pytorch_expandable_segments("roundup_power2_divisions:[256:1,512:2],expandable_segments:True,"
                                  "garbage_collection_threshold:0.6"));
  EXPECT_TRUE(pytorch_expandable_segments("backend:native,expandable_segments:True"));
  // The last setting of a key wins, as in PyTorch.
  EXPECT_FALSE(pytorch_expandable_segments("expandable_segments:True,expandable_segments:False"));
  EXPECT_FALSE(pytorch_expandable_segments("expandable_segments:False"));
  EXPECT_FALSE(pytorch_expandable_segments("expandable_segments:0"));
  EXPECT_FALSE(pytorch_expandable_segments("max_split_size_mb:128"));
  EXPECT_FALSE(pytorch_expandable_segments(""));
  EXPECT_FALSE(pytorch_expandable_segments(nullptr));
  // The cudaMallocAsync backend ignores expandable_segments, in either order.
  EXPECT_FALSE(pytorch_expandable_segments("backend:cudaMallocAsync,expandable_segments:True"));
  EXPECT_FALSE(pytorch_expandable_segments("expandable_segments:True, backend : cudamallocasync"));
  EXPECT_TRUE(pytorch_async_backend("backend:cudaMallocAsync"));
  EXPECT_FALSE(pytorch_async_backend("backend:native"));
  EXPECT_FALSE(pytorch_async_backend("[backend:cudaMallocAsync"));
}

TEST(Frameworks, RefusesExpandableSegments) {
  FrameworkCheck c = check({{"PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True"}}, 0);
  EXPECT_TRUE(c.refuse);
  std::string e = c.error;
  EXPECT_NE(e.find("expandable segments"), std::string::npos) << e;
  EXPECT_NE(e.find("share pages"), std::string::npos) << e;
  EXPECT_NE(e.find("backend:cudaMallocAsync"), std::string::npos) << e;
  EXPECT_NE(e.find("PYTORCH_CUDA_ALLOC_CONF"), std::string::npos) << e;
  EXPECT_EQ(c.warnings, 0u);

  c = check({{"PYTORCH_ALLOC_CONF", "max_split_size_mb:64,expandable_segments:true"}}, kPyTorch);
  EXPECT_TRUE(c.refuse);
  EXPECT_NE(std::string(c.error).find("PYTORCH_ALLOC_CONF="), std::string::npos) << c.error;

  // PYTORCH_ALLOC_CONF takes precedence over the older name, as in PyTorch.
  EXPECT_FALSE(check({{"PYTORCH_ALLOC_CONF", "max_split_size_mb:64"},
                      {"PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True"}},
                     0)
                   .refuse);
  EXPECT_FALSE(
      check({{"PYTORCH_CUDA_ALLOC_CONF", "backend:cudaMallocAsync,expandable_segments:True"}}, 0)
          .refuse);
  EXPECT_FALSE(check({{"PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True"},
                      {"PYTORCH_NO_CUDA_MEMORY_CACHING", "1"}},
                     0)
                   .refuse);
  EXPECT_FALSE(check({}, kPyTorch | kJax | kTensorFlow).refuse);
}

TEST(Frameworks, WarnsAboutCachingAllocators) {
  FrameworkCheck c = check({}, 0);
  EXPECT_EQ(c.warnings, 0u);

  c = check({}, kPyTorch);
  ASSERT_EQ(c.warnings, 1u);
  std::string w = c.warning[0];
  EXPECT_NE(w.find("PyTorch"), std::string::npos) << w;
  EXPECT_NE(w.find("caching allocator"), std::string::npos) << w;
  EXPECT_NE(w.find("whole segments"), std::string::npos) << w;
  EXPECT_NE(w.find("backend:cudaMallocAsync"), std::string::npos) << w;

  EXPECT_EQ(check({{"PYTORCH_CUDA_ALLOC_CONF", "backend:cudaMallocAsync"}}, kPyTorch).warnings, 0u);
  EXPECT_EQ(check({{"PYTORCH_ALLOC_CONF", "backend:cudaMallocAsync"}}, kPyTorch).warnings, 0u);
  EXPECT_EQ(check({{"PYTORCH_NO_CUDA_MEMORY_CACHING", "1"}}, kPyTorch).warnings, 0u);
  EXPECT_EQ(check({{"PYTORCH_NO_CUDA_MEMORY_CACHING", "true"}}, kPyTorch).warnings, 0u);
  EXPECT_EQ(check({{"PYTORCH_NO_CUDA_MEMORY_CACHING", "0"}}, kPyTorch).warnings, 1u);
  EXPECT_EQ(check({{"PYTORCH_CUDA_ALLOC_CONF", "max_split_size_mb:128"}}, kPyTorch).warnings, 1u);

  c = check({}, kJax);
  ASSERT_EQ(c.warnings, 1u);
  EXPECT_NE(std::string(c.warning[0]).find("XLA_PYTHON_CLIENT_ALLOCATOR=platform"),
            std::string::npos);
  EXPECT_EQ(check({{"XLA_PYTHON_CLIENT_ALLOCATOR", "platform"}}, kJax).warnings, 0u);
  EXPECT_EQ(check({{"XLA_PYTHON_CLIENT_ALLOCATOR", "bfc"}}, kJax).warnings, 1u);

  c = check({}, kTensorFlow);
  ASSERT_EQ(c.warnings, 1u);
  EXPECT_NE(std::string(c.warning[0]).find("TF_GPU_ALLOCATOR=cuda_malloc_async"),
            std::string::npos);
  EXPECT_EQ(check({{"TF_GPU_ALLOCATOR", "cuda_malloc_async"}}, kTensorFlow).warnings, 0u);

  // Each loaded framework gets its own line; the PyTorch setting does not silence the others.
  c = check({{"PYTORCH_CUDA_ALLOC_CONF", "backend:cudaMallocAsync"}},
            kPyTorch | kJax | kTensorFlow);
  EXPECT_EQ(c.warnings, 2u);
  EXPECT_EQ(check({}, kPyTorch | kJax | kTensorFlow).warnings, 3u);
}

}  // namespace
}  // namespace gswap::interpose
