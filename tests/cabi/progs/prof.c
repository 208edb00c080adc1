/* The profiling sample flow from C: aclprofInit("./output"), a config with the API, task and
 * msproftx switches, aclprofSetConfig(ACL_PROF_SYS_HARDWARE_MEM_FREQ, "15"), start, some work
 * with marks and a range, stop, destroy, finalize (the PROF_* folder is then exported). */
#include <string.h>
#include "acl/acl_prof.h"
#include "check.h"

int main(void)
{
    const char *path = "./output", *freq = "15", *msg = "copy_mark";
    uint32_t devices[1] = {0}, range = 0;
    aclprofConfig *config;
    aclrtStream stream = NULL;
    void *stamp, *dev = NULL;
    char host[4096];
    int i;
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    CHECK(aclrtCreateStream(&stream));
    CHECK(aclprofInit(path, strlen(path)));
    config = aclprofCreateConfig(devices, 1, ACL_AICORE_ARITHMETIC_UTILIZATION, NULL,
                                 ACL_PROF_ACL_API | ACL_PROF_TASK_TIME | ACL_PROF_MSPROFTX |
                                 ACL_PROF_HCCL_TRACE | ACL_PROF_RUNTIME_API);
    EXPECT(config != NULL);
    CHECK(aclprofSetConfig(ACL_PROF_SYS_HARDWARE_MEM_FREQ, freq, strlen(freq)));
    CHECK(aclprofStart(config));
    stamp = aclprofCreateStamp();
    EXPECT(stamp != NULL);
    CHECK(aclprofSetStampTraceMessage(stamp, msg, (uint32_t)strlen(msg)));
    CHECK(aclprofMark(stamp));
    CHECK(aclprofRangeStart(stamp, &range));
    memset(host, 3, sizeof host);
    CHECK(aclrtMalloc(&dev, sizeof host, ACL_MEM_MALLOC_HUGE_FIRST));
    for (i = 0; i < 8; i++) {
        CHECK(aclrtMemcpyAsync(dev, sizeof host, host, sizeof host, ACL_MEMCPY_HOST_TO_DEVICE,
                               stream));
    }
    CHECK(aclrtSynchronizeStream(stream));
    CHECK(aclprofRangeStop(range));
    aclprofDestroyStamp(stamp);
    EXPECT_CODE(ACL_ERROR_PROF_ALREADY_RUN, aclprofStart(config));
    CHECK(aclprofStop(config));
    CHECK(aclprofDestroyConfig(config));
    CHECK(aclprofFinalize());
    EXPECT_CODE(ACL_ERROR_PROF_NOT_RUN, aclprofFinalize());
    CHECK(aclrtFree(dev));
    CHECK(aclrtDestroyStream(stream));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("prof program done\n");
    return 0;
}
