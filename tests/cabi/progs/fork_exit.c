/* A C program that forks, then exits without aclFinalize or aclrtResetDevice: the child
 * is refused (207000, its parent's rings are not its own); nothing is left behind. */
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "check.h"

int main(void)
{
    void *dev = NULL;
    aclrtStream stream = NULL;
    pid_t pid;
    int status = 0;
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    CHECK(aclrtCreateStream(&stream));
    CHECK(aclrtMalloc(&dev, 4096, ACL_MEM_MALLOC_HUGE_FIRST));
    fflush(stdout);
    pid = fork();
    if (pid == 0) {
        void *p = NULL;
        aclError ret = aclrtMalloc(&p, 64, ACL_MEM_MALLOC_HUGE_FIRST);
        printf("child malloc -> %d\n", ret);
        fflush(stdout);
        _exit(ret == ACL_ERROR_RT_FEATURE_NOT_SUPPORT ? 0 : 3);
    }
    EXPECT(pid > 0 && waitpid(pid, &status, 0) == pid);
    EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(aclrtMemset(dev, 4096, 1, 4096));
    printf("parent goes on after the fork; exits holding memory and a stream\n");
    return 0;
}
