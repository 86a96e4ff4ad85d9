// GPU health that measures: on every GPU a verified FMA loop in FP64 and FP32 (achieved GFLOP/s),
// host<->device copies from pinned and pageable memory, a device-to-device copy, every ordered GPU
// pair (peer-to-peer where supported), and a host thread that migrates over every allowed CPU
// while the GPU's context is live (the paper: deviceQuery passed while threadMigration failed).
// Every result is checked on the host; nothing unverified is reported as ok.
//
// Output (parsed by src/stackproof/gpu_health.py; keep in step with it):
//   gpu_health: version 2 devices N
//   device D pci BUSID sms S name NAME...
//   fma D fp64|fp32 ok|FAIL gflops X iterations N
//   copy D h2d|d2h pinned|pageable ok|FAIL GB/s X
//   copy D d2d device ok|FAIL GB/s X            (read + write bytes per second, as HBM is rated)
//   p2p S D access yes|no ok|FAIL GB/s X
//   migrate D cpus N visited V ok|FAIL
//   gpu_health: PASS|FAIL
#include <cuda_runtime.h>
#include <sched.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

static bool g_ok = true;

#define CHECK(call)                                                                            \
    do {                                                                                       \
        cudaError_t err_ = (call);                                                             \
        if (err_ != cudaSuccess) {                                                             \
            std::printf("gpu_health: CUDA error %s at %s:%d\n", cudaGetErrorString(err_),      \
                        __FILE__, __LINE__);                                                   \
            std::printf("gpu_health: FAIL\n");                                                 \
            std::exit(1);                                                                      \
        }                                                                                      \
    } while (0)

// A timed region of the current device's default stream: both events exist before it starts, so
// creating them is not timed; stop_ms() is the milliseconds until all the region queued has run.
struct Timer {
    cudaEvent_t t0, t1;
    Timer()
    {
        CHECK(cudaEventCreate(&t0));
        CHECK(cudaEventCreate(&t1));
        CHECK(cudaEventRecord(t0));
    }
    float stop_ms()
    {
        CHECK(cudaEventRecord(t1));
        CHECK(cudaEventSynchronize(t1));
        float ms = 0;
        CHECK(cudaEventElapsedTime(&ms, t0, t1));
        CHECK(cudaEventDestroy(t0));
        CHECK(cudaEventDestroy(t1));
        return ms;
    }
};

// ---- FMA throughput -------------------------------------------------------------------------------
// Eight independent chains x = x * a + b per thread. a = 1 and b = 0.5 arrive as arguments, so the
// compiler must emit real FMAs, and every chain ends exactly at x0 + n * b (all values are
// multiples of 0.5 well below 2^23): the host checks each thread's sum bit for bit.
constexpr int CHAINS = 8;

template <typename T>
__global__ void fma_loop(T a, T b, long n, T *out)
{
    int tid = blockIdx.x * blockDim.x + threadIdx.x;
    T x[CHAINS];
#pragma unroll
    for (int c = 0; c < CHAINS; ++c)
        x[c] = static_cast<T>((tid + c) % 1024);
#pragma unroll 4
    for (long i = 0; i < n; ++i) {
#pragma unroll
        for (int c = 0; c < CHAINS; ++c)
            x[c] = x[c] * a + b;
    }
    T sum = 0;
#pragma unroll
    for (int c = 0; c < CHAINS; ++c)
        sum += x[c];
    out[tid] = sum;
}

template <typename T>
static float time_fma(int blocks, int threads, long n, T *d_out)
{
    Timer timer;
    fma_loop<T><<<blocks, threads>>>(static_cast<T>(1), static_cast<T>(0.5), n, d_out);
    CHECK(cudaGetLastError());
    return timer.stop_ms();
}

template <typename T>
static void check_fma(int dev, const char *label)
{
    cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, dev));
    const int threads = 256;
    int per_sm = 0;
    CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fma_loop<T>, threads, 0));
    int blocks = prop.multiProcessorCount * std::max(per_sm, 1);
    long total = static_cast<long>(blocks) * threads;
    T *d_out;
    CHECK(cudaMalloc(&d_out, total * sizeof(T)));
    // Calibrate: about 0.2 s per measurement, at most 2^20 iterations (exactness bound above).
    long n = 4096;
    float ms = time_fma<T>(blocks, threads, n, d_out);
    n = std::min(1L << 20, std::max(4096L, static_cast<long>(n * (200.0 / std::max(ms, 0.01f)))));
    ms = time_fma<T>(blocks, threads, n, d_out);
    std::vector<T> out(total);
    CHECK(cudaMemcpy(out.data(), d_out, total * sizeof(T), cudaMemcpyDeviceToHost));
    CHECK(cudaFree(d_out));
    bool ok = true;
    for (long t = 0; t < total && ok; ++t) {
        double want = 0;
        for (int c = 0; c < CHAINS; ++c)
            want += (t + c) % 1024 + 0.5 * n;
        ok = static_cast<double>(out[t]) == want;
    }
    double gflops = ms > 0 ? 2.0 * CHAINS * n * static_cast<double>(total) / (ms * 1e-3) / 1e9 : 0.0;
    std::printf("fma %d %s %s gflops %.1f iterations %ld\n", dev, label, ok ? "ok" : "FAIL", gflops, n);
    g_ok &= ok;
}

