#if canImport(Glibc)
import Glibc
#endif
import VaultCrypto

/// Raw reads and writes on file descriptors, so card data never passes through `String` or stdio buffers.
package enum StandardIO {
    /// Reads all of `fd` (up to `limit` bytes) into `SecureBytes`.
    /// - Throws: `INPUT_TOO_LARGE`, `IO_ERROR`.
    package static func readAll(fd: Int32 = 0, limit: Int) throws(VaultError) -> SecureBytes {
        var chunks: [SecureBytes] = []
        var total = 0
        let chunkSize = 64 * 1024
        while true {
            var eof = false
            let chunk = try SecureBytes(capacity: chunkSize) { (buf) throws(VaultError) -> Int in
                var n = 0
                while n < buf.count {
                    let r = read(fd, buf.baseAddress! + n, buf.count - n)
                    if r < 0 {
                        if errno == EINTR { continue }
                        throw VaultError(.ioError, "cannot read standard input: \(String(cString: strerror(errno)))")
                    }
                    if r == 0 { eof = true; break }
                    n += r
                }
                return n
            }
            total += chunk.count
            guard total <= limit else { throw VaultError(.inputTooLarge, "input is larger than \(limit) bytes") }
            chunks.append(chunk)
            if eof { break }
        }
        if chunks.count == 1 { return chunks[0] }
        return SecureBytes(capacity: total) { out in
            var at = 0
            for c in chunks {
                c.withUnsafeBytes { src in
                    if !src.isEmpty { (out.baseAddress! + at).copyMemory(from: src.baseAddress!, byteCount: src.count) }
                }
                at += c.count
            }
            return at
        }
    }

    /// Reads what is available (at least one byte unless end of input) into `buffer`; 0 = end.
    package static func readSome(fd: Int32 = 0, into buffer: UnsafeMutableRawBufferPointer) throws(VaultError) -> Int {
        while true {
            let r = read(fd, buffer.baseAddress!, buffer.count)
            if r >= 0 { return r }
            if errno == EINTR { continue }
            throw VaultError(.ioError, "cannot read standard input: \(String(cString: strerror(errno)))")
        }
    }

    /// Writes all of `bytes` to `fd`.
    /// - Throws: `IO_ERROR` (e.g. a closed pipe).
    package static func write(fd: Int32 = 1, _ bytes: UnsafeRawBufferPointer) throws(VaultError) {
        var at = 0
        while at < bytes.count {
            let r = Glibc.write(fd, bytes.baseAddress! + at, bytes.count - at)
            if r < 0 {
                if errno == EINTR { continue }
                throw VaultError(.ioError, "cannot write output: \(String(cString: strerror(errno)))")
            }
            at += r
        }
    }

    /// Writes a (non-secret) string to `fd`.
    package static func write(fd: Int32 = 1, _ text: String) throws(VaultError) {
        let bytes = Array(text.utf8)
        try bytes.withUnsafeBytes { b in Result { () throws(VaultError) in try write(fd: fd, b) } }.get()
    }

    /// The contents without one trailing "\n" (and, with `carriageReturn`, a "\r" before it).
    /// Sealing keeps every other byte (docs/sealed-value.md); opening and parsing may drop the CR.
    package static func droppingTrailingNewline(_ bytes: UnsafeRawBufferPointer, carriageReturn: Bool = true) -> UnsafeRawBufferPointer {
        var n = bytes.count
        if n > 0, bytes[n - 1] == 10 {
            n -= 1
            if carriageReturn, n > 0, bytes[n - 1] == 13 { n -= 1 }
        }
        return UnsafeRawBufferPointer(rebasing: bytes[0..<n])
    }

    /// Online processors, for `--lines` parallelism.
    package static var processorCount: Int { max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))) }
}
