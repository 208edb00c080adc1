/* aclvenc* and aclvdec* from C, as the samples write them: NV12 pictures encoded to H.264 by a
 * VENC channel, the packets fed back to a VDEC channel; both channels' C callbacks run on the
 * C thread named by their thread id, inside its aclrtProcessReport, in order, with the
 * userData pointers of the send calls. The packets are written to OUT.h264 and the decoded
 * luma planes to OUT.y (the test compares them); then the refusals' codes.
 * Usage: video OUT.h264 OUT.y */
#define ENABLE_DVPP_INTERFACE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "acl/acl.h"
#include "acl/ops/acl_dvpp.h"
#include "check.h"
#include "picture.h"
#include "report.h"

#define W 320
#define H 240
#define FRAMES 8
#define PIC_SIZE (W * H * 3 / 2)

static pthread_t report_thread;
static report_loop reports;
static int wrong_thread, bad_user;
static int packets, frames, eos_seen;
static int packet_order[FRAMES], frame_order[FRAMES];
static unsigned char stream_bytes[FRAMES * PIC_SIZE];
static size_t stream_used;
static uint32_t packet_size[FRAMES];
static unsigned char lumas[FRAMES][W * H];
static int tags[FRAMES];

static void on_packet(acldvppPicDesc *input, acldvppStreamDesc *output, void *user)
{
    uint32_t size = acldvppGetStreamDescSize(output);
    int tag = *(int *)user;
    if (!pthread_equal(pthread_self(), report_thread)) wrong_thread++;
    if (input == NULL || tag < 0 || tag >= FRAMES || packets >= FRAMES) {
        bad_user++;
        return;
    }
    EXPECT(size > 0 && stream_used + size <= sizeof stream_bytes);
    CHECK(aclrtMemcpy(stream_bytes + stream_used, size, acldvppGetStreamDescData(output), size,
                      ACL_MEMCPY_DEVICE_TO_HOST));
    stream_used += size;
    packet_size[packets] = size;
    packet_order[packets++] = tag;
    eos_seen += acldvppGetStreamDescEos(output);
}

static void on_frame(acldvppStreamDesc *input, acldvppPicDesc *output, void *user)
{
    int tag = *(int *)user;
    if (!pthread_equal(pthread_self(), report_thread)) wrong_thread++;
    if (input == NULL || output == NULL || tag < 0 || tag >= FRAMES || frames >= FRAMES ||
        acldvppGetPicDescRetCode(output) != 0 || acldvppGetPicDescWidth(output) != W) {
        bad_user++;
        return;
    }
    CHECK(aclrtMemcpy(lumas[frames], W * H, acldvppGetPicDescData(output), W * H,
                      ACL_MEMCPY_DEVICE_TO_HOST));
    frame_order[frames++] = tag;
}

static acldvppPicDesc *nv12(void *data) { return picture(data, PIC_SIZE, W, H, W, H); }

static void print_order(const char *what, int count, const int *order)
{
    int i;
    printf("%s %d", what, count);
    for (i = 0; i < count; i++) printf(" %d", order[i]);
    printf("\n");
}

/* aclvencSet/GetChannelDescParam: the value behind a pointer, its size by the type */
static void params_venc(aclvencChannelDesc *ch)
{
    uint32_t ip = 70, width = W, got = 0;
    uint64_t tid = 0;
    aclvencCallback cb = NULL;
    size_t got_size = 0;
    CHECK(aclvencSetChannelDescParam(ch, ACL_VENC_MAX_IP_PROP_UINT32, sizeof ip, &ip));
    CHECK(aclvencSetChannelDescParam(ch, ACL_VENC_PIC_WIDTH_UINT32, sizeof width, &width));
    CHECK(aclvencGetChannelDescParam(ch, ACL_VENC_MAX_IP_PROP_UINT32, sizeof got, &got_size,
                                     &got));
    EXPECT(got == 70 && got_size == 4);
    CHECK(aclvencGetChannelDescParam(ch, ACL_VENC_CALLBACK_PTR, sizeof cb, &got_size, &cb));
    EXPECT(cb == on_packet && got_size == sizeof cb);
    CHECK(aclvencGetChannelDescParam(ch, ACL_VENC_THREAD_ID_UINT64, sizeof tid, &got_size, &tid));
    EXPECT(tid == (uint64_t)report_thread && got_size == 8);
    EXPECT_CODE(ACL_ERROR_INVALID_PARAM,
                aclvencSetChannelDescParam(ch, ACL_VENC_PIC_WIDTH_UINT32, 2, &width));
}