// ---- copies -----------------------------------------------------------------------------------------
static void fill(unsigned *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; ++i)
        p[i] = static_cast<unsigned>(i * 2654435761u) ^ seed;
}

static bool same(const unsigned *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; ++i)
        if (p[i] != (static_cast<unsigned>(i * 2654435761u) ^ seed))
            return false;
    return true;
}

static double timed_copy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind, int reps)
{
    CHECK(cudaMemcpy(dst, src, bytes, kind));   // warm-up (page faults, mappings)
    Timer timer;
    for (int r = 0; r < reps; ++r)
        CHECK(cudaMemcpy(dst, src, bytes, kind));
    float ms = timer.stop_ms();
    return ms > 0 ? reps * static_cast<double>(bytes) / (ms * 1e-3) / 1e9 : 0.0;
}

// One measured copy kind: `reps` timed copies src -> dst, then the destination's content is brought
// to `host` (when dst is on the device) and checked for the pattern `seed`. A host destination is
// cleared first, so a copy that moved nothing cannot pass. `scale` turns bytes copied into bytes
// moved (2 for device-to-device: read + write, as HBM is rated).
static void copy_check(int dev, const char *what, const char *mem, void *dst, const void *src,
                       cudaMemcpyKind kind, size_t bytes, unsigned *host, unsigned seed, double scale)
{
    const int reps = 10;
    if (kind == cudaMemcpyDeviceToHost)
        std::memset(dst, 0, bytes);
    double gbs = scale * timed_copy(dst, src, bytes, kind, reps);
    if (kind != cudaMemcpyDeviceToHost) {
        std::memset(host, 0, bytes);
        CHECK(cudaMemcpy(host, dst, bytes, cudaMemcpyDeviceToHost));
    }
    bool ok = same(host, bytes / sizeof(unsigned), seed);
    std::printf("copy %d %s %s %s GB/s %.2f\n", dev, what, mem, ok ? "ok" : "FAIL", gbs);
    g_ok &= ok;
}

static void check_copies(int dev, size_t bytes)
{
    size_t n = bytes / sizeof(unsigned);
    unsigned *pinned, *d_a, *d_b;
    CHECK(cudaMallocHost(&pinned, bytes));
    std::vector<unsigned> pageable_buf(n);
    unsigned *pageable = pageable_buf.data();
    CHECK(cudaMalloc(&d_a, bytes));
    CHECK(cudaMalloc(&d_b, bytes));
    const unsigned first = 11u + dev, second = 23u + dev;
    const cudaMemcpyKind h2d = cudaMemcpyHostToDevice, d2h = cudaMemcpyDeviceToHost;

    fill(pinned, n, first);
    copy_check(dev, "h2d", "pinned", d_a, pinned, h2d, bytes, pinned, first, 1.0);
    fill(pageable, n, second);
    copy_check(dev, "h2d", "pageable", d_a, pageable, h2d, bytes, pageable, second, 1.0);
    // d_a now holds the second pattern: device to device, then both host kinds back from d_b
    copy_check(dev, "d2d", "device", d_b, d_a, cudaMemcpyDeviceToDevice, bytes, pinned, second, 2.0);
    copy_check(dev, "d2h", "pinned", pinned, d_b, d2h, bytes, pinned, second, 1.0);
    copy_check(dev, "d2h", "pageable", pageable, d_b, d2h, bytes, pageable, second, 1.0);

    CHECK(cudaFree(d_a));
    CHECK(cudaFree(d_b));
    CHECK(cudaFreeHost(pinned));
}

static void check_p2p(int src, int dst, size_t bytes)
{
    int access = 0;
    CHECK(cudaDeviceCanAccessPeer(&access, dst, src));
    if (access) {
        CHECK(cudaSetDevice(dst));
        cudaError_t err = cudaDeviceEnablePeerAccess(src, 0);
        if (err != cudaSuccess && err != cudaErrorPeerAccessAlreadyEnabled)
            CHECK(err);
        cudaGetLastError();   // clear "already enabled"
    }
    size_t n = bytes / sizeof(unsigned);
    std::vector<unsigned> host(n);
    fill(host.data(), n, src * 131u + dst);
    unsigned *a, *b;
    CHECK(cudaSetDevice(src));
    CHECK(cudaMalloc(&a, bytes));
    CHECK(cudaMemcpy(a, host.data(), bytes, cudaMemcpyHostToDevice));
    CHECK(cudaSetDevice(dst));
    CHECK(cudaMalloc(&b, bytes));
    CHECK(cudaMemset(b, 0, bytes));
    CHECK(cudaMemcpyPeer(b, dst, a, src, bytes));   // warm-up
    const int reps = 10;
    Timer timer;
    for (int r = 0; r < reps; ++r)
        CHECK(cudaMemcpyPeerAsync(b, dst, a, src, bytes));
    float ms = timer.stop_ms();
    std::fill(host.begin(), host.end(), 0u);
    CHECK(cudaMemcpy(host.data(), b, bytes, cudaMemcpyDeviceToHost));
    bool ok = same(host.data(), n, src * 131u + dst);
    double gbs = ms > 0 ? reps * static_cast<double>(bytes) / (ms * 1e-3) / 1e9 : 0.0;
    std::printf("p2p %d %d access %s %s GB/s %.2f\n", src, dst, access ? "yes" : "no", ok ? "ok" : "FAIL", gbs);
    g_ok &= ok;
    CHECK(cudaFree(b));
    CHECK(cudaSetDevice(src));
    CHECK(cudaFree(a));
}

