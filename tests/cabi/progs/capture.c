/* Stream capture and replay from C (aclmdlRI* of acl_rt.h). argv[1]: the test kernel file
 * (scale2 doubles float32 values in place). A chain of three scale2 launches is captured,
 * replayed twice (x * 64), a model is built by hand on a persistent stream, and the codes of
 * a forbidden synchronize and of a call npuemu does not emulate are checked. */
#include <string.h>
#include "check.h"

#define N 256

int main(int argc, char **argv)
{
    aclrtStream stream = NULL, persistent = NULL;
    aclrtBinHandle bin = NULL;
    aclrtFuncHandle scale2 = NULL;
    aclmdlRI ri = NULL, built = NULL, info_ri = NULL;
    aclmdlRICaptureStatus status = ACL_MODEL_RI_CAPTURE_STATUS_NONE;
    aclmdlRICaptureMode mode = ACL_MODEL_RI_CAPTURE_MODE_RELAXED;
    aclrtStream streams[4];
    uint32_t count = 4, id = 0;
    char name[32];
    static float host[N];
    void *dev = NULL;
    uint64_t args[2];
    int i, k;
    if (argc < 2) {
        return 2;
    }
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    CHECK(aclrtCreateStream(&stream));
    CHECK(aclrtBinaryLoadFromFile(argv[1], NULL, &bin));
    CHECK(aclrtBinaryGetFunction(bin, "scale2", &scale2));
    for (i = 0; i < N; i++) {
        host[i] = (float)i;
    }
    CHECK(aclrtMalloc(&dev, sizeof host, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMemcpy(dev, sizeof host, host, sizeof host, ACL_MEMCPY_HOST_TO_DEVICE));
    args[0] = (uint64_t)(uintptr_t)dev;
    args[1] = N;

    CHECK(aclmdlRICaptureBegin(stream, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL));
    CHECK(aclmdlRICaptureGetInfo(stream, &status, &info_ri));
    if (status != ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE || info_ri == NULL) {
        printf("FAIL capture status %d\n", (int)status);
        return 1;
    }
    for (k = 0; k < 3; k++) {
        CHECK(aclrtLaunchKernel(scale2, 2, args, sizeof args, stream));
    }
    EXPECT_CODE(ACL_ERROR_RT_STREAM_CAPTURED, aclrtSynchronizeStream(stream));
    EXPECT_CODE(ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT,
                aclrtMemcpy(host, sizeof host, dev, sizeof host, ACL_MEMCPY_DEVICE_TO_HOST));
    CHECK(aclmdlRICaptureThreadExchangeMode(&mode));
    if (mode != ACL_MODEL_RI_CAPTURE_MODE_GLOBAL) {
        printf("FAIL exchanged mode %d\n", (int)mode);
        return 1;
    }
    CHECK(aclmdlRICaptureThreadExchangeMode(&mode));
    CHECK(aclmdlRICaptureEnd(stream, &ri));
    if (ri != info_ri) {
        printf("FAIL GetInfo named another instance\n");
        return 1;
    }
    CHECK(aclmdlRISetName(ri, "chain"));
    CHECK(aclmdlRIGetName(ri, sizeof name, name));
    CHECK(aclmdlRIGetId(ri, &id));
    CHECK(aclmdlRIGetStreams(ri, streams, &count));
    if (strcmp(name, "chain") != 0 || id == 0 || count != 1 || streams[0] != stream) {
        printf("FAIL name %s id %u count %u\n", name, id, count);
        return 1;
    }
    CHECK(aclmdlRIDebugPrint(ri));
    for (k = 0; k < 2; k++) {
        CHECK(aclmdlRIExecuteAsync(ri, stream));
    }
    CHECK(aclrtSynchronizeStream(stream));
    CHECK(aclrtMemcpy(host, sizeof host, dev, sizeof host, ACL_MEMCPY_DEVICE_TO_HOST));
    for (i = 0; i < N; i++) {
        if (host[i] != (float)i * 64.0f) {
            printf("FAIL host[%d] = %f\n", i, host[i]);
            return 1;
        }
    }
    printf("replay ok\n");
    EXPECT_CODE(ACL_ERROR_RT_PARAM_INVALID, aclmdlRIExecute(ri, -1));
    EXPECT_CODE(ACL_ERROR_RT_FEATURE_NOT_SUPPORT, aclmdlRIUpdate(ri));
    CHECK(aclmdlRIDestroy(ri));

    CHECK(aclrtCreateStreamWithConfig(&persistent, 0, ACL_STREAM_PERSISTENT));
    CHECK(aclmdlRIBuildBegin(&built, 0));
    CHECK(aclmdlRIBindStream(built, persistent, ACL_MODEL_STREAM_FLAG_HEAD));
    CHECK(aclrtLaunchKernel(scale2, 1, args, sizeof args, persistent));
    CHECK(aclrtSynchronizeStream(persistent));  /* returns at once: nothing runs there */
    CHECK(aclmdlRIEndTask(built, persistent));
    CHECK(aclmdlRIBuildEnd(built, NULL));
    CHECK(aclmdlRIExecute(built, -1));
    CHECK(aclrtMemcpy(host, sizeof host, dev, sizeof host, ACL_MEMCPY_DEVICE_TO_HOST));
    if (host[3] != 3.0f * 128.0f) {
        printf("FAIL built model gave %f\n", host[3]);
        return 1;
    }
    printf("built ok\n");
    CHECK(aclmdlRIUnbindStream(built, persistent));
    CHECK(aclmdlRIDestroy(built));
    CHECK(aclrtDestroyStream(persistent));
    CHECK(aclrtFree(dev));
    CHECK(aclrtDestroyStream(stream));
    CHECK(aclrtBinaryUnLoad(bin));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("capture program done\n");
    return 0;
}