static void encode(void)
{
    static unsigned char host[PIC_SIZE];
    void *pics[FRAMES];
    acldvppPicDesc *descs[FRAMES];
    int i, x, y;
    aclvencChannelDesc *ch = aclvencCreateChannelDesc();
    EXPECT(ch != NULL);
    EXPECT_CODE(ACL_ERROR_INVALID_PARAM, aclvencCreateChannel(ch));      /* no callback yet */
    EXPECT_CODE(ACL_ERROR_INVALID_PARAM, aclvencSetChannelDescCallback(ch, NULL));
    CHECK(aclvencSetChannelDescThreadId(ch, (uint64_t)report_thread));
    CHECK(aclvencSetChannelDescCallback(ch, on_packet));
    CHECK(aclvencSetChannelDescEnType(ch, H264_MAIN_LEVEL));
    CHECK(aclvencSetChannelDescPicFormat(ch, PIXEL_FORMAT_YUV_SEMIPLANAR_420));
    CHECK(aclvencSetChannelDescPicWidth(ch, W));
    CHECK(aclvencSetChannelDescPicHeight(ch, H));
    CHECK(aclvencSetChannelDescKeyFrameInterval(ch, 4));
    EXPECT_CODE(ACL_ERROR_INVALID_PARAM, aclvencSetChannelDescPicFormat(ch, PIXEL_FORMAT_RGB_888));
    EXPECT(aclvencGetChannelDescCallback(ch) == on_packet);
    EXPECT(aclvencGetChannelDescThreadId(ch) == (uint64_t)report_thread);
    EXPECT(aclvencGetChannelDescPicWidth(ch) == W && aclvencGetChannelDescEnType(ch) == 2);
    EXPECT(aclvencGetChannelDescKeyFrameInterval(ch) == 4);
    EXPECT(aclvencGetChannelDescChannelId(ch) == 0);
    params_venc(ch);
    CHECK(aclvencCreateChannel(ch));
    printf("venc channel id %u\n", aclvencGetChannelDescChannelId(ch));
    aclvencFrameConfig *cfg = aclvencCreateFrameConfig();
    EXPECT(cfg != NULL);
    for (i = 0; i < FRAMES; i++) {
        for (y = 0; y < H; y++)               /* a gradient that moves 4 pixels a frame */
            for (x = 0; x < W; x++) host[y * W + x] = (unsigned char)((x + y + 4 * i) & 0xff);
        memset(host + W * H, 128, W * H / 2);
        CHECK(acldvppMalloc(&pics[i], PIC_SIZE));
        CHECK(aclrtMemcpy(pics[i], PIC_SIZE, host, PIC_SIZE, ACL_MEMCPY_HOST_TO_DEVICE));
        descs[i] = nv12(pics[i]);
        tags[i] = i;
        CHECK(aclvencSetFrameConfigEos(cfg, i == FRAMES - 1));
        CHECK(aclvencSetFrameConfigForceIFrame(cfg, i == 0));
        CHECK(aclvencSendFrame(ch, descs[i], NULL, cfg, &tags[i]));
    }
    EXPECT(aclvencGetFrameConfigEos(cfg) == 1 && aclvencGetFrameConfigForceIFrame(cfg) == 0);
    EXPECT_CODE(ACL_ERROR_INVALID_PARAM, aclvencSendFrame(NULL, descs[0], NULL, cfg, &tags[0]));
    CHECK(aclvencDestroyChannel(ch));                /* blocks until every callback ran */
    printf("venc eos %d\n", eos_seen);
    print_order("venc packets", packets, packet_order);
    CHECK(aclvencDestroyFrameConfig(cfg));
    CHECK(aclvencDestroyChannelDesc(ch));
    for (i = 0; i < FRAMES; i++) {
        CHECK(acldvppDestroyPicDesc(descs[i]));
        CHECK(acldvppFree(pics[i]));
    }
}

