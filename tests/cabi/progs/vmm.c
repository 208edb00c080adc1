/* Memory in depth from C: a stream-ordered pool, a reserved address range backed by two
 * physical handles (copies through it), a shareable handle, peer status and topology,
 * and the execution timeout calls. */
#define _DEFAULT_SOURCE 1 /* getpid */
#include <string.h>
#include <unistd.h>
#include "check.h"

#define MiB (1u << 20)

static void pool(aclrtStream stream)
{
    aclrtMemPoolProps props;
    aclrtMemPool mp = NULL;
    void *p = NULL;
    uint64_t used = 0, threshold = 1 << 20;
    unsigned char back[4096];
    memset(&props, 0, sizeof props);
    props.allocType = ACL_MEM_ALLOCATION_TYPE_PINNED;
    props.handleType = ACL_MEM_HANDLE_TYPE_NONE;
    props.location.type = ACL_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = 0;
    CHECK(aclrtMemPoolCreate(&mp, &props));
    CHECK(aclrtMemPoolSetAttr(mp, ACL_RT_MEM_POOL_ATTR_RELEASE_THRESHOLD, &threshold));
    CHECK(aclrtMemPoolMallocAsync(&p, sizeof back, mp, stream));
    CHECK(aclrtMemsetAsync(p, sizeof back, 0x42, sizeof back, stream));
    CHECK(aclrtMemcpyAsync(back, sizeof back, p, sizeof back, ACL_MEMCPY_DEVICE_TO_HOST,
                           stream));
    CHECK(aclrtSynchronizeStream(stream));
    EXPECT(back[0] == 0x42 && back[4095] == 0x42);
    CHECK(aclrtMemPoolGetAttr(mp, ACL_RT_MEM_POOL_ATTR_USED_MEM_CURRENT, &used));
    EXPECT(used >= sizeof back);
    CHECK(aclrtMemPoolFreeAsync(p, stream));
    CHECK(aclrtSynchronizeStream(stream));
    CHECK(aclrtMemPoolTrimTo(mp, 0));
    CHECK(aclrtMemPoolDestroy(mp));
    EXPECT_CODE(ACL_ERROR_RT_PARAM_INVALID, aclrtMemPoolDestroy(mp));
    printf("pool ok (used %llu)\n", (unsigned long long)used);
}

static void virtual_memory(void)
{
    aclrtPhysicalMemProp prop;
    aclrtDrvMemHandle a = NULL, b = NULL;
    size_t gran = 0;
    void *va = NULL;
    uint64_t key = 0;
    int32_t pid = (int32_t)getpid();
    static unsigned char in[4 * MiB], out[4 * MiB];
    memset(&prop, 0, sizeof prop);
    prop.handleType = ACL_MEM_HANDLE_TYPE_NONE;
    prop.allocationType = ACL_MEM_ALLOCATION_TYPE_PINNED;
    prop.memAttr = ACL_MEM_HUGE;
    prop.location.type = ACL_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    CHECK(aclrtMemGetAllocationGranularity(&prop, ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM, &gran));
    EXPECT(gran == 2 * MiB);
    CHECK(aclrtReserveMemAddress(&va, 4 * MiB, 0, NULL, 0));
    CHECK(aclrtMallocPhysical(&a, 2 * MiB, &prop, 0));
    CHECK(aclrtMallocPhysical(&b, 2 * MiB, &prop, 0));
    CHECK(aclrtMapMem(va, 2 * MiB, 0, a, 0));
    CHECK(aclrtMapMem((char *)va + 2 * MiB, 2 * MiB, 0, b, 0));
    memset(in, 9, sizeof in);
    in[2 * MiB - 1] = 1;
    in[2 * MiB] = 2;
    CHECK(aclrtMemcpy(va, sizeof in, in, sizeof in, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK(aclrtMemcpy(out, sizeof out, va, sizeof out, ACL_MEMCPY_DEVICE_TO_HOST));
    EXPECT(memcmp(in, out, sizeof in) == 0);
    CHECK(aclrtMemExportToShareableHandle(a, (aclrtMemHandleType)ACL_MEM_SHARE_HANDLE_TYPE_DEFAULT,
                                          0, &key));
    EXPECT(key != 0);
    CHECK(aclrtMemSetPidToShareableHandle(key, &pid, 1));
    EXPECT_CODE(ACL_ERROR_RT_PARAM_INVALID, aclrtFreePhysical(a));  /* still mapped */
    CHECK(aclrtUnmapMem(va));
    CHECK(aclrtUnmapMem((char *)va + 2 * MiB));
    CHECK(aclrtFreePhysical(a));
    CHECK(aclrtFreePhysical(b));
    CHECK(aclrtReleaseMemAddress(va));
    printf("virtual memory ok\n");
}

int main(void)
{
    aclrtStream stream = NULL;
    int32_t status = -1;
    uint64_t topo = 0, actual = 0, interval = 0;
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    CHECK(aclrtCreateStream(&stream));
    pool(stream);
    virtual_memory();
    CHECK(aclrtDevicePeerAccessStatus(0, 1, &status));
    CHECK(aclrtGetDevicesTopo(0, 1, &topo));
    CHECK(aclrtGetOpTimeOutInterval(&interval));
    CHECK(aclrtSetOpExecuteTimeOutV2(interval * 3, &actual));
    EXPECT(interval > 0 && actual == interval * 3);
    printf("peer status %d topology %#llx\n", status, (unsigned long long)topo);
    CHECK(aclrtDestroyStream(stream));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("vmm program done\n");
    return 0;
}
