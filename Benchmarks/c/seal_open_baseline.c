/* The floor for `vault import` and `vault export`: raw libsodium, one core.
 * Prints two rates per second: crypto_box_seal of a card JSON (what each imported card costs at
 * least: its envelope's data key is one sealed box) and crypto_box_seal_open of the same box
 * (what opening a stored envelope costs at least; an export also seals once to the recipient).
 * Usage: seal_open_baseline [N] */
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double seconds(struct timespec a, struct timespec b) { return (b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9; }

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 20000;
    if (sodium_init() < 0) return 1;
    unsigned char pk[32], sk[32];
    crypto_box_keypair(pk, sk);
    const char *card = "{\"number\":\"4242424242424242\",\"exp_month\":12,\"exp_year\":2030}";
    size_t len = strlen(card);
    unsigned char box[128 + crypto_box_SEALBYTES], opened[128];
    struct timespec a, b, c;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < n; i++) crypto_box_seal(box, (const unsigned char *)card, len, pk);
    clock_gettime(CLOCK_MONOTONIC, &b);
    for (int i = 0; i < n; i++)
        if (crypto_box_seal_open(opened, box, len + crypto_box_SEALBYTES, pk, sk) != 0) return 2;
    clock_gettime(CLOCK_MONOTONIC, &c);
    printf("%.0f %.0f\n", n / seconds(a, b), n / seconds(b, c));
    return 0;
}
