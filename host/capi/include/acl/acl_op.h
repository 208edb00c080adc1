/*
 * npuemu C ABI: single operators (attributes, execute, handles, cast, model directory, load,
 * shape inference). Written for npuemu from the published names and signatures of CANN's
 * single-op API; the ops are npuemu's op library (the same as the Python face's).
 */
#ifndef NPUEMU_ACL_OP_H_
#define NPUEMU_ACL_OP_H_

#include "acl/acl_base.h"
#include "acl/acl_rt.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct aclopHandle aclopHandle;
typedef struct aclopAttr aclopAttr;

typedef enum aclEngineType {
    ACL_ENGINE_SYS = 0,
    ACL_ENGINE_AICORE = 1,
    ACL_ENGINE_VECTOR = 2
} aclopEngineType;

/* attributes */
ACL_FUNC_VISIBILITY aclopAttr *aclopCreateAttr(void);
ACL_FUNC_VISIBILITY void aclopDestroyAttr(const aclopAttr *attr);
ACL_FUNC_VISIBILITY aclError aclopSetAttrBool(aclopAttr *attr, const char *attrName,
                                              uint8_t attrValue);
ACL_FUNC_VISIBILITY aclError aclopSetAttrInt(aclopAttr *attr, const char *attrName,
                                             int64_t attrValue);
ACL_FUNC_VISIBILITY aclError aclopSetAttrFloat(aclopAttr *attr, const char *attrName,
                                               float attrValue);
ACL_FUNC_VISIBILITY aclError aclopSetAttrString(aclopAttr *attr, const char *attrName,
                                                const char *attrValue);
ACL_FUNC_VISIBILITY aclError aclopSetAttrDataType(aclopAttr *attr, const char *attrName,
                                                  aclDataType attrValue);
ACL_FUNC_VISIBILITY aclError aclopSetAttrListDataType(aclopAttr *attr, const char *attrName,
                                                      int numValues,
                                                      const aclDataType values[]);
ACL_FUNC_VISIBILITY aclError aclopSetAttrListBool(aclopAttr *attr, const char *attrName,
                                                  int numValues, const uint8_t *values);
ACL_FUNC_VISIBILITY aclError aclopSetAttrListInt(aclopAttr *attr, const char *attrName,
                                                 int numValues, const int64_t *values);
ACL_FUNC_VISIBILITY aclError aclopSetAttrListFloat(aclopAttr *attr, const char *attrName,
                                                   int numValues, const float *values);
ACL_FUNC_VISIBILITY aclError aclopSetAttrListString(aclopAttr *attr, const char *attrName,
                                                    int numValues, const char **values);
ACL_FUNC_VISIBILITY aclError aclopSetAttrListListInt(aclopAttr *attr, const char *attrName,
                                                     int numLists, const int *numValues,
                                                     const int64_t *const values[]);

/* execute (asynchronous on the stream; never compiles: see aclopCompile) */
ACL_FUNC_VISIBILITY aclError aclopExecute(const char *opType, int numInputs,
                                          const aclTensorDesc *const inputDesc[],
                                          const aclDataBuffer *const inputs[], int numOutputs,
                                          const aclTensorDesc *const outputDesc[],
                                          aclDataBuffer *const outputs[], const aclopAttr *attr,
                                          aclrtStream stream);
ACL_FUNC_VISIBILITY aclError aclopExecuteV2(const char *opType, int numInputs,
                                            aclTensorDesc *inputDesc[], aclDataBuffer *inputs[],
                                            int numOutputs, aclTensorDesc *outputDesc[],
                                            aclDataBuffer *outputs[], aclopAttr *attr,
                                            aclrtStream stream);
ACL_FUNC_VISIBILITY aclError aclopCreateHandle(const char *opType, int numInputs,
                                               const aclTensorDesc *const inputDesc[],
                                               int numOutputs,
                                               const aclTensorDesc *const outputDesc[],
                                               const aclopAttr *opAttr, aclopHandle **handle);
ACL_FUNC_VISIBILITY void aclopDestroyHandle(aclopHandle *handle);
ACL_FUNC_VISIBILITY aclError aclopExecWithHandle(aclopHandle *handle, int numInputs,
                                                 const aclDataBuffer *const inputs[],
                                                 int numOutputs, aclDataBuffer *const outputs[],
                                                 aclrtStream stream);
ACL_FUNC_VISIBILITY aclError aclopCast(const aclTensorDesc *srcDesc,
                                       const aclDataBuffer *srcBuffer,
                                       const aclTensorDesc *dstDesc, aclDataBuffer *dstBuffer,
                                       uint8_t truncate, aclrtStream stream);
ACL_FUNC_VISIBILITY aclError aclopCreateHandleForCast(aclTensorDesc *srcDesc,
                                                      aclTensorDesc *dstDesc, uint8_t truncate,
                                                      aclopHandle **handle);
ACL_FUNC_VISIBILITY aclError aclopInferShape(const char *opType, int numInputs,
                                             aclTensorDesc *inputDesc[], aclDataBuffer *inputs[],
                                             int numOutputs, aclTensorDesc *outputDesc[],
                                             aclopAttr *attr);
ACL_FUNC_VISIBILITY aclError aclopUpdateParams(const char *opType, int numInputs,
                                               const aclTensorDesc *const inputDesc[],
                                               int numOutputs,
                                               const aclTensorDesc *const outputDesc[],
                                               const aclopAttr *attr);

/* single-op model files */
ACL_FUNC_VISIBILITY aclError aclopSetModelDir(const char *modelDir);
ACL_FUNC_VISIBILITY aclError aclopLoad(const void *model, size_t modelSize);

#ifdef __cplusplus
}
#endif

#endif /* NPUEMU_ACL_OP_H_ */
