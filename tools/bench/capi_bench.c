/* npuemu bench's C ABI figures, measured from C (built against the SDK tree by capi.py):
 * argv[1] = "quick" or "full", argv[2] = the launch rounds R. Prints "<key> <value>" lines:
 *   malloc_free  aclrtMalloc(256)+aclrtFree pairs per second (median of 3 calibrated samples,
 *                as capi.py measures the Python side's)
 *   launch_sync  R lines, each after a "go" line on stdin: the median microseconds of
 *                (500 or 2000) / R aclrtLaunchKernel (an empty AI Core kernel) +
 *                aclrtSynchronizeStream
 *   h2d, d2h     after one more "go": GB/s of aclrtMemcpy of 64 MiB between a malloc'd C
 *                buffer and the card
 * Exit status 1 (and a FAIL line) if a call fails or stdin closes early. */
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

static double pairs_time(long pairs)
{
    double t0 = now();
    long i;
    void *p = NULL;
    for (i = 0; i < pairs; i++) {
        OK(aclrtMalloc(&p, 256, ACL_MEM_MALLOC_HUGE_FIRST));
        OK(aclrtFree(p));
    }
    return now() - t0;
}

/* Pairs per second as the Python side's sample_rates measures them: calibrated so that one
 * sample lasts about sample_s (sampling.calibrate), then the median of `reps` samples. */
static double malloc_free(double sample_s, int reps)
{
    double t, rates[16];
    long k = 1;
    int i;
    for (;;) {
        t = pairs_time(k);
        if (t >= sample_s / 4 || k >= 1L << 22) {
            break;
        }
        k *= 4;
    }
    k = (long)(k * sample_s / (t > 1e-9 ? t : 1e-9) + 0.5);
    if (k < 1) {
        k = 1;
    }
    for (i = 0; i < reps; i++) {
        rates[i] = k / pairs_time(k);
    }
    qsort(rates, (size_t)reps, sizeof(double), by_value);
    return rates[reps / 2];
}

/* Waits for the bench's "go" line on stdin (the Python side measures in between); exits
 * with a FAIL line if stdin closes. */
static void wait_for_go(void)
{
    char line[16];
    fflush(stdout);
    if (fgets(line, sizeof line, stdin) == NULL) {
        printf("FAIL stdin closed\n");
        exit(1);
    }
}

/* Median microseconds of n launch+sync pairs. */
static double launch_sync(aclrtFuncHandle fn, aclrtStream stream, int n)
{
    double *us = malloc(sizeof(double) * (size_t)n), median;
    int i;
    for (i = 0; i < n; i++) {
        double t0 = now();
        OK(aclrtLaunchKernel(fn, 1, NULL, 0, stream));
        OK(aclrtSynchronizeStream(stream));
        us[i] = (now() - t0) * 1e6;
    }
    qsort(us, (size_t)n, sizeof(double), by_value);
    median = us[n / 2];
    free(us);
    return median;
}

/* `rounds` launch_sync lines of n / rounds pairs each, every one after a "go" line. */
static void launch_rounds(aclrtStream stream, int n, int rounds)
{
    aclrtBinHandle bin = NULL;
    aclrtFuncHandle fn = NULL;
    int r;
    OK(aclrtBinaryLoadFromData(EMPTY_KERNEL, sizeof EMPTY_KERNEL - 1, NULL, &bin));
    OK(aclrtBinaryGetFunction(bin, "empty", &fn));
    for (r = 0; r < rounds; r++) {
        wait_for_go();
        if (r == 0) {
            launch_sync(fn, stream, n / 10 + 1);  /* warm */
        }
        printf("launch_sync %.2f\n", launch_sync(fn, stream, n / rounds));
    }
    OK(aclrtBinaryUnLoad(bin));
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
    int rounds = argc > 2 ? atoi(argv[2]) : 1;
    aclrtStream stream = NULL;
    void *dev = NULL;
    char *host = malloc(COPY_BYTES);
    if (rounds < 1 || rounds > 50) {
        rounds = 1;
    }
    OK(aclInit(NULL));
    OK(aclrtSetDevice(0));
    OK(aclrtCreateStream(&stream));
    printf("malloc_free %.1f\n", malloc_free(quick ? 0.1 : 0.3, 3));
    launch_rounds(stream, quick ? 500 : 2000, rounds);
    wait_for_go();
    memset(host, 7, COPY_BYTES);  /* prefaulted, as the np.copyto limit's buffers */
    OK(aclrtMalloc(&dev, COPY_BYTES, ACL_MEM_MALLOC_HUGE_FIRST));
    printf("h2d %.3f\n", copy_rate(dev, host, ACL_MEMCPY_HOST_TO_DEVICE, quick ? 3 : 7));
    printf("d2h %.3f\n", copy_rate(host, dev, ACL_MEMCPY_DEVICE_TO_HOST, quick ? 3 : 7));
    OK(aclrtFree(dev));
    OK(aclrtDestroyStream(stream));
    OK(aclrtResetDevice(0));
    OK(aclFinalize());
    free(host);
    fflush(stdout);
    return 0;
}
