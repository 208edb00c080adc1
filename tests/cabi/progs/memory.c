/* Memory management from C: every malloc policy, host memory, memset, memcpy sync and async
 * in every direction, 2d copies, memory info, usage info and pointer attributes. */
#include <stdint.h>
#include <string.h>
#include "check.h"

#define N (1u << 16)

static void policies(void)
{
    const aclrtMemMallocPolicy policies[] = {
        ACL_MEM_MALLOC_HUGE_FIRST, ACL_MEM_MALLOC_HUGE_ONLY, ACL_MEM_MALLOC_NORMAL_ONLY,
        ACL_MEM_MALLOC_HUGE_FIRST_P2P, ACL_MEM_MALLOC_HUGE_ONLY_P2P,
        ACL_MEM_MALLOC_NORMAL_ONLY_P2P};
    size_t i;
    for (i = 0; i < sizeof policies / sizeof policies[0]; i++) {
        void *p = NULL;
        CHECK(aclrtMalloc(&p, 4u << 20, policies[i]));
        EXPECT(p != NULL && ((uintptr_t)p % 64) == 0);
        CHECK(aclrtFree(p));
    }
    {
        void *p = NULL;
        CHECK(aclrtMalloc(&p, 4096,
                          (aclrtMemMallocPolicy)(ACL_MEM_MALLOC_HUGE_FIRST |
                                                 ACL_MEM_TYPE_HIGH_BAND_WIDTH)));
        CHECK(aclrtFree(p));
        CHECK(aclrtMallocAlign32(&p, 100, ACL_MEM_MALLOC_NORMAL_ONLY));
        CHECK(aclrtFree(p));
        CHECK(aclrtMallocCached(&p, 100, ACL_MEM_MALLOC_NORMAL_ONLY));
        CHECK(aclrtFree(p));
    }
    printf("policies ok\n");
}

static void copies(aclrtStream stream)
{
    unsigned char *src = (unsigned char *)malloc(N), *dst = (unsigned char *)malloc(N);
    void *pinned = NULL, *dev = NULL, *dev2 = NULL;
    unsigned i;
    for (i = 0; i < N; i++) {
        src[i] = (unsigned char)(i * 7 + 3);
    }
    CHECK(aclrtMallocHost(&pinned, N));
    CHECK(aclrtMalloc(&dev, N, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc(&dev2, N, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMemcpy(dev, N, src, N, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK(aclrtMemcpy(dev2, N, dev, N, ACL_MEMCPY_DEVICE_TO_DEVICE));
    CHECK(aclrtMemcpy(dst, N, dev2, N, ACL_MEMCPY_DEVICE_TO_HOST));
    EXPECT(memcmp(src, dst, N) == 0);
    /* async through pinned memory, then a fill on the card */
    memcpy(pinned, src, N);
    CHECK(aclrtMemsetAsync(dev, N, 0, N, stream));
    CHECK(aclrtMemcpyAsync(dev, N, pinned, N, ACL_MEMCPY_HOST_TO_DEVICE, stream));
    CHECK(aclrtMemsetAsync(dev, N, 0x5A, 16, stream));
    CHECK(aclrtMemcpyAsync(pinned, N, dev, N, ACL_MEMCPY_DEVICE_TO_HOST, stream));
    CHECK(aclrtSynchronizeStream(stream));
    EXPECT(((unsigned char *)pinned)[0] == 0x5A && ((unsigned char *)pinned)[15] == 0x5A);
    EXPECT(memcmp((unsigned char *)pinned + 16, src + 16, N - 16) == 0);
    /* host-to-host and memset on pinned memory, as the memcpy samples do */
    CHECK(aclrtMemset(pinned, N, 1, N));
    CHECK(aclrtMemcpy(dst, N, pinned, N, ACL_MEMCPY_HOST_TO_HOST));
    EXPECT(dst[0] == 1 && dst[N - 1] == 1);
    /* a 2d copy: 16 rows of 64 bytes out of rows of 256 */
    CHECK(aclrtMemcpy2d(dev, 64, src, 256, 64, 16, ACL_MEMCPY_HOST_TO_DEVICE));
    memset(dst, 0, N);
    CHECK(aclrtMemcpy(dst, N, dev, 64 * 16, ACL_MEMCPY_DEVICE_TO_HOST));
    EXPECT(memcmp(dst + 64, src + 256, 64) == 0);
    CHECK(aclrtFree(dev));
    CHECK(aclrtFree(dev2));
    CHECK(aclrtFreeHost(pinned));
    free(src);
    free(dst);
    printf("copies ok\n");
}

static void info(void)
{
    size_t free_b = 0, total = 0, n = 0, i;
    void *p = NULL;
    aclrtPtrAttributes attrs;
    aclrtMemUsageInfo usage[8];
    CHECK(aclrtGetMemInfo(ACL_HBM_MEM, &free_b, &total));
    EXPECT(total > 0 && free_b <= total);
    CHECK(aclrtGetMemInfo(ACL_DDR_MEM, &free_b, &total));
    CHECK(aclrtMalloc(&p, 1u << 20, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtPointerGetAttributes(p, &attrs));
    EXPECT(attrs.location.type == ACL_MEM_LOCATION_TYPE_DEVICE && attrs.location.id == 0);
    CHECK(aclrtPointerGetAttributes(&n, &attrs));
    EXPECT(attrs.location.type == ACL_MEM_LOCATION_TYPE_UNREGISTERED);
    CHECK(aclrtGetMemUsageInfo(0, usage, 8, &n));
    EXPECT(n >= 1);
    for (i = 0; i < n; i++) {
        printf("usage %s cur=%llu peak=%llu\n", usage[i].name,
               (unsigned long long)usage[i].curMemSize,
               (unsigned long long)usage[i].memPeakSize);
    }
    CHECK(aclrtFree(p));
    printf("info ok hbm_total=%zu\n", total);
}

int main(void)
{
    aclrtStream stream = NULL;
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    CHECK(aclrtCreateStream(&stream));
    policies();
    copies(stream);
    info();
    CHECK(aclrtDestroyStream(stream));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("memory program done\n");
    return 0;
}
