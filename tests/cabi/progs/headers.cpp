// Every header of the SDK, included as the samples include them; compiled with the flag
// sets the samples' own builds use (C++11/14/17, and as C by headers_c.c).
#include "acl/acl.h"
#include "acl/acl_op_compiler.h"
#include "acl/acl_prof.h"
#include "acl/ops/acl_cblas.h"
#include "acl/acl.h"  // twice: the guards hold
#include "hccl/hccl.h"

int main()
{
    aclFloat16 half = aclFloatToFloat16(1.5f);
    aclrtRunMode mode = ACL_HOST;
    static_assert(sizeof(aclrtMemUsageInfo) == 32 + 8 + 8 + 8 * sizeof(size_t), "layout");
    static_assert(sizeof(aclrtPtrAttributes) == 28, "layout");
    static_assert(sizeof(HcclRootInfo) == 4108, "layout");
    HcclCommConfig config;
    HcclCommConfigInit(&config);
    const uint32_t *head = reinterpret_cast<const uint32_t *>(config.reserved);
    return (ACL_SUCCESS == 0 && ACL_ERROR_NONE == 0 && mode == ACL_HOST &&
            aclFloat16ToFloat(half) == 1.5f && head[1] == 0xf0f0f0f0u && head[2] == 6 &&
            HCCL_DATA_TYPE_FP32 == 4 && HCCL_REDUCE_SUM == 0) ? 0 : 1;
}
