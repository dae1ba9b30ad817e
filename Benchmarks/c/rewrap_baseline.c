/* The floor for `vault rewrap`: what re-sealing one card envelope costs in plain C, per core.
 * Per envelope: crypto_box_seal_open of the 32-byte data key, XChaCha20-Poly1305 decryption of
 * three fields (pan, exp, cvc), then a fresh data key sealed with crypto_box_seal to the new key
 * and the three fields encrypted again. Prints envelopes per second. Usage: rewrap_baseline [N] */
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 5000;
    if (sodium_init() < 0) return 1;
    unsigned char pk1[32], sk1[32], pk2[32], sk2[32];
    crypto_box_keypair(pk1, sk1);
    crypto_box_keypair(pk2, sk2);
    const char *fields[3] = {"4242424242424242", "12/2030", "123"};
    unsigned char dk[32], boxed[32 + crypto_box_SEALBYTES], ct[3][64], nonce[3][24];
    unsigned long long clen[3];
    const unsigned char ad[] = "vault:v1:0123456789abcdef:env_0123456789abcdef0123456789abcdef:pan";
    randombytes_buf(dk, 32);
    crypto_box_seal(boxed, dk, 32, pk1);
    for (int f = 0; f < 3; f++) {
        randombytes_buf(nonce[f], 24);
        crypto_aead_xchacha20poly1305_ietf_encrypt(ct[f], &clen[f], (const unsigned char *)fields[f], strlen(fields[f]),
                                                   ad, sizeof ad - 1, NULL, nonce[f], dk);
    }
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    unsigned char opened[32], plain[64], out[64], newbox[32 + crypto_box_SEALBYTES], newkey[32], newnonce[24];
    unsigned long long plen, olen;
    for (int i = 0; i < n; i++) {
        if (crypto_box_seal_open(opened, boxed, sizeof boxed, pk1, sk1) != 0) return 2;
        randombytes_buf(newkey, 32);
        crypto_box_seal(newbox, newkey, 32, pk2);
        for (int f = 0; f < 3; f++) {
            if (crypto_aead_xchacha20poly1305_ietf_decrypt(plain, &plen, NULL, ct[f], clen[f], ad, sizeof ad - 1, nonce[f], opened) != 0) return 3;
            randombytes_buf(newnonce, 24);
            crypto_aead_xchacha20poly1305_ietf_encrypt(out, &olen, plain, plen, ad, sizeof ad - 1, NULL, newnonce, newkey);
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    double s = (b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9;
    printf("%.0f\n", n / s);
    return 0;
}
