/* A fake CUDA driver (libcuda.so.1) for testing the multicast probe without a GPU.
 *
 * Built by the tests with `cc -shared -fPIC` and found by the probe child through
 * LD_LIBRARY_PATH, exactly as a real libcuda.so.1 would be. It exports the entry points the
 * probe binds, keeps just enough state to check the probe's call order, and fails or hangs
 * where the environment says:
 *
 *   FAKE_CUDA_DEVICES=8            devices cuDeviceGetCount reports
 *   FAKE_CUDA_FAIL=name:code[:#n]  the n-th call (every call without #n) of `name` returns code
 *   FAKE_CUDA_HANG=name            `name` never returns (with FAKE_CUDA_HANG_FORK=1 it first
 *                                  forks a grandchild that sleeps too)
 *   FAKE_CUDA_NO_MC=3,5            devices whose multicast attribute (132) is 0
 *   FAKE_CUDA_FABRIC=1             attribute 128 (fabric handles supported) is 1
 *   FAKE_CUDA_LOG=path             one line per call: "name dev"
 *   FAKE_CUDA_PIDFILE=path         pids written before a hang
 *
 * Compiled with -DNO_MULTICAST it lacks the cuMulticast* symbols, like a pre-R530 driver.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int CUresult;
typedef unsigned long long Handle;

typedef struct { unsigned int numDevices; size_t size; unsigned long long handleTypes; unsigned long long flags; } MulticastProp;
typedef struct { int type; int id; } Location;
typedef struct { int type; int requestedHandleTypes; Location location; void *meta; unsigned char flags[8]; } AllocProp;
typedef struct { Location location; int flags; } AccessDesc;

static int calls[64];
static const char *names[64];
static int n_names;

static int counter(const char *name) {
    for (int i = 0; i < n_names; i++)
        if (strcmp(names[i], name) == 0) return ++calls[i];
    names[n_names] = name;
    calls[n_names] = 1;
    return calls[n_names++];
}

static void logcall(const char *name, int dev) {
    const char *path = getenv("FAKE_CUDA_LOG");
    if (!path) return;
    FILE *f = fopen(path, "a");
    if (!f) return;
    fprintf(f, "%s %d\n", name, dev);
    fclose(f);
}

static void hang(void) {
    const char *pidfile = getenv("FAKE_CUDA_PIDFILE");
    pid_t grandchild = 0;
    if (getenv("FAKE_CUDA_HANG_FORK")) {
        grandchild = fork();
        if (grandchild == 0) for (;;) pause();
    }
    if (pidfile) {
        FILE *f = fopen(pidfile, "w");
        if (f) { fprintf(f, "%d %d\n", (int)getpid(), (int)grandchild); fclose(f); }
    }
    for (;;) pause();
}

/* Every entry point starts here: log, maybe hang, maybe fail. */
static CUresult enter(const char *name, int dev) {
    int n = counter(name);
    logcall(name, dev);
    const char *h = getenv("FAKE_CUDA_HANG");
    if (h && strcmp(h, name) == 0) hang();
    const char *spec = getenv("FAKE_CUDA_FAIL");
    if (!spec) return 0;
    char buf[128];
    strncpy(buf, spec, sizeof buf - 1);
    buf[sizeof buf - 1] = 0;
    char *colon = strchr(buf, ':');
    if (!colon) return 0;
    *colon = 0;
    if (strcmp(buf, name) != 0) return 0;
    int code = atoi(colon + 1);
    char *nth = strchr(colon + 1, '#');
    if (nth && atoi(nth + 1) != n) return 0;
    return code;
}

static int ndev(void) { const char *s = getenv("FAKE_CUDA_DEVICES"); return s ? atoi(s) : 8; }

static int listed(const char *var, int dev) {
    const char *s = getenv(var);
    if (!s) return 0;
    char buf[256];
    strncpy(buf, s, sizeof buf - 1);
    buf[sizeof buf - 1] = 0;
    for (char *t = strtok(buf, ","); t; t = strtok(NULL, ","))
        if (atoi(t) == dev) return 1;
    return 0;
}

static Handle next_handle = 0x1000;
static int handle_dev[256];  /* device of each physical allocation, by handle - 0x1000 */
static unsigned long long next_va = 0x7f0000000000ULL;

