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
    // and VNNI, for the q8 matmul (Cascade Lake, Ice Lake, Zen 4 onward; older AVX-512 CPUs run avx2)
    bool vnni = ecx & bit_AVX512VNNI;
    return (ebx & need) == need && vnni && os_saves(0xe6);  // plus opmask, ZMM0-15 upper halves, ZMM16-31
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
    if (cpu_has_avx512()) available[n_available++] = &kernels_avx512;
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
