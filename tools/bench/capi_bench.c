/* npuemu bench's C ABI figures, measured from C (built against the SDK tree by capi.py):
 * argv[1] = "quick" or "full". Prints one "<key> <value>" line per figure:
 *   malloc_free  aclrtMalloc(256)+aclrtFree pairs per second
 *   launch_sync  median microseconds of one aclrtLaunchKernel (an empty AI Core kernel) +
 *                aclrtSynchronizeStream
 *   h2d, d2h     GB/s of aclrtMemcpy of 64 MiB between a malloc'd C buffer and the card
 * Exit status 1 (and a FAIL line) if a call fails. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "acl/acl.h"

#define COPY_BYTES (64u << 20)
#define OK(call)                                                           \
    do {                                                                   \
        aclError ok_ret_ = (call);                                         \
        if (ok_ret_ != ACL_SUCCESS) {                                      \
            printf("FAIL %s -> %d (%s)\n", #call, ok_ret_, aclGetRecentErrMsg()); \
            exit(1);                                                       \
        }                                                                  \
    } while (0)

static const char EMPTY_KERNEL[] =
    "from npuemu.shared.kernel import kernel\n"
    "\n"
    "@kernel(\"aicore\")\n"
    "def empty(ctx):\n"
    "    pass\n";

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double malloc_free(int pairs)
{
    double t0;
    int i;
    void *p = NULL;
    OK(aclrtMalloc(&p, 256, ACL_MEM_MALLOC_HUGE_FIRST));  /* warm */
    OK(aclrtFree(p));
    t0 = now();
    for (i = 0; i < pairs; i++) {
        OK(aclrtMalloc(&p, 256, ACL_MEM_MALLOC_HUGE_FIRST));
        OK(aclrtFree(p));
    }
    return pairs / (now() - t0);
}

static double launch_sync(aclrtStream stream, int n)
{
    aclrtBinHandle bin = NULL;
    aclrtFuncHandle fn = NULL;
    double *us = malloc(sizeof(double) * (size_t)n), median;
    int i;
    OK(aclrtBinaryLoadFromData(EMPTY_KERNEL, sizeof EMPTY_KERNEL - 1, NULL, &bin));
    OK(aclrtBinaryGetFunction(bin, "empty", &fn));
    for (i = 0; i < n / 10 + 1; i++) {  /* warm */
        OK(aclrtLaunchKernel(fn, 1, NULL, 0, stream));
        OK(aclrtSynchronizeStream(stream));
    }
    for (i = 0; i < n; i++) {
        double t0 = now();
        OK(aclrtLaunchKernel(fn, 1, NULL, 0, stream));
        OK(aclrtSynchronizeStream(stream));
        us[i] = (now() - t0) * 1e6;
    }
    qsort(us, (size_t)n, sizeof(double), by_value);
    median = us[n / 2];
    free(us);
    OK(aclrtBinaryUnLoad(bin));
    return median;
}

static double copy_rate(void *dst, const void *src, aclrtMemcpyKind kind, int reps)
{
    double best[16], t0;
    int i;
    OK(aclrtMemcpy(dst, COPY_BYTES, src, COPY_BYTES, kind));  /* warm */
    for (i = 0; i < reps; i++) {
        t0 = now();
        OK(aclrtMemcpy(dst, COPY_BYTES, src, COPY_BYTES, kind));
        best[i] = COPY_BYTES / (now() - t0) / 1e9;
    }
    qsort(best, (size_t)reps, sizeof(double), by_value);
    return best[reps / 2];
}

int main(int argc, char **argv)
{
    int quick = argc > 1 && strcmp(argv[1], "quick") == 0;
    aclrtStream stream = NULL;
    void *dev = NULL;
    char *host = malloc(COPY_BYTES);
    OK(aclInit(NULL));
    OK(aclrtSetDevice(0));
    OK(aclrtCreateStream(&stream));
    printf("malloc_free %.1f\n", malloc_free(quick ? 5000 : 20000));
    printf("launch_sync %.2f\n", launch_sync(stream, quick ? 500 : 2000));
    memset(host, 7, COPY_BYTES);  /* prefaulted, as the np.copyto limit's buffers */
    OK(aclrtMalloc(&dev, COPY_BYTES, ACL_MEM_MALLOC_HUGE_FIRST));
    printf("h2d %.3f\n", copy_rate(dev, host, ACL_MEMCPY_HOST_TO_DEVICE, quick ? 3 : 7));
    printf("d2h %.3f\n", copy_rate(host, dev, ACL_MEMCPY_DEVICE_TO_HOST, quick ? 3 : 7));
    OK(aclrtFree(dev));
    OK(aclrtDestroyStream(stream));
    OK(aclrtResetDevice(0));
    OK(aclFinalize());
    free(host);
    return 0;
}
