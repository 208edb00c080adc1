/* aclInit with a config file (argv[1], relative to the working folder), as the samples pass
 * "acl.json"; prints its code, then runs one copy to show the runtime works. */
#include <string.h>
#include "check.h"

int main(int argc, char **argv)
{
    char host[64], back[64];
    void *dev = NULL;
    EXPECT(argc == 2);
    printf("aclInit -> %d\n", aclInit(argv[1]));
    CHECK(aclrtSetDevice(0));
    memset(host, 5, sizeof host);
    CHECK(aclrtMalloc(&dev, sizeof host, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMemcpy(dev, sizeof host, host, sizeof host, ACL_MEMCPY_HOST_TO_DEVICE));
    CHECK(aclrtMemcpy(back, sizeof back, dev, sizeof back, ACL_MEMCPY_DEVICE_TO_HOST));
    EXPECT(memcmp(host, back, sizeof host) == 0);
    CHECK(aclrtFree(dev));
    CHECK(aclrtResetDevice(0));
    return 0;
}
