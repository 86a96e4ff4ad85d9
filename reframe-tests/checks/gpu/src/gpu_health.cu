// GPU health beyond a device query: on every GPU a kernel computes y = a*x + y and the result is
// checked on the host; between every ordered pair of GPUs a buffer is copied (peer-to-peer when the
// pair supports it, staged by the driver otherwise), checked, and its bandwidth reported.
// Output lines (parsed by gpu_health.py):
//   gpu_health: devices N
//   kernel device D ok|FAIL max_error E
//   copy S->D p2p yes|no ok|FAIL GB/s X
//   gpu_health: PASS|FAIL
#include <cuda_runtime.h>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

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

__global__ void saxpy(int n, float a, const float *x, float *y)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = a * x[i] + y[i];
}

static bool check_kernel(int dev, int n)
{
    CHECK(cudaSetDevice(dev));
    std::vector<float> x(n), y(n);
    for (int i = 0; i < n; ++i) {
        x[i] = static_cast<float>(i % 1000) * 0.5f;
        y[i] = static_cast<float>(i % 7);
    }
    float *dx, *dy;
    CHECK(cudaMalloc(&dx, n * sizeof(float)));
    CHECK(cudaMalloc(&dy, n * sizeof(float)));
    CHECK(cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dy, y.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    saxpy<<<(n + 255) / 256, 256>>>(n, 2.0f, dx, dy);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpy(y.data(), dy, n * sizeof(float), cudaMemcpyDeviceToHost));
    double max_err = 0.0;
    for (int i = 0; i < n; ++i) {
        double want = 2.0 * (i % 1000) * 0.5 + (i % 7);
        max_err = std::fmax(max_err, std::fabs(y[i] - want));
    }
    CHECK(cudaFree(dx));
    CHECK(cudaFree(dy));
    bool ok = max_err == 0.0;
    std::printf("kernel device %d %s max_error %g\n", dev, ok ? "ok" : "FAIL", max_err);
    return ok;
}

static bool check_copy(int src, int dst, size_t bytes)
{
    int p2p = 0;
    CHECK(cudaDeviceCanAccessPeer(&p2p, dst, src));
    if (p2p) {
        CHECK(cudaSetDevice(dst));
        cudaError_t err = cudaDeviceEnablePeerAccess(src, 0);
        if (err != cudaSuccess && err != cudaErrorPeerAccessAlreadyEnabled)
            CHECK(err);
        cudaGetLastError();   // clear "already enabled"
    }
    size_t n = bytes / sizeof(unsigned);
    std::vector<unsigned> host(n);
    for (size_t i = 0; i < n; ++i)
        host[i] = static_cast<unsigned>(i * 2654435761u) ^ (src * 131u + dst);
    unsigned *a, *b;
    CHECK(cudaSetDevice(src));
    CHECK(cudaMalloc(&a, bytes));
    CHECK(cudaMemcpy(a, host.data(), bytes, cudaMemcpyHostToDevice));
    CHECK(cudaSetDevice(dst));
    CHECK(cudaMalloc(&b, bytes));
    CHECK(cudaMemset(b, 0, bytes));
    cudaEvent_t t0, t1;
    CHECK(cudaEventCreate(&t0));
    CHECK(cudaEventCreate(&t1));
    const int reps = 10;
    CHECK(cudaEventRecord(t0));
    for (int r = 0; r < reps; ++r)
        CHECK(cudaMemcpyPeerAsync(b, dst, a, src, bytes));
    CHECK(cudaEventRecord(t1));
    CHECK(cudaEventSynchronize(t1));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, t0, t1));
    std::vector<unsigned> back(n);
    CHECK(cudaMemcpy(back.data(), b, bytes, cudaMemcpyDeviceToHost));
    bool ok = back == host;
    double gbs = ms > 0 ? reps * (double)bytes / (ms * 1e-3) / 1e9 : 0.0;
    std::printf("copy %d->%d p2p %s %s GB/s %.2f\n", src, dst, p2p ? "yes" : "no", ok ? "ok" : "FAIL", gbs);
    CHECK(cudaEventDestroy(t0));
    CHECK(cudaEventDestroy(t1));
    CHECK(cudaFree(b));
    CHECK(cudaSetDevice(src));
    CHECK(cudaFree(a));
    return ok;
}

int main(int argc, char **argv)
{
    size_t bytes = (argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 64ull) << 20;   // MiB
    int count = 0;
    CHECK(cudaGetDeviceCount(&count));
    std::printf("gpu_health: devices %d\n", count);
    bool ok = count > 0;
    for (int d = 0; d < count; ++d)
        ok &= check_kernel(d, 1 << 24);
    for (int s = 0; s < count; ++s)
        for (int d = 0; d < count; ++d)
            if (s != d)
                ok &= check_copy(s, d, bytes);
    std::printf("gpu_health: %s\n", ok ? "PASS" : "FAIL");
    return ok ? 0 : 1;
}
