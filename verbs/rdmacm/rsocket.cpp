// rsockets (sockets over RDMA: rsocket.h) are not offered: each call fails with ENOSYS. They
// exist because programs linked with BIND_NOW import them (rping imports rpoll through
// librdmacm's examples/common.c) and must load (docs/verbs.md).
#include <poll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <cerrno>

namespace {

template <typename T = int>
T unsupported() {
  errno = ENOSYS;
  return static_cast<T>(-1);
}

}  // namespace

extern "C" {

int rsocket(int, int, int) {
  return unsupported();
}
int rbind(int, const sockaddr*, socklen_t) {
  return unsupported();
}
int rlisten(int, int) {
  return unsupported();
}
int raccept(int, sockaddr*, socklen_t*) {
  return unsupported();
}
int rconnect(int, const sockaddr*, socklen_t) {
  return unsupported();
}
int rshutdown(int, int) {
  return unsupported();
}
int rclose(int) {
  return unsupported();
}
ssize_t rrecv(int, void*, size_t, int) {
  return unsupported<ssize_t>();
}
ssize_t rrecvfrom(int, void*, size_t, int, sockaddr*, socklen_t*) {
  return unsupported<ssize_t>();
}
ssize_t rrecvmsg(int, msghdr*, int) {
  return unsupported<ssize_t>();
}
ssize_t rsend(int, const void*, size_t, int) {
  return unsupported<ssize_t>();
}
ssize_t rsendto(int, const void*, size_t, int, const sockaddr*, socklen_t) {
  return unsupported<ssize_t>();
}
ssize_t rsendmsg(int, const msghdr*, int) {
  return unsupported<ssize_t>();
}
ssize_t rread(int, void*, size_t) {
  return unsupported<ssize_t>();
}
ssize_t rreadv(int, const iovec*, int) {
  return unsupported<ssize_t>();
}
ssize_t rwrite(int, const void*, size_t) {
  return unsupported<ssize_t>();
}
ssize_t rwritev(int, const iovec*, int) {
  return unsupported<ssize_t>();
}
int rpoll(pollfd*, nfds_t, int) {
  return unsupported();
}
int rselect(int, fd_set*, fd_set*, fd_set*, timeval*) {
  return unsupported();
}
int rgetpeername(int, sockaddr*, socklen_t*) {
  return unsupported();
}
int rgetsockname(int, sockaddr*, socklen_t*) {
  return unsupported();
}
int rsetsockopt(int, int, int, const void*, socklen_t) {
  return unsupported();
}
int rgetsockopt(int, int, int, void*, socklen_t*) {
  return unsupported();
}
int rfcntl(int, int, ...) {
  return unsupported();
}
off_t riomap(int, void*, size_t, int, int, off_t) {
  return unsupported<off_t>();
}
int riounmap(int, void*, size_t) {
  return unsupported();
}
size_t riowrite(int, const void*, size_t, off_t, int) {
  return unsupported<size_t>();
}

}  // extern "C"
