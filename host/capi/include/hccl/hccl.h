/*
 * npuemu C ABI: HCCL's collectives and communicators (lib64/libhccl.so). Written for npuemu
 * from the published names and signatures of CANN's HCCL. Collectives are asynchronous on
 * their stream, as on hardware; HcclCommInit* blocks until every rank has joined.
 */
#ifndef NPUEMU_HCCL_H_
#define NPUEMU_HCCL_H_

#ifdef NPUEMU_CDEF /* libhccl.so exports HCCL's calls only: the acl ones are libascendcl's */
typedef void *aclrtStream;
#define ACL_FUNC_VISIBILITY
#else
#include <acl/acl.h>
#endif
#include <hccl/hccl_types.h>

#ifdef __cplusplus
extern "C" {
#endif

ACL_FUNC_VISIBILITY HcclResult HcclGetRootInfo(HcclRootInfo *rootInfo);
ACL_FUNC_VISIBILITY HcclResult HcclCommInitRootInfo(uint32_t nRanks, const HcclRootInfo *rootInfo,
                                                    uint32_t rank, HcclComm *comm);
ACL_FUNC_VISIBILITY HcclResult HcclCommInitRootInfoConfig(uint32_t nRanks,
                                                          const HcclRootInfo *rootInfo,
                                                          uint32_t rank,
                                                          const HcclCommConfig *config,
                                                          HcclComm *comm);
ACL_FUNC_VISIBILITY HcclResult HcclCommInitClusterInfo(const char *clusterInfo, uint32_t rank,
                                                       HcclComm *comm);
ACL_FUNC_VISIBILITY HcclResult HcclCommInitAll(uint32_t ndev, int32_t *devices,
                                               HcclComm *comms);
ACL_FUNC_VISIBILITY HcclResult HcclCommDestroy(HcclComm comm);
ACL_FUNC_VISIBILITY HcclResult HcclGetRankSize(HcclComm comm, uint32_t *rankSize);
ACL_FUNC_VISIBILITY HcclResult HcclGetRankId(HcclComm comm, uint32_t *rank);
ACL_FUNC_VISIBILITY HcclResult HcclGetCommAsyncError(HcclComm comm, HcclResult *asyncError);
ACL_FUNC_VISIBILITY const char *HcclGetErrorString(HcclResult code);

ACL_FUNC_VISIBILITY HcclResult HcclAllReduce(void *sendBuf, void *recvBuf, uint64_t count,
                                             HcclDataType dataType, HcclReduceOp op,
                                             HcclComm comm, aclrtStream stream);
ACL_FUNC_VISIBILITY HcclResult HcclBroadcast(void *buf, uint64_t count, HcclDataType dataType,
                                             uint32_t root, HcclComm comm, aclrtStream stream);
ACL_FUNC_VISIBILITY HcclResult HcclReduceScatter(void *sendBuf, void *recvBuf, uint64_t recvCount,
                                                 HcclDataType dataType, HcclReduceOp op,
                                                 HcclComm comm, aclrtStream stream);
ACL_FUNC_VISIBILITY HcclResult HcclAllGather(void *sendBuf, void *recvBuf, uint64_t sendCount,
                                             HcclDataType dataType, HcclComm comm,
                                             aclrtStream stream);
ACL_FUNC_VISIBILITY HcclResult HcclReduce(void *sendBuf, void *recvBuf, uint64_t count,
                                          HcclDataType dataType, HcclReduceOp op, uint32_t root,
                                          HcclComm comm, aclrtStream stream);
ACL_FUNC_VISIBILITY HcclResult HcclScatter(void *sendBuf, void *recvBuf, uint64_t recvCount,
                                           HcclDataType dataType, uint32_t root, HcclComm comm,
                                           aclrtStream stream);
ACL_FUNC_VISIBILITY HcclResult HcclAlltoAll(const void *sendBuf, uint64_t sendCount,
                                            HcclDataType sendType, const void *recvBuf,
                                            uint64_t recvCount, HcclDataType recvType,
                                            HcclComm comm, aclrtStream stream);
ACL_FUNC_VISIBILITY HcclResult HcclAlltoAllV(const void *sendBuf, const void *sendCounts,
                                             const void *sdispls, HcclDataType sendType,
                                             const void *recvBuf, const void *recvCounts,
                                             const void *rdispls, HcclDataType recvType,
                                             HcclComm comm, aclrtStream stream);
ACL_FUNC_VISIBILITY HcclResult HcclSend(void *sendBuf, uint64_t count, HcclDataType dataType,
                                        uint32_t destRank, HcclComm comm, aclrtStream stream);
ACL_FUNC_VISIBILITY HcclResult HcclRecv(void *recvBuf, uint64_t count, HcclDataType dataType,
                                        uint32_t srcRank, HcclComm comm, aclrtStream stream);
ACL_FUNC_VISIBILITY HcclResult HcclBatchSendRecv(HcclSendRecvItem *sendRecvInfo,
                                                 uint32_t itemNum, HcclComm comm,
                                                 aclrtStream stream);
ACL_FUNC_VISIBILITY HcclResult HcclBarrier(HcclComm comm, aclrtStream stream);

#ifndef NPUEMU_CDEF
/* fills the header bindings check (size, magic, version) and the defaults */
static inline void HcclCommConfigInit(HcclCommConfig *config)
{
    uint32_t *head = (uint32_t *)(void *)config->reserved;
    uint32_t i;
    for (i = 0; i < sizeof(HcclCommConfig); i++) {
        ((char *)config)[i] = 0;
    }
    head[0] = (uint32_t)sizeof(HcclCommConfig);
    head[1] = HCCL_COMM_CONFIG_MAGIC_WORD;
    head[2] = HCCL_COMM_CONFIG_VERSION;
    config->hcclBufferSize = HCCL_COMM_DEFAULT_BUFFSIZE;
    config->hcclDeterministic = HCCL_COMM_DEFAULT_DETERMINISTIC;
}
#endif

#ifdef __cplusplus
}
#endif

#endif /* NPUEMU_HCCL_H_ */
