/* A declared call npuemu does not emulate links and answers 207000 (and a log line). */
#include "check.h"

int main(void)
{
    int32_t value = 0;
    CHECK(aclInit(NULL));
    EXPECT_CODE(ACL_ERROR_RT_FEATURE_NOT_SUPPORT, aclGetCannAttribute(ACL_CANN_ATTR_BF16, &value));
    EXPECT(aclGetRecentErrMsg() != NULL);
    printf("message: %s\n", aclGetRecentErrMsg());
    CHECK(aclFinalize());
    return 0;
}
