#include "baseline.h"
#include <sodium.h>
#include <string.h>
#include <time.h>

uint64_t baseline_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t baseline_seal(const unsigned char *pk, size_t len, int iterations) {
    if (sodium_init() < 0) return 0;
    unsigned char msg[4096], out[4096 + crypto_box_SEALBYTES];
    memset(msg, '4', sizeof msg);
    uint64_t t0 = baseline_now_ns();
    for (int i = 0; i < iterations; i++) {
        crypto_box_seal(out, msg, len, pk);
    }
    return baseline_now_ns() - t0;
}

uint64_t baseline_seal_open(const unsigned char *pk, const unsigned char *sk, size_t len, int iterations) {
    if (sodium_init() < 0) return 0;
    unsigned char msg[4096], box[4096 + crypto_box_SEALBYTES], out[4096];
    memset(msg, '4', sizeof msg);
    crypto_box_seal(box, msg, len, pk);
    uint64_t t0 = baseline_now_ns();
    for (int i = 0; i < iterations; i++) {
        if (crypto_box_seal_open(out, box, len + crypto_box_SEALBYTES, pk, sk) != 0) return 0;
    }
    return baseline_now_ns() - t0;
}

uint64_t baseline_envelope(const unsigned char *pk, int fields, size_t field_len, int iterations) {
    if (sodium_init() < 0) return 0;
    unsigned char rnd[16 + 32 + 4 * 24], box[32 + crypto_box_SEALBYTES];
    unsigned char msg[64], ct[64 + 16], ad[64];
    unsigned long long clen;
    memset(msg, '4', sizeof msg);
    memset(ad, 'a', sizeof ad);
    uint64_t t0 = baseline_now_ns();
    for (int i = 0; i < iterations; i++) {
        randombytes_buf(rnd, sizeof rnd);
        crypto_box_seal(box, rnd + 16, 32, pk);
        for (int f = 0; f < fields; f++) {
            crypto_aead_xchacha20poly1305_ietf_encrypt(ct, &clen, msg, field_len, ad, 40, NULL, rnd + 48 + 24 * f, rnd + 16);
        }
    }
    sodium_memzero(rnd, sizeof rnd);
    return baseline_now_ns() - t0;
}

const char *sodium_version_string_shim(void) { return sodium_version_string(); }
