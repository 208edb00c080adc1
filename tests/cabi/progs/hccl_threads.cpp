// The HCCL examples' one-process shape: the main thread makes the root info after
// aclrtSetDevice(0) and keeps it in aclrtMallocHost memory; one std::thread per card sets its
// device and joins with HcclCommInitRootInfo(N, root, i); then all-reduce, reduce-scatter and
// all-to-all between the cards; HcclCommInitAll makes a second set of communicators.
#include <cstdio>
#include <thread>
#include <vector>
#include "acl/acl.h"
#include "hccl/hccl.h"

#define N_RANKS 4
#define COUNT 256

namespace {

int failures = 0;

#define ACHECK(call)                                                                   \
    do {                                                                               \
        int r_ = (int)(call);                                                          \
        if (r_ != 0) {                                                                 \
            std::printf("FAIL %s:%d %s -> %d\n", __FILE__, __LINE__, #call, r_);       \
            __atomic_add_fetch(&failures, 1, __ATOMIC_SEQ_CST);                        \
            return;                                                                    \
        }                                                                              \
    } while (0)

void rank_main(int rank, const HcclRootInfo *root)
{
    ACHECK(aclrtSetDevice(rank));
    aclrtStream stream = nullptr;
    ACHECK(aclrtCreateStream(&stream));
    HcclComm comm = nullptr;
    ACHECK(HcclCommInitRootInfo(N_RANKS, root, (uint32_t)rank, &comm));
    std::vector<float> host(COUNT * N_RANKS, (float)(rank + 1));
    void *send = nullptr, *recv = nullptr;
    size_t bytes = host.size() * sizeof(float);
    ACHECK(aclrtMalloc(&send, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    ACHECK(aclrtMalloc(&recv, bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    ACHECK(aclrtMemcpy(send, bytes, host.data(), bytes, ACL_MEMCPY_HOST_TO_DEVICE));
    ACHECK(HcclAllReduce(send, recv, COUNT, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_SUM, comm, stream));
    ACHECK(aclrtSynchronizeStream(stream));
    ACHECK(aclrtMemcpy(host.data(), bytes, recv, bytes, ACL_MEMCPY_DEVICE_TO_HOST));
    if (host[0] != 10.0f || host[COUNT - 1] != 10.0f) {
        std::printf("FAIL rank %d all_reduce gave %f\n", rank, host[0]);
        __atomic_add_fetch(&failures, 1, __ATOMIC_SEQ_CST);
    }
    ACHECK(HcclReduceScatter(send, recv, COUNT, HCCL_DATA_TYPE_FP32, HCCL_REDUCE_MAX, comm,
                             stream));
    ACHECK(HcclAlltoAll(send, COUNT, HCCL_DATA_TYPE_FP32, recv, COUNT, HCCL_DATA_TYPE_FP32, comm,
                        stream));
    ACHECK(aclrtSynchronizeStream(stream));
    ACHECK(aclrtMemcpy(host.data(), bytes, recv, bytes, ACL_MEMCPY_DEVICE_TO_HOST));
    for (int r = 0; r < N_RANKS; r++) {  // block r came from rank r
        if (host[(size_t)r * COUNT] != (float)(r + 1)) {
            std::printf("FAIL rank %d all_to_all block %d = %f\n", rank, r, host[r * COUNT]);
            __atomic_add_fetch(&failures, 1, __ATOMIC_SEQ_CST);
        }
    }
    ACHECK(HcclCommDestroy(comm));
    ACHECK(aclrtFree(send));
    ACHECK(aclrtFree(recv));
    ACHECK(aclrtDestroyStream(stream));
    ACHECK(aclrtResetDevice(rank));
}

void init_all()
{
    int32_t devices[N_RANKS] = {0, 1, 2, 3};
    HcclComm comms[N_RANKS] = {};
    for (int i = N_RANKS - 1; i >= 0; i--) {  // as the examples: every card set first
        ACHECK(aclrtSetDevice(i));
    }
    ACHECK(HcclCommInitAll(N_RANKS, devices, comms));
    for (int i = 0; i < N_RANKS; i++) {
        uint32_t rank = 99;
        ACHECK(HcclGetRankId(comms[i], &rank));
        if (rank != (uint32_t)i) {
            __atomic_add_fetch(&failures, 1, __ATOMIC_SEQ_CST);
        }
        ACHECK(HcclCommDestroy(comms[i]));
    }
    for (int i = 1; i < N_RANKS; i++) {
        ACHECK(aclrtResetDevice(i));
    }
}

}  // namespace

int main()
{
    if (aclInit(nullptr) != ACL_SUCCESS || aclrtSetDevice(0) != ACL_SUCCESS) {
        return 1;
    }
    void *root_mem = nullptr;
    if (aclrtMallocHost(&root_mem, sizeof(HcclRootInfo)) != ACL_SUCCESS) {
        return 1;
    }
    HcclRootInfo *root = static_cast<HcclRootInfo *>(root_mem);
    if (HcclGetRootInfo(root) != HCCL_SUCCESS) {
        return 1;
    }
    std::vector<std::thread> threads;
    for (int i = 0; i < N_RANKS; i++) {
        threads.emplace_back(rank_main, i, root);
    }
    for (auto &t : threads) {
        t.join();
    }
    init_all();
    aclrtFreeHost(root_mem);
    aclrtResetDevice(0);
    aclFinalize();
    std::printf("%d ranks from %d threads: %s\n", N_RANKS, N_RANKS,
                failures ? "FAILED" : "all ok");
    return failures ? 1 : 0;
}
