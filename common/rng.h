/* rng.h - counter-based random numbers, identical on the host and on a CUDA device.
 *
 * hp_rng_uniform(seed, i) is a pure function of (seed, i): the i-th draw of stream `seed`,
 * uniform in [0, 1) with 24 bits. Dropout masks and weight initialisation use it, so that a
 * given seed gives the same numbers on every backend and in every process.
 */
#ifndef HP_RNG_H
#define HP_RNG_H

#include <stdint.h>

#ifdef __CUDACC__
#define HP_HOSTDEV __host__ __device__
#else
#define HP_HOSTDEV
#endif

/* splitmix64's finaliser: a bijective 64-bit mix. */
HP_HOSTDEV static inline uint64_t hp_rng_mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

HP_HOSTDEV static inline uint64_t hp_rng_u64(uint64_t seed, uint64_t i)
{
    return hp_rng_mix(hp_rng_mix(seed + 0x9e3779b97f4a7c15ULL) + i * 0x9e3779b97f4a7c15ULL);
}

HP_HOSTDEV static inline float hp_rng_uniform(uint64_t seed, uint64_t i)
{
    return (float)(hp_rng_u64(seed, i) >> 40) * (1.0f / 16777216.0f);
}

/* Derive a sub-stream seed from a seed and a tag (layer index, step, ...). */
HP_HOSTDEV static inline uint64_t hp_rng_derive(uint64_t seed, uint64_t tag)
{
    return hp_rng_mix(seed ^ hp_rng_mix(tag + 0x632be59bd9b4e019ULL));
}

/* FNV-1a over n bytes, continuing from h (start with HP_FNV_OFFSET): a stable fingerprint
 * of parameters or of a unit's description (not for randomness). */
#define HP_FNV_OFFSET 1469598103934665603ULL

static inline uint64_t hp_fnv1a(uint64_t h, const void *p, unsigned long n)
{
    const unsigned char *b = (const unsigned char *)p;

    for (unsigned long i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ULL;
    return h;
}

#endif
