// The model sample flow from C++: argv = model.om input.bin output.bin batch (0: static).
// Load, describe, bind one device buffer per input and output, (set the batch gear),
// execute, write output 0 to output.bin; then the same model again through aclmdlQuerySize +
// aclmdlLoadFromFileWithMem and aclmdlExecuteAsync, whose output must match.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include "acl/acl.h"
#include "check.h"

namespace {

std::vector<char> read_file(const char *path)
{
    std::vector<char> data;
    FILE *f = fopen(path, "rb");
    EXPECT(f != nullptr);
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
        data.insert(data.end(), chunk, chunk + n);
    }
    fclose(f);
    return data;
}

struct Bound {
    aclmdlDataset *inputs;
    aclmdlDataset *outputs;
    std::vector<void *> memory;
};

aclmdlDataset *dataset(aclmdlDesc *desc, bool inputs, std::vector<void *> &memory)
{
    aclmdlDataset *ds = aclmdlCreateDataset();
    size_t n = inputs ? aclmdlGetNumInputs(desc) : aclmdlGetNumOutputs(desc);
    for (size_t i = 0; i < n; i++) {
        size_t size = inputs ? aclmdlGetInputSizeByIndex(desc, i)
                             : aclmdlGetOutputSizeByIndex(desc, i);
        void *dev = nullptr;
        CHECK(aclrtMalloc(&dev, size, ACL_MEM_MALLOC_HUGE_FIRST));
        CHECK(aclrtMemset(dev, size, 0, size));
        memory.push_back(dev);
        CHECK(aclmdlAddDatasetBuffer(ds, aclCreateDataBuffer(dev, size)));
    }
    return ds;
}

Bound bind(aclmdlDesc *desc, const std::vector<char> &x)
{
    Bound b;
    b.inputs = dataset(desc, true, b.memory);
    b.outputs = dataset(desc, false, b.memory);
    aclDataBuffer *in0 = aclmdlGetDatasetBuffer(b.inputs, 0);
    EXPECT(x.size() <= aclGetDataBufferSizeV2(in0));
    CHECK(aclrtMemcpy(aclGetDataBufferAddr(in0), aclGetDataBufferSizeV2(in0), x.data(),
                      x.size(), ACL_MEMCPY_HOST_TO_DEVICE));
    return b;
}

std::vector<char> output0(const Bound &b)
{
    aclDataBuffer *out0 = aclmdlGetDatasetBuffer(b.outputs, 0);
    std::vector<char> y(aclGetDataBufferSizeV2(out0));
    CHECK(aclrtMemcpy(y.data(), y.size(), aclGetDataBufferAddr(out0), y.size(),
                      ACL_MEMCPY_DEVICE_TO_HOST));
    return y;
}

void unbind(Bound &b)
{
    for (aclmdlDataset *ds : {b.inputs, b.outputs}) {
        for (size_t i = 0; i < aclmdlGetDatasetNumBuffers(ds); i++) {
            CHECK(aclDestroyDataBuffer(aclmdlGetDatasetBuffer(ds, i)));
        }
        CHECK(aclmdlDestroyDataset(ds));
    }
    for (void *p : b.memory) {
        CHECK(aclrtFree(p));
    }
}

void set_gear(uint32_t id, aclmdlDesc *desc, Bound &b, uint64_t batch)
{
    size_t index = 99;
    aclmdlBatch gears;
    CHECK(aclmdlGetDynamicBatch(desc, &gears));
    printf("gears:");
    for (size_t i = 0; i < gears.batchCount; i++) {
        printf(" %llu", (unsigned long long)gears.batch[i]);
    }
    printf("\n");
    CHECK(aclmdlGetInputIndexByName(desc, ACL_DYNAMIC_TENSOR_NAME, &index));
    CHECK(aclmdlSetDynamicBatchSize(id, b.inputs, index, batch));
}

}  // namespace

int main(int argc, char **argv)
{
    EXPECT(argc == 5);
    uint64_t batch = strtoull(argv[4], nullptr, 10);
    std::vector<char> x = read_file(argv[2]);
    CHECK(aclInit(nullptr));
    CHECK(aclrtSetDevice(0));
    uint32_t id = 0;
    CHECK(aclmdlLoadFromFile(argv[1], &id));
    aclmdlDesc *desc = aclmdlCreateDesc();
    CHECK(aclmdlGetDesc(desc, id));
    aclmdlIODims dims;
    CHECK(aclmdlGetInputDims(desc, 0, &dims));
    printf("input %s:", aclmdlGetInputNameByIndex(desc, 0));
    for (size_t i = 0; i < dims.dimCount; i++) {
        printf(" %lld", (long long)dims.dims[i]);
    }
    printf(" (%zu inputs, %zu outputs)\n", aclmdlGetNumInputs(desc), aclmdlGetNumOutputs(desc));
    Bound b = bind(desc, x);
    if (batch) {
        set_gear(id, desc, b, batch);
    }
    CHECK(aclmdlExecute(id, b.inputs, b.outputs));
    std::vector<char> y = output0(b);
    FILE *f = fopen(argv[3], "wb");
    EXPECT(f != nullptr && fwrite(y.data(), 1, y.size(), f) == y.size());
    fclose(f);
    unbind(b);

    // again: the caller's memory for work and weights, executed on a stream
    size_t work = 0, weight = 0;
    void *work_mem = nullptr, *weight_mem = nullptr;
    uint32_t id2 = 0;
    aclrtStream stream = nullptr;
    CHECK(aclmdlQuerySize(argv[1], &work, &weight));
    CHECK(aclrtMalloc(&work_mem, work ? work : 1, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc(&weight_mem, weight ? weight : 1, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclmdlLoadFromFileWithMem(argv[1], &id2, work_mem, work, weight_mem, weight));
    CHECK(aclrtCreateStream(&stream));
    Bound b2 = bind(desc, x);
    if (batch) {
        set_gear(id2, desc, b2, batch);
    }
    CHECK(aclmdlExecuteAsync(id2, b2.inputs, b2.outputs, stream));
    CHECK(aclrtSynchronizeStream(stream));
    EXPECT(output0(b2) == y);
    unbind(b2);
    EXPECT_CODE(ACL_ERROR_INVALID_PARAM, aclmdlLoadFromFile(argv[1], nullptr));
    CHECK(aclmdlUnload(id2));
    EXPECT(aclmdlUnload(id2) != ACL_SUCCESS);
    CHECK(aclmdlUnload(id));
    CHECK(aclmdlDestroyDesc(desc));
    CHECK(aclrtFree(work_mem));
    CHECK(aclrtFree(weight_mem));
    CHECK(aclrtDestroyStream(stream));
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("model program done\n");
    return 0;
}