static void decode(void)
{
    void *outs[FRAMES], *ins[FRAMES];
    acldvppPicDesc *pics[FRAMES];
    acldvppStreamDesc *inputs[FRAMES];
    size_t offset = 0;
    int i;
    aclvdecChannelDesc *ch = aclvdecCreateChannelDesc();
    EXPECT(ch != NULL);
    CHECK(aclvdecSetChannelDescChannelId(ch, 3));
    CHECK(aclvdecSetChannelDescThreadId(ch, (uint64_t)report_thread));
    CHECK(aclvdecSetChannelDescCallback(ch, on_frame));
    CHECK(aclvdecSetChannelDescEnType(ch, H264_MAIN_LEVEL));
    CHECK(aclvdecSetChannelDescOutPicFormat(ch, PIXEL_FORMAT_YUV_SEMIPLANAR_420));
    EXPECT_CODE(ACL_ERROR_INVALID_PARAM, aclvdecSetChannelDescEnType(ch, (acldvppStreamFormat)9));
    EXPECT(aclvdecGetChannelDescCallback(ch) == on_frame && aclvdecGetChannelDescChannelId(ch) == 3);
    EXPECT(aclvdecGetChannelDescCallback(NULL) == NULL && aclvdecGetChannelDescChannelId(NULL) == 0);
    uint32_t csc = ACL_DVPP_CSC_MATRIX_BT709_NARROW, got = 0, bad = 6;
    size_t got_size = 0;
    CHECK(aclvdecSetChannelDescParam(ch, ACL_VDEC_CSC_MATRIX_UINT32, sizeof csc, &csc));
    CHECK(aclvdecGetChannelDescParam(ch, ACL_VDEC_CSC_MATRIX_UINT32, sizeof got, &got_size, &got));
    EXPECT(got == 3 && got_size == 4);
    EXPECT_CODE(ACL_ERROR_INVALID_PARAM,
                aclvdecSetChannelDescParam(ch, ACL_VDEC_CSC_MATRIX_UINT32, sizeof bad, &bad));
    CHECK(aclvdecCreateChannel(ch));
    aclvdecFrameConfig *cfg = aclvdecCreateFrameConfig();
    EXPECT(cfg != NULL);
    for (i = 0; i < packets; i++) {
        CHECK(acldvppMalloc(&ins[i], packet_size[i]));
        CHECK(aclrtMemcpy(ins[i], packet_size[i], stream_bytes + offset, packet_size[i],
                          ACL_MEMCPY_HOST_TO_DEVICE));
        offset += packet_size[i];
        inputs[i] = acldvppCreateStreamDesc();
        EXPECT(inputs[i] != NULL);
        CHECK(acldvppSetStreamDescData(inputs[i], ins[i]));
        CHECK(acldvppSetStreamDescSize(inputs[i], packet_size[i]));
        CHECK(acldvppSetStreamDescFormat(inputs[i], H264_MAIN_LEVEL));
        CHECK(acldvppSetStreamDescTimestamp(inputs[i], 1000u * i));
        CHECK(acldvppSetStreamDescEos(inputs[i], i == packets - 1));
        EXPECT(acldvppGetStreamDescData(inputs[i]) == ins[i]);
        EXPECT(acldvppGetStreamDescTimestamp(inputs[i]) == 1000u * i);
        CHECK(acldvppMalloc(&outs[i], PIC_SIZE));
        pics[i] = nv12(outs[i]);
        CHECK(aclvdecSendFrame(ch, inputs[i], pics[i], cfg, &tags[i]));
    }
    EXPECT_CODE(ACL_ERROR_INVALID_PARAM, aclvdecSendFrame(ch, inputs[0], NULL, cfg, &tags[0]));
    CHECK(aclvdecDestroyChannel(ch));
    print_order("vdec frames", frames, frame_order);
    CHECK(aclvdecDestroyFrameConfig(cfg));
    CHECK(aclvdecDestroyChannelDesc(ch));
    for (i = 0; i < packets; i++) {
        CHECK(acldvppDestroyStreamDesc(inputs[i]));
        CHECK(acldvppDestroyPicDesc(pics[i]));
        CHECK(acldvppFree(ins[i]));
        CHECK(acldvppFree(outs[i]));
    }
}

int main(int argc, char **argv)
{
    if (argc != 3) return 2;
    CHECK(aclInit(NULL));
    CHECK(aclrtSetDevice(0));
    CHECK(aclrtGetCurrentContext(&reports.context));
    EXPECT(pthread_create(&report_thread, NULL, serve_reports, &reports) == 0);
    encode();
    decode();
    reports.stop = 1;
    pthread_join(report_thread, NULL);
    printf("callbacks off their thread %d, bad %d\n", wrong_thread, bad_user);
    FILE *f = fopen(argv[1], "wb");
    EXPECT(f != NULL && fwrite(stream_bytes, 1, stream_used, f) == stream_used);
    fclose(f);
    f = fopen(argv[2], "wb");
    EXPECT(f != NULL && fwrite(lumas, W * H, (size_t)frames, f) == (size_t)frames);
    fclose(f);
    CHECK(aclrtResetDevice(0));
    CHECK(aclFinalize());
    printf("video ok\n");
    return 0;
}
