/* fake_framework.c: an empty shared library that the preload tests build under a framework's
 * name (libtorch_cuda.so), so libgswap's init-time walk of loaded objects finds "PyTorch". */
int gswap_fake_framework_marker(void) {
  return 42;
}
