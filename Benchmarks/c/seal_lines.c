/* The plain C baseline for `vault seal --lines`: read lines, crypto_box_seal each, write
 * vault:v1:<kid>:<base64> lines. Single-threaded, stdio-buffered: what a careful C tool does.
 * Build: cc -O2 -o seal_lines seal_lines.c -lsodium ; run: seal_lines <kid> <pk-base64> < in > out */
#include <sodium.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc != 3 || sodium_init() < 0) return 2;
    unsigned char pk[crypto_box_PUBLICKEYBYTES];
    size_t pklen;
    if (sodium_base642bin(pk, sizeof pk, argv[2], strlen(argv[2]), NULL, &pklen, NULL, sodium_base64_VARIANT_ORIGINAL) != 0 || pklen != 32) return 2;
    static char line[1 << 20];
    static unsigned char box[(1 << 20) + crypto_box_SEALBYTES];
    static char b64[((1 << 20) + crypto_box_SEALBYTES) * 4 / 3 + 8];
    while (fgets(line, sizeof line, stdin)) {
        size_t n = strlen(line);
        if (n && line[n - 1] == '\n') n--;
        crypto_box_seal(box, (unsigned char *)line, n, pk);
        sodium_bin2base64(b64, sizeof b64, box, n + crypto_box_SEALBYTES, sodium_base64_VARIANT_ORIGINAL);
        fputs("vault:v1:", stdout);
        fputs(argv[1], stdout);
        fputc(':', stdout);
        fputs(b64, stdout);
        fputc('\n', stdout);
    }
    return 0;
}
