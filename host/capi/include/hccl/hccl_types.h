/*
 * npuemu C ABI: HCCL's types (results, data types, reduce ops, root info, communicator
 * configuration, send/receive items). Written for npuemu from the published names, values
 * and layouts of CANN's HCCL; bindings rely on HcclRootInfo being 4108 bytes and on the
 * 24-byte header of HcclCommConfig (size, magic 0xf0f0f0f0, version).
 */
#ifndef NPUEMU_HCCL_TYPES_H_
#define NPUEMU_HCCL_TYPES_H_

#ifndef NPUEMU_CDEF
#include <stdint.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef void *HcclComm;

typedef enum {
    HCCL_SUCCESS = 0,
    HCCL_E_PARA = 1,
    HCCL_E_PTR = 2,
    HCCL_E_MEMORY = 3,
    HCCL_E_INTERNAL = 4,
    HCCL_E_NOT_SUPPORT = 5,
    HCCL_E_NOT_FOUND = 6,
    HCCL_E_UNAVAIL = 7,
    HCCL_E_SYSCALL = 8,
    HCCL_E_TIMEOUT = 9,
    HCCL_E_OPEN_FILE_FAILURE = 10,
    HCCL_E_TCP_CONNECT = 11,
    HCCL_E_ROCE_CONNECT = 12,
    HCCL_E_TCP_TRANSFER = 13,
    HCCL_E_ROCE_TRANSFER = 14,
    HCCL_E_RUNTIME = 15,
    HCCL_E_DRV = 16,
    HCCL_E_PROFILING = 17,
    HCCL_E_CCE = 18,
    HCCL_E_NETWORK = 19,
    HCCL_E_AGAIN = 20,
    HCCL_E_REMOTE = 21,
    HCCL_E_SUSPENDING = 22,
    HCCL_E_OPRETRY_FAIL = 23,
    HCCL_E_OOM = 24,
    HCCL_E_RESERVED = 1042
} HcclResult;

typedef enum {
    HCCL_DATA_TYPE_INT8 = 0,
    HCCL_DATA_TYPE_INT16 = 1,
    HCCL_DATA_TYPE_INT32 = 2,
    HCCL_DATA_TYPE_FP16 = 3,
    HCCL_DATA_TYPE_FP32 = 4,
    HCCL_DATA_TYPE_INT64 = 5,
    HCCL_DATA_TYPE_UINT64 = 6,
    HCCL_DATA_TYPE_UINT8 = 7,
    HCCL_DATA_TYPE_UINT16 = 8,
    HCCL_DATA_TYPE_UINT32 = 9,
    HCCL_DATA_TYPE_FP64 = 10,
    HCCL_DATA_TYPE_BFP16 = 11,
    HCCL_DATA_TYPE_INT128 = 12,
    HCCL_DATA_TYPE_RESERVED = 255
} HcclDataType;

typedef enum {
    HCCL_REDUCE_SUM = 0,
    HCCL_REDUCE_PROD = 1,
    HCCL_REDUCE_MAX = 2,
    HCCL_REDUCE_MIN = 3,
    HCCL_REDUCE_RESERVED = 255
} HcclReduceOp;

typedef enum {
    HCCL_SEND = 0,
    HCCL_RECV = 1,
    HCCL_SEND_RECV_RESERVED = 2
} HcclSendRecvType;

#define HCCL_ROOT_INFO_BYTES 4108
#define HCCL_COMM_CONFIG_INFO_BYTES 24
#define HCCL_COMM_CONFIG_MAGIC_WORD 0xf0f0f0f0
#define HCCL_COMM_CONFIG_VERSION 6
#define HCCL_COMM_NAME_MAX_LENGTH 128
#define HCCL_COMM_UDI_MAX_LENGTH 128
#define HCCL_COMM_DEFAULT_BUFFSIZE 200
#define HCCL_COMM_DEFAULT_DETERMINISTIC 0

typedef struct HcclRootInfoDef {
    char internal[HCCL_ROOT_INFO_BYTES];
} HcclRootInfo;

typedef struct HcclCommConfigDef {
    char reserved[HCCL_COMM_CONFIG_INFO_BYTES];
    uint32_t hcclBufferSize;
    uint32_t hcclDeterministic;
    char hcclCommName[HCCL_COMM_NAME_MAX_LENGTH];
    char hcclUdi[HCCL_COMM_UDI_MAX_LENGTH];
    uint32_t hcclOpExpansionMode;
    uint32_t hcclRdmaTrafficClass;
    uint32_t hcclRdmaServiceLevel;
    uint32_t hcclWorldRankID;
    uint64_t hcclJobID;
} HcclCommConfig;

typedef struct HcclSendRecvItemDef {
    HcclSendRecvType sendRecvType;
    void *buf;
    uint64_t count;
    HcclDataType dataType;
    uint32_t remoteRank;
} HcclSendRecvItem;

#ifdef __cplusplus
}
#endif

#endif /* NPUEMU_HCCL_TYPES_H_ */
