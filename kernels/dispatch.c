// dispatch.c — which kernel variants this CPU and OS can run, and the choice of one at start-up.
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"

#if defined(__x86_64__)
#include <cpuid.h>

// The OS must save the wide registers on a context switch: XCR0 (read with xgetbv) says which it saves.
static uint64_t xcr0(void) {
    uint32_t eax, edx;
    __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
    return ((uint64_t)edx << 32) | eax;
}

static bool os_saves(uint64_t mask) {
    unsigned eax, ebx, ecx, edx;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx) || !(ecx & bit_OSXSAVE)) return false;
    return (xcr0() & mask) == mask;
}

static bool cpu_has_avx2(void) {
    unsigned eax, ebx, ecx, edx, ebx7 = 0, ecx7, edx7;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
    bool fma_f16c = (ecx & bit_FMA) && (ecx & bit_F16C);
    if (!__get_cpuid_count(7, 0, &eax, &ebx7, &ecx7, &edx7)) return false;
    return fma_f16c && (ebx7 & bit_AVX2) && os_saves(0x6);  // XMM and YMM state
}

static bool cpu_has_avx512(void) {
    unsigned eax, ebx, ecx, edx;
    if (!cpu_has_avx2() || !__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
    unsigned need = bit_AVX512F | bit_AVX512DQ | bit_AVX512BW | bit_AVX512VL;
    return (ebx & need) == need && os_saves(0xe6);  // plus opmask, ZMM0-15 upper halves, ZMM16-31
}

// AVX512_VNNI (Cascade Lake, Ice Lake, Zen 4 onward), for the avx512 variant's q8 matmul.
static bool cpu_has_avx512_vnni(void) {
    unsigned eax, ebx, ecx, edx;
    return cpu_has_avx512() && __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) && (ecx & bit_AVX512VNNI);
}

// The avx512 variant of an AVX-512 CPU without VNNI (Skylake-X): every kernel of kernels_avx512 but the q8
// matmul, which is AVX2's (bit-identical to the reference, like every variant's).
static Kernels avx512_without_vnni;
static pthread_once_t without_vnni_once = PTHREAD_ONCE_INIT;

static void make_avx512_without_vnni(void) {
    avx512_without_vnni = kernels_avx512;
    avx512_without_vnni.matmul_q8 = q8_matmul_avx2;
}

const Kernels *kernels_avx512_without_vnni(void) {
    pthread_once(&without_vnni_once, make_avx512_without_vnni);
    return &avx512_without_vnni;
}
#endif

// cpuid traps to the hypervisor in a virtual machine (microseconds): the list is made once.
static const Kernels *available[4];
static int n_available;
static pthread_once_t available_once = PTHREAD_ONCE_INIT;

static void find_available(void) {
    available[n_available++] = &kernels_scalar;
#if defined(__x86_64__)
    if (cpu_has_avx2()) available[n_available++] = &kernels_avx2;
    if (cpu_has_avx512())
        available[n_available++] = cpu_has_avx512_vnni() ? &kernels_avx512 : kernels_avx512_without_vnni();
#elif defined(__aarch64__)
    available[n_available++] = &kernels_neon;  // Advanced SIMD is mandatory in ARMv8-A
#endif
}

const Kernels *const *kernels_available(int *count) {
    pthread_once(&available_once, find_available);
    *count = n_available;
    return available;
}

const Kernels *kernels_select(const char **why) {
    int n;
    const Kernels *const *list = kernels_available(&n);
    const char *want = getenv("SPECDEC_ISA");
    if (!want || !*want) return list[n - 1];
    for (int i = 0; i < n; i++)
        if (strcmp(list[i]->name, want) == 0) return list[i];
    if (why) *why = "SPECDEC_ISA names a kernel variant that this binary or CPU lacks (try scalar, avx2, avx512 "
                    "or neon)";
    return NULL;
}
