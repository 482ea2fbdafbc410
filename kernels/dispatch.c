// dispatch.c — which kernel variants this CPU and OS can run, and the choice of one at start-up.
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
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

// AVX512_VNNI (Cascade Lake, Ice Lake, Zen 4 onward), for the avx512 variant's q8 matmul; AVX512_BF16 (Cooper
// Lake, Sapphire Rapids, Zen 4 onward), for its matmul_bf16_dot.
static bool cpu_has_avx512_feature(int leaf7_subleaf, unsigned eax_bit, unsigned ecx_bit) {
    unsigned eax, ebx, ecx, edx;
    return cpu_has_avx512() && __get_cpuid_count(7, leaf7_subleaf, &eax, &ebx, &ecx, &edx) &&
           ((eax & eax_bit) || (ecx & ecx_bit));
}

static bool cpu_has_avx512_vnni(void) { return cpu_has_avx512_feature(0, 0, bit_AVX512VNNI); }
static bool cpu_has_avx512_bf16(void) { return cpu_has_avx512_feature(1, bit_AVX512BF16, 0); }

// AVX-VNNI (Alder Lake, Zen 5 onward): vpdpbusd on 256-bit registers without AVX-512.
static bool cpu_has_avx_vnni(void) {
    unsigned eax, ebx, ecx, edx;
    return cpu_has_avx2() && __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) && (eax & bit_AVXVNNI);
}

// The avxvnni variant: avx2's table with AVX-VNNI's quantized matmuls (q8_avx2.c, q4_avx2.c), bit-identical to the
// reference like every variant's.
static Kernels kernels_avxvnni;

static const Kernels *make_avxvnni(void) {
    kernels_avxvnni = kernels_avx2;
    kernels_avxvnni.name = "avxvnni";
    kernels_avxvnni.matmul_q8 = q8_matmul_avxvnni;
    kernels_avxvnni.matmul_q4 = q4_matmul_avxvnni;
    kernels_avxvnni.matmul_q8_0 = q8_0_matmul_avxvnni;
    kernels_avxvnni.matmul_q4_0 = q4_0_matmul_avxvnni;
    kernels_avxvnni.matmul_q5[0] = q5_0_matmul_avxvnni;
    kernels_avxvnni.matmul_q5[1] = q5_1_matmul_avxvnni;
    kernels_avxvnni.matmul_q5[2] = q4_1_matmul_avxvnni;
    return &kernels_avxvnni;
}

// kernels_avx512 less what a CPU without VNNI or without BF16 lacks: [vnni][bf16], [1][1] unused.
static Kernels avx512_trimmed[2][2];
static pthread_once_t trimmed_once = PTHREAD_ONCE_INIT;

static void make_avx512_trimmed(void) {
    for (int vnni = 0; vnni < 2; vnni++)
        for (int bf16 = 0; bf16 < 2; bf16++) {
            Kernels *k = &avx512_trimmed[vnni][bf16];
            *k = kernels_avx512;
            if (!vnni) {  // AVX2's: bit-identical to the reference, like every variant's
                k->matmul_q8 = q8_matmul_avx2;
                k->matmul_q4 = q4_matmul_avx2;
                k->matmul_q8_0 = q8_0_matmul_avx2;
                k->matmul_q4_0 = q4_0_matmul_avx2;
                for (int i = 0; i < 3; i++) k->matmul_q5[i] = kernels_avx2.matmul_q5[i];
                for (int i = 0; i < 3; i++) k->matmul_k[i] = kernels_avx2.matmul_k[i];
            }
            if (!bf16) k->matmul_bf16_dot = NULL;
        }
}

const Kernels *kernels_avx512_for(bool vnni, bool bf16) {
    if (vnni && bf16) return &kernels_avx512;
    pthread_once(&trimmed_once, make_avx512_trimmed);
    return &avx512_trimmed[vnni][bf16];
}
#endif

// cpuid traps to the hypervisor in a virtual machine (microseconds): the list is made once.
static const Kernels *available[5];
static int n_available;
static pthread_once_t available_once = PTHREAD_ONCE_INIT;

static void find_available(void) {
    available[n_available++] = &kernels_scalar;
#if defined(__x86_64__)
    if (cpu_has_avx2()) available[n_available++] = &kernels_avx2;
    if (cpu_has_avx_vnni()) available[n_available++] = make_avxvnni();
    if (cpu_has_avx512())
        available[n_available++] = kernels_avx512_for(cpu_has_avx512_vnni(), cpu_has_avx512_bf16());
#elif defined(__aarch64__)
    available[n_available++] = &kernels_neon;  // Advanced SIMD is mandatory in ARMv8-A
#endif
}

const Kernels *const *kernels_available(int *count) {
    pthread_once(&available_once, find_available);
    *count = n_available;
    return available;
}

const Kernels *kernels_select(char *why, size_t why_size) {
    int n;
    const Kernels *const *list = kernels_available(&n);
    const char *want = getenv("SPECDEC_ISA");
    if (!want || !*want) return list[n - 1];
    for (int i = 0; i < n; i++)
        if (strcmp(list[i]->name, want) == 0) return list[i];
    if (!why) return NULL;
    char names[64] = "";  // those this CPU runs, the best last
    for (int i = 0; i < n; i++)
        snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i == 0 ? "" : i + 1 < n ? ", " : " or ",
                 list[i]->name);
    snprintf(why, why_size, "SPECDEC_ISA=%.32s: not a kernel variant of this binary and CPU; it runs %s (default: "
             "%s)", want, names, list[n - 1]->name);
    return NULL;
}
