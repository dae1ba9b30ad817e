#ifndef VAULT_BENCH_BASELINE_H
#define VAULT_BENCH_BASELINE_H
#include <stddef.h>
#include <stdint.h>

/// crypto_box_seal of `len` bytes, `iterations` times; returns nanoseconds taken.
uint64_t baseline_seal(const unsigned char *pk, size_t len, int iterations);
/// crypto_box_seal_open of one sealed message, `iterations` times; returns nanoseconds.
uint64_t baseline_seal_open(const unsigned char *pk, const unsigned char *sk, size_t len, int iterations);
/// What an envelope costs in C: one seal of a 32-byte key plus `fields` XChaCha20-Poly1305
/// encryptions of `field_len` bytes, with one randombytes call; returns nanoseconds.
uint64_t baseline_envelope(const unsigned char *pk, int fields, size_t field_len, int iterations);
/// libsodium's version string.
const char *sodium_version_string_shim(void);
/// Monotonic nanoseconds.
uint64_t baseline_now_ns(void);
#endif
