/* The CANN runtime's usage examples from C. argv[1]: the SDK's kernel library, argv[2]: the test
 * kernel file (nap).
 * 1. Copy/compute overlap on two streams with events: the copy stream moves chunk k+1's
 *    inputs while the compute stream adds chunk k (the library's add kernel); the compute
 *    stream waits on the copy's event, the copy-back waits on the compute's.
 * 2. aclrtSynchronizeStreamWithTimeout: 507046 while a 400 ms task runs, then success.
 * 3. aclrtGetMemUsageInfo: the current usage grows by what was allocated.
 * 4. A stream made with config and flags, an event with flags, their status queries. */
#include <string.h>
#include "check.h"

#define CHUNKS 4
#define N 4096

static void overlap(const char *library)
{
    aclrtStream copy = NULL, compute = NULL;
    aclrtEvent loaded[CHUNKS], done[CHUNKS], start = NULL, end = NULL;
    aclrtBinHandle bin = NULL;
    aclrtFuncHandle add = NULL;
    static float x[CHUNKS][N], y[CHUNKS][N], z[CHUNKS][N];
    void *dx[CHUNKS], *dy[CHUNKS], *dz[CHUNKS];
    float ms = -1.0f;
    int k, i;
    CHECK(aclrtCreateStream(&copy));
    CHECK(aclrtCreateStream(&compute));
    CHECK(aclrtBinaryLoadFromFile(library, NULL, &bin));
    CHECK(aclrtBinaryGetFunction(bin, "add", &add));
    CHECK(aclrtCreateEvent(&start));
    CHECK(aclrtCreateEvent(&end));
    for (k = 0; k < CHUNKS; k++) {
        for (i = 0; i < N; i++) {
            x[k][i] = (float)(k * N + i);
            y[k][i] = 0.5f;
        }
        CHECK(aclrtMalloc(&dx[k], sizeof x[k], ACL_MEM_MALLOC_HUGE_FIRST));
        CHECK(aclrtMalloc(&dy[k], sizeof y[k], ACL_MEM_MALLOC_HUGE_FIRST));
        CHECK(aclrtMalloc(&dz[k], sizeof z[k], ACL_MEM_MALLOC_HUGE_FIRST));
        CHECK(aclrtCreateEventWithFlag(&loaded[k], ACL_EVENT_SYNC));
        CHECK(aclrtCreateEventWithFlag(&done[k], ACL_EVENT_SYNC));
    }
    CHECK(aclrtRecordEvent(start, compute));
    for (k = 0; k < CHUNKS; k++) {
        uint64_t args[4];
        CHECK(aclrtMemcpyAsync(dx[k], sizeof x[k], x[k], sizeof x[k],
                               ACL_MEMCPY_HOST_TO_DEVICE, copy));
        CHECK(aclrtMemcpyAsync(dy[k], sizeof y[k], y[k], sizeof y[k],
                               ACL_MEMCPY_HOST_TO_DEVICE, copy));
        CHECK(aclrtRecordEvent(loaded[k], copy));
        CHECK(aclrtStreamWaitEvent(compute, loaded[k]));
        args[0] = (uint64_t)(uintptr_t)dx[k];
        args[1] = (uint64_t)(uintptr_t)dy[k];
        args[2] = (uint64_t)(uintptr_t)dz[k];
        args[3] = N;
        CHECK(aclrtLaunchKernel(add, 4, args, sizeof args, compute));
        CHECK(aclrtRecordEvent(done[k], compute));
    }
    for (k = 0; k < CHUNKS; k++) {  /* copies back, each after its chunk's compute */
        CHECK(aclrtStreamWaitEvent(copy, done[k]));
        CHECK(aclrtMemcpyAsync(z[k], sizeof z[k], dz[k], sizeof z[k],
                               ACL_MEMCPY_DEVICE_TO_HOST, copy));
    }
    CHECK(aclrtRecordEvent(end, compute));
    CHECK(aclrtSynchronizeStream(copy));
    CHECK(aclrtSynchronizeEvent(end));
    CHECK(aclrtEventElapsedTime(&ms, start, end));
    for (k = 0; k < CHUNKS; k++) {
        for (i = 0; i < N; i++) {
            EXPECT(z[k][i] == x[k][i] + 0.5f);
        }
        CHECK(aclrtDestroyEvent(loaded[k]));
        CHECK(aclrtDestroyEvent(done[k]));
        CHECK(aclrtFree(dx[k]));
        CHECK(aclrtFree(dy[k]));
        CHECK(aclrtFree(dz[k]));
    }
    EXPECT(ms >= 0.0f);
    CHECK(aclrtDestroyEvent(start));
    CHECK(aclrtDestroyEvent(end));
    CHECK(aclrtBinaryUnLoad(bin));
    CHECK(aclrtDestroyStream(copy));
    CHECK(aclrtDestroyStream(compute));
    printf("overlap ok: %d chunks, compute stream %.3f ms\n", CHUNKS, ms);
}

