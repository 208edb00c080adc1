/* Helpers of the test programs: CHECK stops the program (exit 1) with the failing call,
 * its code and aclGetRecentErrMsg; EXPECT_CODE checks that a call returns a given code. */
#ifndef NPUEMU_TEST_CHECK_H_
#define NPUEMU_TEST_CHECK_H_

#include <stdio.h>
#include <stdlib.h>
#include "acl/acl.h"

#define CHECK(call)                                                                    \
    do {                                                                               \
        aclError check_ret_ = (call);                                                  \
        if (check_ret_ != ACL_SUCCESS) {                                               \
            const char *check_msg_ = aclGetRecentErrMsg();                             \
            printf("FAIL %s:%d %s -> %d (%s)\n", __FILE__, __LINE__, #call, check_ret_, \
                   check_msg_ ? check_msg_ : "");                                      \
            exit(1);                                                                   \
        }                                                                              \
    } while (0)

#define EXPECT_CODE(code, call)                                                        \
    do {                                                                               \
        aclError expect_ret_ = (call);                                                 \
        if (expect_ret_ != (code)) {                                                   \
            printf("FAIL %s:%d %s -> %d, expected %d\n", __FILE__, __LINE__, #call,    \
                   expect_ret_, (int)(code));                                          \
            exit(1);                                                                   \
        }                                                                              \
        printf("code %s = %d\n", #call, expect_ret_);                                  \
    } while (0)

#define EXPECT(cond)                                                                   \
    do {                                                                               \
        if (!(cond)) {                                                                 \
            printf("FAIL %s:%d %s\n", __FILE__, __LINE__, #cond);                      \
            exit(1);                                                                   \
        }                                                                              \
    } while (0)

#endif
