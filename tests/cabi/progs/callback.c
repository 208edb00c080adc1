#define _DEFAULT_SOURCE 1 /* usleep */
/* Host callbacks from C: a C report thread subscribed with its pthread id serves
 * aclrtLaunchCallback in aclrtProcessReport; aclrtLaunchHostFunc runs on the runtime's own
 * thread; a failing kernel reaches the exception callback, read with the getters.
 * argv[1]: the kernel file holding boom_core. */
#include <pthread.h>
#include <string.h>
#include <unistd.h>
#include "check.h"
#include "report.h"

static volatile int served, host_funcs, exceptions;
static pthread_t report_thread, served_on, host_func_on;
static report_loop reports;
static uint32_t exc_code, exc_device, exc_stream, exc_null;

static void on_callback(void *user)
{
    served_on = pthread_self();
    *(int *)user += 1;
    served++;
}

static void on_host_func(void *user)
{
    host_func_on = pthread_self();
    (void)user;
    host_funcs++;
}

static void on_exception(aclrtExceptionInfo *info)
{
    exc_code = aclrtGetErrorCodeFromExceptionInfo(info);
    exc_device = aclrtGetDeviceIdFromExceptionInfo(info);
    exc_stream = aclrtGetStreamIdFromExceptionInfo(info);
    exc_null = aclrtGetTaskIdFromExceptionInfo(NULL);
    exceptions++;
}

int main(int argc, char **argv)
{
    aclrtStream stream = NULL, lonely = NULL;
    aclrtBinHandle bin = NULL;
    aclrtFuncHandle boom = NULL;
    int counter = 0, i, sid = -1;
    void *dev = NULL;
    EXPECT(argc == 2);
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    CHECK(aclrtGetCurrentContext(&reports.context));
    CHECK(aclrtCreateStream(&stream));
    CHECK(aclrtCreateStream(&lonely));
    CHECK(aclrtMalloc(&dev, 4096, ACL_MEM_MALLOC_HUGE_FIRST));
    EXPECT(pthread_create(&report_thread, NULL, serve_reports, &reports) == 0);
    CHECK(aclrtSubscribeReport((uint64_t)report_thread, stream));
    EXPECT_CODE(ACL_ERROR_REPEAT_SUBSCRIBE, aclrtSubscribeReport((uint64_t)report_thread, stream));

    for (i = 0; i < 5; i++) {
        CHECK(aclrtMemsetAsync(dev, 4096, i, 4096, stream));
        CHECK(aclrtLaunchCallback(on_callback, &counter,
                                  i % 2 ? ACL_CALLBACK_NO_BLOCK : ACL_CALLBACK_BLOCK, stream));
    }
    CHECK(aclrtLaunchHostFunc(stream, on_host_func, NULL));
    CHECK(aclrtSynchronizeStream(stream));
    for (i = 0; i < 500 && served < 5; i++) {
        usleep(10000);  /* the NO_BLOCK ones may still be running */
    }
    EXPECT(served == 5 && counter == 5 && host_funcs == 1);
    EXPECT(pthread_equal(served_on, report_thread));
    EXPECT(!pthread_equal(host_func_on, report_thread) &&
           !pthread_equal(host_func_on, pthread_self()));
    printf("callbacks served on the subscribed C thread\n");

    EXPECT_CODE(ACL_ERROR_RT_STREAM_NO_CB_REG,
                aclrtLaunchCallback(on_callback, &counter, ACL_CALLBACK_BLOCK, lonely));
    EXPECT_CODE(ACL_ERROR_INVALID_PARAM,
                aclrtLaunchCallback(NULL, &counter, ACL_CALLBACK_BLOCK, stream));
    EXPECT_CODE(ACL_ERROR_RT_THREAD_SUBSCRIBE, aclrtProcessReport(10));
    EXPECT_CODE(ACL_ERROR_INVALID_PARAM, aclrtProcessReport(0));
    EXPECT_CODE(ACL_ERROR_INVALID_PARAM, aclrtProcessReport(-2));

    CHECK(aclrtSetExceptionInfoCallback(on_exception));
    CHECK(aclrtBinaryLoadFromFile(argv[1], NULL, &bin));
    CHECK(aclrtBinaryGetFunction(bin, "boom_core", &boom));
    EXPECT_CODE(ACL_ERROR_RT_PARAM_INVALID, aclrtBinaryGetFunction(bin, "nope", &boom));
    CHECK(aclrtBinaryGetFunction(bin, "boom_core", &boom));
    CHECK(aclrtLaunchKernel(boom, 1, NULL, 0, lonely));
    EXPECT_CODE(ACL_ERROR_RT_AICORE_EXCEPTION, aclrtSynchronizeStream(lonely));
    for (i = 0; i < 500 && exceptions == 0; i++) {
        usleep(10000);
    }
    CHECK(aclrtStreamGetId(lonely, &sid));
    EXPECT(exceptions == 1 && exc_code == ACL_ERROR_RT_AICORE_EXCEPTION && exc_device == 0);
    EXPECT(exc_stream == (uint32_t)sid && exc_null == 0xFFFFFFFFu);
    printf("exception info: code %u device %u stream %u\n", exc_code, exc_device, exc_stream);
    CHECK(aclrtSetExceptionInfoCallback(NULL));
    CHECK(aclrtBinaryUnLoad(bin));

    CHECK(aclrtUnSubscribeReport((uint64_t)report_thread, stream));
    reports.stop = 1;
    pthread_join(report_thread, NULL);
    CHECK(aclrtFree(dev));
    CHECK(aclrtDestroyStream(lonely));
    CHECK(aclrtDestroyStream(stream));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("callback program done\n");
    return 0;
}
