/* A 2-process HCCL program: argv = rank, folder. Rank 0 writes HcclGetRootInfo's bytes to
 * <folder>/root.bin; each rank joins on its own card, then all-reduce, broadcast,
 * all-gather and a send/recv pair run between the cards. */
#define _DEFAULT_SOURCE 1 /* usleep */
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "check.h"
#include "hccl/hccl.h"

#define N 1024
#define HCHECK(call)                                                              \
    do {                                                                          \
        HcclResult hret_ = (call);                                                \
        if (hret_ != HCCL_SUCCESS) {                                              \
            printf("FAIL %s:%d %s -> %d (%s)\n", __FILE__, __LINE__, #call, hret_, \
                   HcclGetErrorString(hret_));                                    \
            exit(1);                                                              \
        }                                                                         \
    } while (0)

static void share_root(int rank, const char *dir, HcclRootInfo *root)
{
    char path[4096], tmp[4096];
    int i;
    snprintf(path, sizeof path, "%s/root.bin", dir);
    if (rank == 0) {
        FILE *f;
        HCHECK(HcclGetRootInfo(root));
        snprintf(tmp, sizeof tmp, "%s/root.tmp", dir);
        f = fopen(tmp, "wb");
        EXPECT(f != NULL && fwrite(root, sizeof *root, 1, f) == 1 && fclose(f) == 0);
        EXPECT(rename(tmp, path) == 0);
        return;
    }
    for (i = 0; i < 3000; i++) {
        FILE *f = fopen(path, "rb");
        if (f != NULL) {
            EXPECT(fread(root, sizeof *root, 1, f) == 1);
            fclose(f);
            return;
        }
        usleep(10000);
    }
    printf("FAIL no root info from rank 0\n");
    exit(1);
}

static void *device_floats(float first, float step)
{
    float host[N];
    void *dev = NULL;
    int i;
    for (i = 0; i < N; i++) {
        host[i] = first + step * (float)i;
    }
    CHECK(aclrtMalloc(&dev, sizeof host, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMemcpy(dev, sizeof host, host, sizeof host, ACL_MEMCPY_HOST_TO_DEVICE));
    return dev;
}

static float at(void *dev, int index)
{
    float host[N];
    CHECK(aclrtMemcpy(host, sizeof host, dev, sizeof host, ACL_MEMCPY_DEVICE_TO_HOST));
    return host[index];
}

int main(int argc, char **argv)
{
    HcclRootInfo root;
    HcclComm comm = NULL;
    aclrtStream stream = NULL;
    uint32_t rank_id = 9, size = 0;
    int rank;
    void *send, *recv, *gathered = NULL;
    EXPECT(argc == 3 && sizeof(HcclRootInfo) == 4108);
    rank = argv[1][0] - '0';
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(rank));
    CHECK(aclrtCreateStream(&stream));
    share_root(rank, argv[2], &root);
    HCHECK(HcclCommInitRootInfo(2, &root, (uint32_t)rank, &comm));
    HCHECK(HcclGetRankId(comm, &rank_id));
    HCHECK(HcclGetRankSize(comm, &size));
    EXPECT(rank_id == (uint32_t)rank && size == 2);

    send = device_floats((float)(rank + 1), 1.0f);
    recv = device_floats(0.0f, 0.0f);
    HCHECK(HcclAllReduce(send, recv, N, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, stream));
    CHECK(aclrtSynchronizeStream(stream));
    EXPECT(at(recv, 0) == 3.0f && at(recv, 10) == 23.0f);
    printf("rank %d all_reduce ok\n", rank);

    HCHECK(HcclBroadcast(send, N, HCCL_DATA_TYPE_FP32, 1, comm, stream));
    CHECK(aclrtSynchronizeStream(stream));
    EXPECT(at(send, 0) == 2.0f);
    CHECK(aclrtMalloc(&gathered, 2 * N * sizeof(float), ACL_MEM_MALLOC_HUGE_FIRST));
    HCHECK(HcclAllGather(recv, gathered, N, HCCL_DATA_TYPE_FP32, comm, stream));
    CHECK(aclrtSynchronizeStream(stream));
    if (rank == 0) {
        HCHECK(HcclSend(send, N, HCCL_DATA_TYPE_FP32, 1, comm, stream));
    } else {
        HCHECK(HcclRecv(recv, N, HCCL_DATA_TYPE_FP32, 0, comm, stream));
    }
    CHECK(aclrtSynchronizeStream(stream));
    EXPECT(at(recv, 1) == (rank == 0 ? 5.0f : 3.0f));
    HCHECK(HcclBarrier(comm, stream));
    CHECK(aclrtSynchronizeStream(stream));
    printf("rank %d broadcast, all_gather, send/recv ok\n", rank);

    EXPECT(HcclAllReduce(send, recv, N, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, NULL, stream) !=
           HCCL_SUCCESS);
    EXPECT(HcclGetRankSize(comm, NULL) == HCCL_E_PTR);
    EXPECT(HcclBatchSendRecv(NULL, 0, comm, stream) == HCCL_E_NOT_SUPPORT);
    HCHECK(HcclCommDestroy(comm));
    CHECK(aclrtFree(send));
    CHECK(aclrtFree(recv));
    CHECK(aclrtFree(gathered));
    CHECK(aclrtDestroyStream(stream));
    CHECK(aclrtResetDevice(rank));
    CHECK(aclFinalize());
    printf("rank %d done\n", rank);
    return 0;
}