CUresult cuInit(unsigned int flags) { (void)flags; return enter("cuInit", -1); }
CUresult cuDriverGetVersion(int *v) { *v = 13010; return enter("cuDriverGetVersion", -1); }
CUresult cuDeviceGetCount(int *n) { *n = ndev(); return enter("cuDeviceGetCount", -1); }
CUresult cuDeviceGet(int *dev, int ordinal) {
    if (ordinal >= ndev()) return 101;
    *dev = ordinal;
    return enter("cuDeviceGet", ordinal);
}
CUresult cuDeviceGetAttribute(int *v, int attr, int dev) {
    CUresult rc = enter("cuDeviceGetAttribute", dev);
    if (attr == 132) *v = listed("FAKE_CUDA_NO_MC", dev) ? 0 : 1;
    else if (attr == 128) *v = getenv("FAKE_CUDA_FABRIC") ? 1 : 0;
    else *v = 0;
    return rc;
}
CUresult cuDevicePrimaryCtxRetain(void **ctx, int dev) { *ctx = (void *)(long)(0x100 + dev); return enter("cuDevicePrimaryCtxRetain", dev); }
CUresult cuDevicePrimaryCtxRelease_v2(int dev) { return enter("cuDevicePrimaryCtxRelease", dev); }
CUresult cuCtxSetCurrent(void *ctx) { (void)ctx; return 0; }
CUresult cuGetErrorName(int code, const char **out) {
    switch (code) {
    case 2: *out = "CUDA_ERROR_OUT_OF_MEMORY"; return 0;
    case 101: *out = "CUDA_ERROR_INVALID_DEVICE"; return 0;
    case 401: *out = "CUDA_ERROR_ILLEGAL_STATE"; return 0;
    case 800: *out = "CUDA_ERROR_NOT_PERMITTED"; return 0;
    case 802: *out = "CUDA_ERROR_SYSTEM_NOT_READY"; return 0;
    default: return 1; /* let the probe fall back to its own table */
    }
}
CUresult cuMemGetAllocationGranularity(size_t *g, const AllocProp *p, int opt) { (void)p; (void)opt; *g = 2 << 20; return enter("cuMemGetAllocationGranularity", -1); }
CUresult cuMemCreate(Handle *h, size_t size, const AllocProp *p, unsigned long long flags) {
    (void)size; (void)flags;
    CUresult rc = enter("cuMemCreate", p->location.id);
    if (rc == 0) { handle_dev[(next_handle - 0x1000) & 0xff] = p->location.id; *h = next_handle++; }
    return rc;
}
CUresult cuMemRelease(Handle h) { return enter("cuMemRelease", handle_dev[(h - 0x1000) & 0xff]); }
CUresult cuMemAddressReserve(unsigned long long *va, size_t size, size_t align, unsigned long long addr, unsigned long long flags) {
    (void)align; (void)addr; (void)flags;
    CUresult rc = enter("cuMemAddressReserve", -1);
    if (rc == 0) { *va = next_va; next_va += size; }
    return rc;
}
CUresult cuMemAddressFree(unsigned long long va, size_t size) { (void)va; (void)size; return enter("cuMemAddressFree", -1); }
CUresult cuMemMap(unsigned long long va, size_t size, size_t off, Handle h, unsigned long long flags) { (void)va; (void)size; (void)off; (void)h; (void)flags; return enter("cuMemMap", -1); }
CUresult cuMemSetAccess(unsigned long long va, size_t size, const AccessDesc *d, size_t n) { (void)va; (void)size; (void)n; return enter("cuMemSetAccess", d->location.id); }
CUresult cuMemUnmap(unsigned long long va, size_t size) { (void)va; (void)size; return enter("cuMemUnmap", -1); }
CUresult cuMemExportToShareableHandle(void *out, Handle h, int type, unsigned long long flags) { (void)out; (void)h; (void)type; (void)flags; return enter("cuMemExportToShareableHandle", -1); }
CUresult cuMemImportFromShareableHandle(Handle *h, void *in, int type) { (void)in; (void)type; *h = next_handle++; return enter("cuMemImportFromShareableHandle", -1); }

#ifndef NO_MULTICAST
CUresult cuMulticastGetGranularity(size_t *g, const MulticastProp *p, int opt) { (void)p; (void)opt; *g = 2 << 20; return enter("cuMulticastGetGranularity", -1); }
CUresult cuMulticastCreate(Handle *h, const MulticastProp *p) {
    CUresult rc = enter("cuMulticastCreate", (int)p->numDevices);
    if (rc == 0) *h = next_handle++;
    return rc;
}
CUresult cuMulticastAddDevice(Handle h, int dev) { (void)h; return enter("cuMulticastAddDevice", dev); }
CUresult cuMulticastBindMem(Handle mc, size_t mco, Handle mem, size_t memo, size_t size, unsigned long long flags) {
    (void)mc; (void)mco; (void)memo; (void)size; (void)flags;
    return enter("cuMulticastBindMem", handle_dev[(mem - 0x1000) & 0xff]);
}
CUresult cuMulticastUnbind(Handle mc, int dev, size_t off, size_t size) { (void)mc; (void)off; (void)size; return enter("cuMulticastUnbind", dev); }
#endif