// ---- thread migration with a live context ------------------------------------------------------------
__global__ void bump(unsigned *slot, unsigned value)
{
    *slot += value;
}

// The calling thread moves to every CPU it may run on; on each it launches a kernel and copies the
// result back through the same (live) context, and checks it really runs on that CPU. Then one new
// thread per CPU does the same from there, sharing the context.
static void check_migration(int dev)
{
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) {
        std::printf("migrate %d cpus 0 visited 0 FAIL\n", dev);
        g_ok = false;
        return;
    }
    std::vector<int> cpus;
    for (int c = 0; c < CPU_SETSIZE; ++c)
        if (CPU_ISSET(c, &allowed))
            cpus.push_back(c);
    CHECK(cudaSetDevice(dev));
    unsigned *slot;
    CHECK(cudaMalloc(&slot, sizeof(unsigned)));
    CHECK(cudaMemset(slot, 0, sizeof(unsigned)));
    unsigned expect = 0;
    int visited = 0;
    bool ok = true;
    auto step = [&](int cpu, unsigned value) {
        bool here = sched_getcpu() == cpu;
        bump<<<1, 1>>>(slot, value);
        bool launched = cudaGetLastError() == cudaSuccess;
        unsigned got = 0;
        bool copied = cudaMemcpy(&got, slot, sizeof(got), cudaMemcpyDeviceToHost) == cudaSuccess;
        return here && launched && copied && got == expect + value;
    };
    for (int cpu : cpus) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        bool moved = sched_setaffinity(0, sizeof(one), &one) == 0;
        bool good = moved && step(cpu, static_cast<unsigned>(cpu) + 1);
        if (good) {
            expect += cpu + 1;
            ++visited;
        }
        ok &= good;
    }
    sched_setaffinity(0, sizeof(allowed), &allowed);
    for (int cpu : cpus) {
        bool good = false;
        std::thread worker([&] {
            cpu_set_t one;
            CPU_ZERO(&one);
            CPU_SET(cpu, &one);
            good = sched_setaffinity(0, sizeof(one), &one) == 0 && cudaSetDevice(dev) == cudaSuccess &&
                   step(cpu, 1000u + cpu);
        });
        worker.join();
        if (good)
            expect += 1000u + cpu;
        ok &= good;
        visited += good;
    }
    CHECK(cudaFree(slot));
    std::printf("migrate %d cpus %zu visited %d %s\n", dev, cpus.size(), visited,
                ok && visited == static_cast<int>(2 * cpus.size()) ? "ok" : "FAIL");
    g_ok &= ok;
}

int main(int argc, char **argv)
{
    size_t mib = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 256;
    if (mib == 0 || mib > 16384) {
        std::printf("gpu_health: copy size must be 1..16384 MiB (got %s)\ngpu_health: FAIL\n", argv[1]);
        return 2;
    }
    size_t bytes = mib << 20;
    int count = 0;
    CHECK(cudaGetDeviceCount(&count));
    std::printf("gpu_health: version 2 devices %d\n", count);
    for (int d = 0; d < count; ++d) {
        cudaDeviceProp prop;
        CHECK(cudaGetDeviceProperties(&prop, d));
        std::printf("device %d pci %04x:%02x:%02x.0 sms %d name %s\n", d, prop.pciDomainID, prop.pciBusID,
                    prop.pciDeviceID, prop.multiProcessorCount, prop.name);
    }
    for (int d = 0; d < count; ++d) {
        CHECK(cudaSetDevice(d));
        check_fma<double>(d, "fp64");
        check_fma<float>(d, "fp32");
        check_copies(d, bytes);
        check_migration(d);
    }
    for (int s = 0; s < count; ++s)
        for (int d = 0; d < count; ++d)
            if (s != d)
                check_p2p(s, d, bytes);
    bool ok = g_ok && count > 0;
    std::printf("gpu_health: %s\n", ok ? "PASS" : "FAIL");
    return ok ? 0 : 1;
}
