/* Bad input from C: NULL, dangling and foreign handles, wrong sizes, host pointers where
 * the card's are needed. Each call gets the runtime's code; the program (and the card) go
 * on, as the last round trip shows. */
#include <stdint.h>
#include <string.h>
#include "check.h"

int main(void)
{
    aclrtStream stream = NULL, dead = NULL;
    aclrtEvent event = NULL;
    void *dev = NULL, *freed = NULL;
    char host[256];
    int32_t id = -1;
    uint32_t count = 0;

    CHECK(aclInit(NULL));
    EXPECT_CODE(ACL_ERROR_REPEAT_INITIALIZE, aclInit(NULL));
    EXPECT_CODE(ACL_ERROR_RT_CONTEXT_NULL, aclrtGetDevice(&id));
    EXPECT_CODE(ACL_ERROR_RT_INVALID_DEVICEID, aclrtSetDevice(99));
    EXPECT_CODE(ACL_ERROR_RT_INVALID_DEVICEID, aclrtSetDevice(-1));
    CHECK(aclrtSetDevice(0));
    EXPECT_CODE(ACL_ERROR_INVALID_PARAM, aclrtGetDeviceCount(NULL));
    CHECK(aclrtGetDeviceCount(&count));
    EXPECT(count >= 1);

    /* out-parameters that are NULL */
    EXPECT_CODE(ACL_ERROR_INVALID_PARAM, aclrtCreateStream(NULL));
    EXPECT_CODE(ACL_ERROR_INVALID_PARAM, aclrtCreateEvent(NULL));
    EXPECT_CODE(ACL_ERROR_INVALID_PARAM, aclrtMalloc(NULL, 64, ACL_MEM_MALLOC_HUGE_FIRST));
    EXPECT_CODE(ACL_ERROR_INVALID_PARAM, aclrtMalloc(&dev, 0, ACL_MEM_MALLOC_HUGE_FIRST));
    EXPECT_CODE(ACL_ERROR_INVALID_PARAM, aclrtCreateContext(NULL, 0));

    /* handles that name nothing, or something already destroyed */
    EXPECT_CODE(ACL_ERROR_RT_PARAM_INVALID, aclrtDestroyStream((aclrtStream)0x1234));
    EXPECT_CODE(ACL_ERROR_RT_PARAM_INVALID, aclrtSynchronizeStream((aclrtStream)host));
    CHECK(aclrtCreateStream(&dead));
    CHECK(aclrtDestroyStream(dead));
    EXPECT_CODE(ACL_ERROR_RT_PARAM_INVALID, aclrtSynchronizeStream(dead));
    EXPECT_CODE(ACL_ERROR_RT_PARAM_INVALID, aclrtDestroyStream(dead));
    EXPECT_CODE(ACL_ERROR_RT_PARAM_INVALID, aclrtRecordEvent((aclrtEvent)0x77, NULL));
    EXPECT_CODE(ACL_ERROR_RT_PARAM_INVALID, aclrtDestroyContext((aclrtContext)0x99));
    CHECK(aclrtCreateEvent(&event));
    CHECK(aclrtDestroyEvent(event));
    EXPECT_CODE(ACL_ERROR_RT_PARAM_INVALID, aclrtSynchronizeEvent(event));

    /* memory: dangling, host where device is needed, sizes past the end */
    CHECK(aclrtMalloc(&freed, 1024, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtFree(freed));
    EXPECT_CODE(ACL_ERROR_RT_PARAM_INVALID, aclrtFree(freed));
    EXPECT_CODE(ACL_ERROR_RT_PARAM_INVALID,
                aclrtMemcpy(freed, 16, "sixteen bytes..", 16, ACL_MEMCPY_HOST_TO_DEVICE));
    EXPECT_CODE(ACL_ERROR_RT_PARAM_INVALID, aclrtFree(host));
    EXPECT_CODE(ACL_ERROR_INVALID_PARAM, aclrtFree(NULL));
    CHECK(aclrtMalloc(&dev, 1024, ACL_MEM_MALLOC_HUGE_FIRST));
    memset(host, 1, sizeof host);
    EXPECT_CODE(ACL_ERROR_RT_PARAM_INVALID,
                aclrtMemcpy(dev, 8, host, 16, ACL_MEMCPY_HOST_TO_DEVICE));
    EXPECT_CODE(ACL_ERROR_RT_PARAM_INVALID,
                aclrtMemcpy((char *)dev + 1000, 4096, host, 256, ACL_MEMCPY_HOST_TO_DEVICE));
    EXPECT_CODE(ACL_ERROR_INVALID_PARAM, aclrtGetMemInfo(ACL_HBM_MEM, NULL, NULL));
    EXPECT_CODE(ACL_ERROR_INVALID_PARAM, aclrtPointerGetAttributes(NULL, NULL));

    /* descriptors, buffers, datasets, models and op handles that name nothing */
    {
        aclTensorDesc *junk_desc = (aclTensorDesc *)(uintptr_t)0x1234;
        aclDataBuffer *junk_buf = (aclDataBuffer *)(uintptr_t)0x5678;
        aclTensorDesc *descs[1];
        aclDataBuffer *bufs[1];
        aclmdlDataset *ds = aclmdlCreateDataset();
        descs[0] = junk_desc;
        bufs[0] = junk_buf;
        EXPECT(aclGetTensorDescSize(junk_desc) == 0 && aclGetTensorDescNumDims(NULL) == 0);
        EXPECT(aclGetDataBufferAddr(junk_buf) == NULL && aclGetDataBufferSizeV2(NULL) == 0);
        EXPECT(aclDestroyDataBuffer(NULL) != ACL_SUCCESS);
        aclDestroyTensorDesc(junk_desc);
        EXPECT(aclopExecuteV2("Add", 1, descs, bufs, 1, descs, bufs, NULL, NULL) != ACL_SUCCESS);
        EXPECT(aclmdlAddDatasetBuffer(ds, junk_buf) != ACL_SUCCESS);
        EXPECT(aclmdlAddDatasetBuffer((aclmdlDataset *)(uintptr_t)0x99, NULL) != ACL_SUCCESS);
        EXPECT(aclmdlExecute(12345, ds, ds) != ACL_SUCCESS);
        EXPECT(aclmdlUnload(12345) != ACL_SUCCESS);
        EXPECT(aclmdlGetNumInputs((aclmdlDesc *)(uintptr_t)0x42) == 0);
        EXPECT(aclopExecWithHandle((aclopHandle *)(uintptr_t)0x77, 0, NULL, 0, NULL, NULL) !=
               ACL_SUCCESS);
        EXPECT(aclrtLaunchKernel((aclrtFuncHandle)(uintptr_t)0x11, 1, NULL, 0, NULL) !=
               ACL_SUCCESS);
        EXPECT_CODE(ACL_ERROR_INVALID_PARAM, aclrtLaunchKernel(NULL, 1, host, 12, NULL));
        CHECK(aclmdlDestroyDataset(ds));
        printf("junk descriptors, buffers, models and handles refused\n");
    }

    /* timeouts out of range */
    CHECK(aclrtCreateStream(&stream));
    EXPECT_CODE(ACL_ERROR_RT_PARAM_INVALID, aclrtSynchronizeStreamWithTimeout(stream, -5));

    /* the card still works after all of this */
    CHECK(aclrtMemcpy(dev, 1024, host, sizeof host, ACL_MEMCPY_HOST_TO_DEVICE));
    memset(host, 0, sizeof host);
    CHECK(aclrtMemcpy(host, sizeof host, dev, sizeof host, ACL_MEMCPY_DEVICE_TO_HOST));
    EXPECT(host[0] == 1 && host[255] == 1);
    EXPECT(aclGetRecentErrMsg() != NULL);
    CHECK(aclrtFree(dev));
    CHECK(aclrtDestroyStream(stream));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    EXPECT_CODE(ACL_ERROR_REPEAT_FINALIZE, aclFinalize());
    printf("bad handles done\n");
    return 0;
}
