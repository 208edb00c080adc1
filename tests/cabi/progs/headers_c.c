/* The headers as C (gcc -std=c99 -Wall): the constants, enums and structs programs use. */
#include "acl/acl.h"
#include "acl/acl_op_compiler.h"
#include "acl/acl_prof.h"
#include "acl/ops/acl_cblas.h"
#include "hccl/hccl.h"
#include <string.h>

int main(void)
{
    aclrtMemUsageInfo usage;
    aclrtUtilizationInfo util;
    memset(&usage, 0, sizeof usage);
    memset(&util, 0, sizeof util);
    return (ACL_ERROR_RT_FEATURE_NOT_SUPPORT == 207000 && ACL_ERROR_INVALID_PARAM == 100000 &&
            ACL_PKG_VERSION_MAX_SIZE == 128 && ACL_CALLBACK_BLOCK == 1 && ACL_DDR_MEM == 0 &&
            ACL_HBM_MEM == 1 && ACL_RT_THREAD_LEVEL == 0 && ACL_DT_UNDEFINED == -1 &&
            ACL_FORMAT_UNDEFINED == -1 && sizeof(aclFloat16) == 2) ? 0 : 1;
}
