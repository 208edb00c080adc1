// The single-op flow from C++: aclopCompile then aclopExecuteV2 (the documented sample flow),
// aclopCompileAndExecute, an op handle, aclopCast, attributes with a const input, and
// aclopSetModelDir over files made by `npuemu atc --singleop` (argv[1]), executed without
// compiling. Wrong calls get the op layer's codes.
#include <cmath>
#include <cstring>
#include <vector>
#include "acl/acl.h"
#include "acl/acl_op_compiler.h"
#include "check.h"

namespace {

struct Tensor {
    aclTensorDesc *desc;
    aclDataBuffer *buf;
    void *dev;
    size_t size;
};

Tensor make(aclDataType type, std::vector<int64_t> dims, const void *host)
{
    Tensor t;
    t.desc = aclCreateTensorDesc(type, (int)dims.size(), dims.data(), ACL_FORMAT_ND);
    EXPECT(t.desc != nullptr);
    t.size = aclGetTensorDescSize(t.desc);
    CHECK(aclrtMalloc(&t.dev, t.size, ACL_MEM_MALLOC_NORMAL_ONLY));
    if (host != nullptr) {
        CHECK(aclrtMemcpy(t.dev, t.size, host, t.size, ACL_MEMCPY_HOST_TO_DEVICE));
    }
    t.buf = aclCreateDataBuffer(t.dev, t.size);
    EXPECT(t.buf != nullptr && aclGetDataBufferSizeV2(t.buf) == t.size);
    return t;
}

void drop(Tensor &t)
{
    CHECK(aclDestroyDataBuffer(t.buf));
    CHECK(aclrtFree(t.dev));
    aclDestroyTensorDesc(t.desc);
}

template <typename T>
std::vector<T> fetch(const Tensor &t)
{
    std::vector<T> out(t.size / sizeof(T));
    CHECK(aclrtMemcpy(out.data(), t.size, t.dev, t.size, ACL_MEMCPY_DEVICE_TO_HOST));
    return out;
}

void add_compile_then_execute(aclrtStream stream)
{
    std::vector<float> a(32), b(32);
    for (int i = 0; i < 32; i++) {
        a[i] = (float)i;
        b[i] = 0.5f * (float)i;
    }
    Tensor x = make(ACL_FLOAT, {4, 8}, a.data()), y = make(ACL_FLOAT, {4, 8}, b.data());
    Tensor z = make(ACL_FLOAT, {4, 8}, nullptr);
    const aclTensorDesc *in[] = {x.desc, y.desc};
    const aclTensorDesc *out[] = {z.desc};
    aclopAttr *attr = aclopCreateAttr();
    CHECK(aclopCompile("Add", 2, in, 1, out, attr, ACL_ENGINE_SYS, ACL_COMPILE_SYS, nullptr));
    aclTensorDesc *ins[] = {x.desc, y.desc};
    aclDataBuffer *inb[] = {x.buf, y.buf};
    aclTensorDesc *outs[] = {z.desc};
    aclDataBuffer *outb[] = {z.buf};
    CHECK(aclopExecuteV2("Add", 2, ins, inb, 1, outs, outb, attr, stream));
    CHECK(aclrtSynchronizeStream(stream));
    std::vector<float> got = fetch<float>(z);
    for (int i = 0; i < 32; i++) {
        EXPECT(got[i] == 1.5f * (float)i);
    }
    // an op handle for the same signature
    aclopHandle *handle = nullptr;
    CHECK(aclopCreateHandle("Add", 2, in, 1, out, attr, &handle));
    const aclDataBuffer *hin[] = {y.buf, y.buf};
    aclDataBuffer *const hout[] = {z.buf};
    CHECK(aclopExecWithHandle(handle, 2, hin, 1, hout, stream));
    CHECK(aclrtSynchronizeStream(stream));
    EXPECT(fetch<float>(z)[3] == 3.0f);
    aclopDestroyHandle(handle);
    // the same op with a shape never compiled: not found
    Tensor w = make(ACL_FLOAT, {3, 3}, nullptr);
    aclTensorDesc *wins[] = {w.desc, w.desc};
    aclDataBuffer *winb[] = {w.buf, w.buf};
    aclTensorDesc *wouts[] = {w.desc};
    aclDataBuffer *woutb[] = {w.buf};
    EXPECT_CODE(ACL_ERROR_OP_NOT_FOUND,
                aclopExecuteV2("Add", 2, wins, winb, 1, wouts, woutb, attr, stream));
    EXPECT_CODE(ACL_ERROR_INVALID_PARAM,
                aclopExecuteV2("Add", 2, nullptr, winb, 1, wouts, woutb, attr, stream));
    EXPECT_CODE(ACL_ERROR_OP_TYPE_NOT_MATCH,
                aclopCompile("NoSuchOp", 2, in, 1, out, attr, ACL_ENGINE_SYS, ACL_COMPILE_SYS,
                             nullptr));
    aclopDestroyAttr(attr);
    drop(w);
    drop(x);
    drop(y);
    drop(z);
    printf("compile then execute ok\n");
}

void mul_compile_and_execute_and_cast(aclrtStream stream)
{
    std::vector<float> a(6, 3.0f), b(6, 0.25f);
    Tensor x = make(ACL_FLOAT, {2, 3}, a.data()), y = make(ACL_FLOAT, {2, 3}, b.data());
    Tensor z = make(ACL_FLOAT, {2, 3}, nullptr), h = make(ACL_FLOAT16, {2, 3}, nullptr);
    const aclTensorDesc *in[] = {x.desc, y.desc};
    const aclDataBuffer *inb[] = {x.buf, y.buf};
    const aclTensorDesc *out[] = {z.desc};
    aclDataBuffer *outb[] = {z.buf};
    CHECK(aclopCompileAndExecute("Mul", 2, in, inb, 1, out, outb, nullptr, ACL_ENGINE_SYS,
                                 ACL_COMPILE_SYS, nullptr, stream));
    CHECK(aclopCast(z.desc, z.buf, h.desc, h.buf, 0, stream));
    CHECK(aclrtSynchronizeStream(stream));
    EXPECT(fetch<float>(z)[5] == 0.75f);
    EXPECT(aclFloat16ToFloat(fetch<aclFloat16>(h)[2]) == 0.75f);
    drop(x);
    drop(y);
    drop(z);
    drop(h);
    printf("compile and execute, cast ok\n");
}

void reduce_with_attr_and_const(aclrtStream stream)
{
    std::vector<float> a(24);
    for (int i = 0; i < 24; i++) {
        a[i] = (float)i;
    }
    int32_t axis = 1;
    Tensor x = make(ACL_FLOAT, {4, 6}, a.data()), ax = make(ACL_INT32, {1}, &axis);
    Tensor y = make(ACL_FLOAT, {4, 1}, nullptr);
    CHECK(aclSetTensorConst(ax.desc, &axis, sizeof axis));
    aclopAttr *attr = aclopCreateAttr();
    CHECK(aclopSetAttrBool(attr, "keep_dims", 1));
    aclTensorDesc *ins[] = {x.desc, ax.desc};
    aclDataBuffer *inb[] = {x.buf, ax.buf};
    aclTensorDesc *outs[] = {y.desc};
    aclDataBuffer *outb[] = {y.buf};
    CHECK(aclopCompileAndExecuteV2("ReduceSum", 2, ins, inb, 1, outs, outb, attr,
                                   ACL_ENGINE_SYS, ACL_COMPILE_SYS, nullptr, stream));
    CHECK(aclrtSynchronizeStream(stream));
    std::vector<float> got = fetch<float>(y);
    EXPECT(got[0] == 15.0f && got[3] == 123.0f);
    aclopDestroyAttr(attr);
    drop(x);
    drop(ax);
    drop(y);
    printf("reduce with attr ok\n");
}

void model_dir(const char *dir, aclrtStream stream)
{
    std::vector<int32_t> a(128);
    for (int i = 0; i < 128; i++) {
        a[i] = i;
    }
    CHECK(aclopSetModelDir(dir));
    Tensor x = make(ACL_INT32, {8, 16}, a.data()), z = make(ACL_INT32, {8, 16}, nullptr);
    aclTensorDesc *ins[] = {x.desc, x.desc};
    aclDataBuffer *inb[] = {x.buf, x.buf};
    aclTensorDesc *outs[] = {z.desc};
    aclDataBuffer *outb[] = {z.buf};
    aclopAttr *attr = aclopCreateAttr();
    CHECK(aclopExecuteV2("Add", 2, ins, inb, 1, outs, outb, attr, stream));
    CHECK(aclrtSynchronizeStream(stream));
    EXPECT(fetch<int32_t>(z)[100] == 200);
    aclopDestroyAttr(attr);
    drop(x);
    drop(z);
    printf("model dir ok\n");
}

}  // namespace

int main(int argc, char **argv)
{
    aclrtStream stream = nullptr;
    EXPECT(argc == 2);
    CHECK(aclInit(nullptr));
    CHECK(aclrtSetDevice(0));
    CHECK(aclrtCreateStream(&stream));
    model_dir(argv[1], stream);
    add_compile_then_execute(stream);
    mul_compile_and_execute_and_cast(stream);
    reduce_with_attr_and_const(stream);
    CHECK(aclrtDestroyStream(stream));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("single op program done\n");
    return 0;
}
