/* Many C threads at once: each binds device 0, makes its own stream, and copies through
 * its own memory; the current device and last error are per thread. */
#include <pthread.h>
#include <string.h>
#include "check.h"

#define THREADS 6
#define ROUNDS 40

static void *worker(void *arg)
{
    int id = (int)(size_t)arg, i;
    aclrtStream stream = NULL;
    int32_t dev = -1;
    unsigned char in[512], out[512];
    CHECK(aclrtSetDevice(0));
    CHECK(aclrtGetDevice(&dev));
    EXPECT(dev == 0);
    CHECK(aclrtCreateStream(&stream));
    for (i = 0; i < ROUNDS; i++) {
        void *p = NULL;
        memset(in, id * 16 + i, sizeof in);
        CHECK(aclrtMalloc(&p, sizeof in, ACL_MEM_MALLOC_HUGE_FIRST));
        CHECK(aclrtMemcpyAsync(p, sizeof in, in, sizeof in, ACL_MEMCPY_HOST_TO_DEVICE, stream));
        CHECK(aclrtSynchronizeStream(stream));
        CHECK(aclrtMemcpy(out, sizeof out, p, sizeof out, ACL_MEMCPY_DEVICE_TO_HOST));
        EXPECT(memcmp(in, out, sizeof in) == 0);
        CHECK(aclrtFree(p));
    }
    EXPECT(aclrtFree(NULL) == ACL_ERROR_INVALID_PARAM);
    EXPECT(aclrtGetLastError(ACL_RT_THREAD_LEVEL) == ACL_ERROR_INVALID_PARAM);
    CHECK(aclrtDestroyStream(stream));
    CHECK(aclrtResetDevice(0));
    return NULL;
}

int main(void)
{
    pthread_t threads[THREADS];
    int i;
    int32_t dev = -1;
    CHECK(aclInit(NULL));
    for (i = 0; i < THREADS; i++) {
        EXPECT(pthread_create(&threads[i], NULL, worker, (void *)(size_t)i) == 0);
    }
    for (i = 0; i < THREADS; i++) {
        pthread_join(threads[i], NULL);
    }
    EXPECT(aclrtGetDevice(&dev) == ACL_ERROR_RT_CONTEXT_NULL);  /* main never set one */
    CHECK(aclFinalize());
    printf("%d threads x %d rounds ok\n", THREADS, ROUNDS);
    return 0;
}
