// libsoftrnic_devfiles.so, preloaded by softrnic_run: what a program that looks for an RDMA
// device's character file finds. UCX lists an IB device only if /dev/infiniband/<its dev_name>
// is a character device it may read and write (uct_ib_device_is_accessible), and softrnic's
// devices have no such file (there is no kernel driver). So stat() and access() of
// /dev/infiniband/uverbsN answer as for a character device open to everyone; every other path
// goes to libc unchanged. Nothing opens the file: softrnic's libibverbs never does.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

static const char kPrefix[] = "/dev/infiniband/uverbs";

// One of softrnic's device files (the dev_name its libibverbs gives each device: uverbsN).
static int ours(const char* path) {
  if (!path || strncmp(path, kPrefix, sizeof kPrefix - 1) != 0) return 0;
  const char* n = path + sizeof kPrefix - 1;
  if (!*n) return 0;
  for (; *n; ++n)
    if (*n < '0' || *n > '9') return 0;
  return 1;
}

int stat(const char* path, struct stat* st) {
  if (ours(path)) {
    memset(st, 0, sizeof *st);
    st->st_mode = S_IFCHR | 0666;
    st->st_rdev = makedev(231, 192);  // (uverbs' major and first minor on Linux)
    st->st_nlink = 1;
    return 0;
  }
  static int (*next)(const char*, struct stat*);
  if (!next) next = (int (*)(const char*, struct stat*))dlsym(RTLD_NEXT, "stat");
  if (!next) {
    errno = ENOSYS;
    return -1;
  }
  return next(path, st);
}

int access(const char* path, int mode) {
  if (ours(path)) return 0;
  static int (*next)(const char*, int);
  if (!next) next = (int (*)(const char*, int))dlsym(RTLD_NEXT, "access");
  if (!next) {
    errno = ENOSYS;
    return -1;
  }
  return next(path, mode);
}