static void sync_with_timeout(const char *kernels)
{
    aclrtStream stream = NULL;
    aclrtBinHandle bin = NULL;
    aclrtFuncHandle nap = NULL;
    aclrtStreamStatus status = ACL_STREAM_STATUS_RESERVED;
    uint64_t ms = 400;
    CHECK(aclrtCreateStream(&stream));
    CHECK(aclrtBinaryLoadFromFile(kernels, NULL, &bin));
    CHECK(aclrtBinaryGetFunction(bin, "nap", &nap));
    CHECK(aclrtLaunchKernel(nap, 1, &ms, sizeof ms, stream));
    EXPECT_CODE(ACL_ERROR_RT_STREAM_SYNC_TIMEOUT, aclrtSynchronizeStreamWithTimeout(stream, 50));
    CHECK(aclrtStreamQuery(stream, &status));
    EXPECT(status == ACL_STREAM_STATUS_NOT_READY);
    CHECK(aclrtSynchronizeStreamWithTimeout(stream, 10000));
    CHECK(aclrtStreamQuery(stream, &status));
    EXPECT(status == ACL_STREAM_STATUS_COMPLETE);
    CHECK(aclrtBinaryUnLoad(bin));
    CHECK(aclrtDestroyStream(stream));
    printf("sync with timeout ok\n");
}

static uint64_t usage_total(void)
{
    aclrtMemUsageInfo info[16];
    size_t n = 0, i;
    CHECK(aclrtGetMemUsageInfo(0, info, 16, &n));
    for (i = 0; i < n; i++) {
        if (strcmp(info[i].name, "total") == 0) {
            return info[i].curMemSize;
        }
    }
    return 0;
}

static void mem_usage(void)
{
    void *p = NULL;
    uint64_t before = usage_total(), after;
    CHECK(aclrtMalloc(&p, 8u << 20, ACL_MEM_MALLOC_HUGE_FIRST));
    after = usage_total();
    EXPECT(after >= before + (8u << 20));
    CHECK(aclrtFree(p));
    printf("mem usage ok: %llu -> %llu bytes\n", (unsigned long long)before,
           (unsigned long long)after);
}

static void flags(void)
{
    aclrtStream stream = NULL;
    aclrtEvent event = NULL;
    aclrtEventRecordedStatus recorded = ACL_EVENT_RECORDED_STATUS_NOT_READY;
    aclrtEventStatus status = ACL_EVENT_STATUS_RESERVED;
    int32_t least = -1, greatest = -1;
    CHECK(aclrtDeviceGetStreamPriorityRange(&least, &greatest));
    EXPECT(least == 7 && greatest == 0);
    CHECK(aclrtCreateStreamWithConfig(&stream, 3, ACL_STREAM_FAST_LAUNCH | ACL_STREAM_FAST_SYNC));
    CHECK(aclrtCreateEventWithFlag(&event, ACL_EVENT_SYNC | ACL_EVENT_TIME_LINE));
    CHECK(aclrtRecordEvent(event, stream));
    CHECK(aclrtSynchronizeEvent(event));
    CHECK(aclrtQueryEventStatus(event, &recorded));
    CHECK(aclrtQueryEvent(event, &status));
    EXPECT(recorded == ACL_EVENT_RECORDED_STATUS_COMPLETE && status == ACL_EVENT_STATUS_COMPLETE);
    CHECK(aclrtDestroyEvent(event));
    CHECK(aclrtDestroyStream(stream));
    printf("stream and event flags ok\n");
}

int main(int argc, char **argv)
{
    EXPECT(argc == 3);
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    overlap(argv[1]);
    sync_with_timeout(argv[2]);
    mem_usage();
    flags();
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("seed examples done\n");
    return 0;
}
