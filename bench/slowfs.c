/* LD_PRELOAD shim for bench/bench_checkpoint.py and tests: storage with a latency.
 *
 * FC_SLOW_PREFIX=/dir  every open/stat/read/readlink/opendir of a path under /dir, and
 *                      every read/pread/fstat of a descriptor opened there, first sleeps
 * FC_SLOW_MS=50        milliseconds (a network filesystem's round trip);
 * FC_HANG=/dir/x       any such operation on a path starting with this never returns (a
 *                      dead NFS mount), nor does a read of a descriptor opened there.
 *
 * Only the dynamic symbols CPython 3.11 on glibc >= 2.33 calls are wrapped (open64,
 * openat64, stat64, lstat64, fstatat64, fstat64, pread64, read, readlink, opendir).
 * Build: gcc -O2 -shared -fPIC -o slowfs.so slowfs.c -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <dirent.h>
#include <time.h>
#include <unistd.h>

#define MAXFD 65536
static unsigned char fdmark[MAXFD]; /* 1: slow, 2: hangs */
static const char *prefix, *hang;
static size_t plen, hlen;
static long delay_ns;
static int ready;

static void init(void) {
    if (ready) return;
    prefix = getenv("FC_SLOW_PREFIX");
    hang = getenv("FC_HANG");
    plen = prefix ? strlen(prefix) : 0;
    hlen = hang ? strlen(hang) : 0;
    const char *ms = getenv("FC_SLOW_MS");
    delay_ns = ms ? (long)(atof(ms) * 1e6) : 0;
    ready = 1;
}

static void forever(void) { for (;;) pause(); }

static void nap(void) {
    if (delay_ns <= 0) return;
    struct timespec ts = {delay_ns / 1000000000L, delay_ns % 1000000000L};
    while (nanosleep(&ts, &ts) != 0) {}
}

/* 0: untouched, 1: slow, 2: hangs */
static int classify(const char *path) {
    init();
    if (!path) return 0;
    if (hlen && strncmp(path, hang, hlen) == 0) return 2;
    if (plen && strncmp(path, prefix, plen) == 0) return 1;
    return 0;
}

static int on_path(const char *path) {
    int c = classify(path);
    if (c == 2) forever();
    if (c == 1) nap();
    return c;
}

static void on_fd(int fd) {
    if (fd < 0 || fd >= MAXFD || !fdmark[fd]) return;
    if (fdmark[fd] == 2) forever();
    nap();
}

#define REAL(name) static __typeof__(name) *real_##name; if (!real_##name) real_##name = dlsym(RTLD_NEXT, #name)

int open64(const char *path, int flags, ...) {
    REAL(open64);
    mode_t mode = 0;
    if (flags & (O_CREAT | O_TMPFILE)) { va_list ap; va_start(ap, flags); mode = va_arg(ap, mode_t); va_end(ap); }
    int c = on_path(path);
    int fd = real_open64(path, flags, mode);
    if (fd >= 0 && fd < MAXFD) fdmark[fd] = (unsigned char)c;
    return fd;
}

int openat64(int dirfd, const char *path, int flags, ...) {
    REAL(openat64);
    mode_t mode = 0;
    if (flags & (O_CREAT | O_TMPFILE)) { va_list ap; va_start(ap, flags); mode = va_arg(ap, mode_t); va_end(ap); }
    int c = on_path(path);
    int fd = real_openat64(dirfd, path, flags, mode);
    if (fd >= 0 && fd < MAXFD) fdmark[fd] = (unsigned char)c;
    return fd;
}

int close(int fd) {
    REAL(close);
    if (fd >= 0 && fd < MAXFD) fdmark[fd] = 0;
    return real_close(fd);
}

int stat64(const char *path, struct stat64 *buf) { REAL(stat64); on_path(path); return real_stat64(path, buf); }
int lstat64(const char *path, struct stat64 *buf) { REAL(lstat64); on_path(path); return real_lstat64(path, buf); }
int fstatat64(int dirfd, const char *path, struct stat64 *buf, int flags) {
    REAL(fstatat64);
    if (path && path[0]) on_path(path); else on_fd(dirfd);
    return real_fstatat64(dirfd, path, buf, flags);
}
int fstat64(int fd, struct stat64 *buf) { REAL(fstat64); on_fd(fd); return real_fstat64(fd, buf); }
ssize_t pread64(int fd, void *buf, size_t n, off64_t off) { REAL(pread64); on_fd(fd); return real_pread64(fd, buf, n, off); }
ssize_t read(int fd, void *buf, size_t n) { REAL(read); on_fd(fd); return real_read(fd, buf, n); }
ssize_t readlink(const char *path, char *buf, size_t n) { REAL(readlink); on_path(path); return real_readlink(path, buf, n); }
DIR *opendir(const char *path) { REAL(opendir); on_path(path); return real_opendir(path); }
