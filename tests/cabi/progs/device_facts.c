/* Child of tests/cabi/test_cabi_fidelity.py: what a C program (a kernel launcher sizing its
 * grid, a monitor) asks of a card's SoC: aclGetDeviceCapability and aclrtGetDeviceInfo for
 * the core counts and the L2 size, their codes for a value they do not answer and for a NULL
 * output, and aclrtGetSocName. One line per answer: "<what> <ret> <value>". */
#include <stdio.h>
#include "acl/acl.h"

static void capability(const char *what, aclDeviceInfo info)
{
    int64_t value = -1;
    aclError ret = aclGetDeviceCapability(0, info, &value);
    printf("cap_%s %d %lld\n", what, (int)ret, (long long)value);
}

static void device_info(const char *what, aclrtDevAttr attr)
{
    int64_t value = -1;
    aclError ret = aclrtGetDeviceInfo(0, attr, &value);
    printf("info_%s %d %lld\n", what, (int)ret, (long long)value);
}

int main(void)
{
    capability("aicore", ACL_DEVICE_INFO_AI_CORE_NUM);
    capability("vector", ACL_DEVICE_INFO_VECTOR_CORE_NUM);
    capability("l2", ACL_DEVICE_INFO_L2_SIZE);
    capability("undefined", ACL_DEVICE_INFO_UNDEFINED);
    printf("cap_null %d 0\n", (int)aclGetDeviceCapability(0, ACL_DEVICE_INFO_L2_SIZE, NULL));
    device_info("aicpu", ACL_DEV_ATTR_AICPU_CORE_NUM);
    device_info("aicore", ACL_DEV_ATTR_AICORE_CORE_NUM);
    device_info("cube", ACL_DEV_ATTR_CUBE_CORE_NUM);
    device_info("vector", ACL_DEV_ATTR_VECTOR_CORE_NUM);
    device_info("memory", ACL_DEV_ATTR_TOTAL_GLOBAL_MEM_SIZE);
    device_info("grid", ACL_DEV_ATTR_WARP_SIZE);
    printf("info_null %d 0\n",
           (int)aclrtGetDeviceInfo(0, ACL_DEV_ATTR_AICORE_CORE_NUM, NULL));
    const char *soc = aclrtGetSocName();
    printf("soc 0 %s\n", soc ? soc : "(null)");
    return 0;
}
