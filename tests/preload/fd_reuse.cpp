// fd_reuse.cpp: the program closes gswap's socket to gswapd, as a careless closefrom() would, and
// opens a file of its own, which takes the socket's number. gswap must neither read, write nor
// close that descriptor, and must connect again on a socket of its own.
//
//   fd_reuse FILE
//
// Waits (up to 10 s) for a socket among its descriptors (gswap's connection), closes every socket
// it finds, opens FILE (the lowest free number: the socket's), lets gswap's telemetry thread run
// for 300 ms, writes a line through the descriptor, checks that it still names FILE and that FILE
// holds the line, then waits for a socket again (gswap connected anew) and prints "PASS".
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "preload_common.h"

namespace {

std::vector<int> sockets() {
  std::vector<int> found;
  DIR* dir = opendir("/proc/self/fd");
  PEXPECT(dir != nullptr);
  while (dirent* e = readdir(dir)) {
    const int fd = std::atoi(e->d_name);
    if (fd <= 2 || fd == dirfd(dir)) continue;
    const std::string link = "/proc/self/fd/" + std::string(e->d_name);
    char target[256];
    const ssize_t n = readlink(link.c_str(), target, sizeof target - 1);
    if (n > 0 && std::strncmp(target, "socket:", 7) == 0) found.push_back(fd);
  }
  closedir(dir);
  return found;
}

std::vector<int> wait_for_sockets() {
  for (int i = 0; i < 1000; ++i) {
    if (std::vector<int> s = sockets(); !s.empty()) return s;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::fprintf(stderr, "no socket to gswapd after 10 s\n");
  std::exit(1);
}

}  // namespace

int main(int argc, char** argv) {
  PEXPECT(argc == 2);
  const char* path = argv[1];
  preload_init();
  const std::vector<int> before = wait_for_sockets();
  for (int fd : before) close(fd);
  const int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
  PEXPECT(fd >= 0);
  std::printf("closed %zu socket(s); %s opened as descriptor %d (the socket's was %d)\n",
              before.size(), path, fd, before.front());
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const char line[] = "the program's own data\n";
  PEXPECT(write(fd, line, sizeof line - 1) == static_cast<ssize_t>(sizeof line - 1));
  char target[4096];
  const std::string link = "/proc/self/fd/" + std::to_string(fd);
  const ssize_t n = readlink(link.c_str(), target, sizeof target - 1);
  PEXPECT(n > 0);
  target[n] = '\0';
  char real[4096];
  PEXPECT(realpath(path, real) != nullptr);
  if (std::strcmp(target, real) != 0) {
    std::fprintf(stderr, "descriptor %d names %s, not %s\n", fd, target, real);
    return 1;
  }
  PEXPECT(close(fd) == 0);
  FILE* f = std::fopen(path, "r");
  PEXPECT(f != nullptr);
  char got[sizeof line] = {};
  const std::size_t read = std::fread(got, 1, sizeof got - 1, f);
  std::fclose(f);
  if (read != sizeof line - 1 || std::strcmp(got, line) != 0) {
    std::fprintf(stderr, "%s holds %zu bytes, not the line written\n", path, read);
    return 1;
  }
  wait_for_sockets();
  std::printf("PASS\n");
  return 0;
}
