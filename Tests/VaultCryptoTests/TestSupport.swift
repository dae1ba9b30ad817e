import CardRules
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import VaultCrypto

/// A fresh temporary directory, removed by the caller with `removeTree`.
func makeTemporaryDirectory() -> String {
    var template = Array("/tmp/vault-test-XXXXXX".utf8CString)
    let path = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
    return String(cString: path!)
}

func removeTree(_ path: String) {
    try? FileManager.default.removeItem(atPath: path)
}

func fileMode(_ path: String) -> mode_t {
    var st = stat()
    stat(path, &st)
    return st.st_mode & 0o777
}

func readFile(_ path: String) -> String {
    guard let f = fopen(path, "r") else { return "" }
    defer { fclose(f) }
    var out: [UInt8] = []
    var buf = [UInt8](repeating: 0, count: 4096)
    while true {
        let n = fread(&buf, 1, buf.count, f)
        if n == 0 { break }
        out += buf[0..<n]
    }
    return String(decoding: out, as: UTF8.self)
}

func writeFile(_ path: String, _ text: String, mode: mode_t = 0o600) {
    unlink(path)
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode)
    _ = text.withCString { write(fd, $0, strlen($0)) }
    fchmod(fd, mode)
    close(fd)
}

func secure(_ s: String) -> SecureBytes { SecureBytes(Array(s.utf8)) }

func card(_ number: String, month: Int = 12, year: Int = 2030, cvc: String? = "123", name: String? = "A Cardholder") throws -> CardData {
    try CardData(number: secure(number), expiry: CardExpiry(month: month, year: year), cvc: cvc.map(secure), name: name.map(secure))
}

let fixedNow = CalendarMonth(year: 2026, month: 11)
