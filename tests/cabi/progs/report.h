/* The report thread of the callback tests: sets the context the main thread made current,
 * then serves aclrtProcessReport (100 ms at a time) until the stop flag is set; any code but
 * success, a timeout or "no stream subscribed yet" stops the program (exit 1). */
#ifndef NPUEMU_TEST_REPORT_H_
#define NPUEMU_TEST_REPORT_H_

#include "check.h"

typedef struct {
    aclrtContext context;
    volatile int stop;
} report_loop;

static void *serve_reports(void *arg)
{
    report_loop *loop = (report_loop *)arg;
    CHECK(aclrtSetCurrentContext(loop->context));
    while (!loop->stop) {
        aclError ret = aclrtProcessReport(100);
        if (ret != ACL_SUCCESS && ret != ACL_ERROR_RT_REPORT_TIMEOUT &&
            ret != ACL_ERROR_RT_THREAD_SUBSCRIBE) {
            printf("FAIL aclrtProcessReport -> %d\n", ret);
            exit(1);
        }
    }
    return NULL;
}

#endif
